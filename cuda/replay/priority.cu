// Priority updates from |TD error| and the sum-tree rebuild, in one launch.
#include "foxc/isv_slots.h"
#include "foxc/replay.h"

// A stored transition's priority (|td| + REPLAY_PRIORITY_EPS)^alpha; e = |td| is finite.
__device__ __forceinline__ float leaf_priority(float e, float alpha)
{
    return powf(e + REPLAY_PRIORITY_EPS, alpha);
}

// First s in [0, batch) with index[s] >= bound (batch when none): index is non-decreasing.
__device__ __forceinline__ int first_at_or_above(const int* __restrict__ index, int batch, int bound)
{
    int lo = 0, hi = batch;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (index[mid] < bound) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// The `level` nodes tree[level .. 2*level) are cut into runs of `span` (a power of two,
// 2 <= span <= REPLAY_SUBTREE_SPAN, dividing level); this sums run g up to its own root, writing
// every node of that subtree as tree[k] = tree[2k] + tree[2k+1]: the one float64 add per node of a
// level-by-level rebuild, so the tree's bits do not depend on how it is cut into blocks. The subtree
// is held in shared memory in heap order (local node j has children 2j and 2j+1, the run sits at
// [span, 2*span)), with one __syncthreads() per level; local node w + t of the level w wide is
// global node (level/span + g) * w + t. The run is read from L2 (__ldcg): other blocks of the
// launch may have written it. Called by all REPLAY_SUBTREE_BLOCK threads of a block.
__device__ __forceinline__ void subtree_sums(double* __restrict__ node, double* __restrict__ tree, int level,
                                             int span, int g)
{
    const int t = threadIdx.x;
    const long long first = (long long)level + (long long)g * span;
    for (int i = t; i < span; i += REPLAY_SUBTREE_BLOCK) node[span + i] = __ldcg(tree + first + i);
    __syncthreads();
    const long long root = level / span + g;
    for (int w = span / 2; w >= 1; w >>= 1) {
        if (t < w) {
            const double sum = node[2 * (w + t)] + node[2 * (w + t) + 1];
            node[w + t] = sum;
            tree[root * w + t] = sum;
        }
        __syncthreads();
    }
}

// replay_update_tree — grid (capacity / span) exactly, span = min(capacity, REPLAY_SUBTREE_SPAN),
// block (REPLAY_SUBTREE_BLOCK).
// The priorities: p_s = (|td_s| + REPLAY_PRIORITY_EPS)^alpha, alpha = isv[ISV_PER_ALPHA], is written
// to leaf index[s] (skipped for index -1 and non-finite td). index is non-decreasing (replay_sample
// writes it so), so the samples whose leaf lies in block g's run [g*span, (g+1)*span) are one range
// of s, found by binary search, and block g writes exactly its own run's leaves: the run it sums
// next needs no other block. Duplicates are adjacent; only the last of each run of equal indices
// writes, so exactly one thread writes a leaf and the result is the same on every run.
// The rebuild: block g sums its run up to its subtree root (subtree_sums), which writes every node
// at or below level capacity / span. The top: each block's thread 0 bumps ticket[0] (an integer
// atomic) after a __threadfence(); the block drawing the last ticket sums the capacity / span
// subtree roots up to the root (when there are more than one) and sets
// max_priority[0] = max(max_priority[0], max_s p_s) by a block reduction (max is exact: any order
// gives the same value), then puts ticket[0] back to 0. Which block is last changes no value.
// Shape: runs of REPLAY_SUBTREE_SPAN leaves keep one run in shared memory (16 KB of float64) and
// the top (at most MAX_CAPACITY / REPLAY_SUBTREE_SPAN roots) within one block's run.
// With batch 0 it is the rebuild alone (ReplayBuffer.rebuild).
// Reads index, td [batch], isv, tree leaves. Writes tree[capacity + index[s]], every internal node
// tree[1 .. capacity), max_priority; ticket[0] is 0 before and after.
extern "C" __global__ void __launch_bounds__(REPLAY_SUBTREE_BLOCK) replay_update_tree(
    double* __restrict__ tree, const int* __restrict__ index, const float* __restrict__ td,
    const float* __restrict__ isv, float* __restrict__ max_priority, unsigned int* __restrict__ ticket,
    int batch, int capacity)
{
    __shared__ double node[2 * REPLAY_SUBTREE_SPAN];
    __shared__ float largest[REPLAY_SUBTREE_BLOCK];
    __shared__ int samples[2];
    __shared__ bool s_last;
    const int t = threadIdx.x;
    const int g = blockIdx.x;
    const int span = min(capacity, REPLAY_SUBTREE_SPAN);
    const int runs = capacity / span;
    if (g >= runs) return;
    const float alpha = isv[ISV_PER_ALPHA];
    if (t < 2) samples[t] = first_at_or_above(index, batch, (g + t) * span);
    __syncthreads();
    for (int s = samples[0] + t; s < samples[1]; s += REPLAY_SUBTREE_BLOCK) {
        const int leaf = index[s];
        const float e = fabsf(td[s]);
        if (!isfinite(e)) continue;
        if (s == batch - 1 || index[s + 1] != leaf) tree[capacity + leaf] = (double)leaf_priority(e, alpha);
    }
    __syncthreads();  // the run's new leaves are visible to the whole block
    subtree_sums(node, tree, capacity, span, g);

    if (t == 0) {
        __threadfence();  // this subtree's root is visible to every block before the ticket counts it
        s_last = atomicAdd(ticket, 1u) == (unsigned int)runs - 1u;
        __threadfence();
    }
    __syncthreads();
    if (!s_last) return;
    if (runs > 1) subtree_sums(node, tree, runs, runs, 0);
    float m = 0.0f;
    for (int s = t; s < batch; s += REPLAY_SUBTREE_BLOCK) {
        const int leaf = index[s];
        const float e = fabsf(td[s]);
        if (leaf < 0 || leaf >= capacity || !isfinite(e)) continue;
        m = fmaxf(m, leaf_priority(e, alpha));
    }
    largest[t] = m;
    __syncthreads();
    for (int half = REPLAY_SUBTREE_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) largest[t] = fmaxf(largest[t], largest[t + half]);
        __syncthreads();
    }
    if (t == 0) {
        max_priority[0] = fmaxf(max_priority[0], largest[0]);
        ticket[0] = 0u;
    }
}
