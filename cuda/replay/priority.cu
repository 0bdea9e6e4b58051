// Priority updates from |TD error| and the per-level sum-tree rebuild.
#include "foxc/isv_slots.h"
#include "foxc/replay.h"

// replay_update_priorities — grid (1), block (REPLAY_REDUCE_BLOCK).
// p_s = (|td_s| + REPLAY_PRIORITY_EPS)^alpha, alpha = isv[ISV_PER_ALPHA], is
// written to leaf index[s] (skipped for index -1 and non-finite td). Duplicate
// indices from replay_sample are adjacent; only the last of each run writes, so
// exactly one thread writes a leaf and the result is the same on every run.
// max_priority[0] = max(max_priority[0], max_s p_s) by a block reduction.
// Reads index, td [batch], isv. Writes tree[capacity + index[s]], max_priority.
extern "C" __global__ void replay_update_priorities(
    double* __restrict__ tree, const int* __restrict__ index, const float* __restrict__ td,
    const float* __restrict__ isv, float* __restrict__ max_priority, int batch, int capacity)
{
    __shared__ float largest[REPLAY_REDUCE_BLOCK];
    const int t = threadIdx.x;
    const float alpha = isv[ISV_PER_ALPHA];
    float m = 0.0f;
    for (int s = t; s < batch; s += REPLAY_REDUCE_BLOCK) {
        const int leaf = index[s];
        const float e = fabsf(td[s]);
        if (leaf < 0 || leaf >= capacity || !isfinite(e)) continue;
        const float p = powf(e + REPLAY_PRIORITY_EPS, alpha);
        m = fmaxf(m, p);
        if (s == batch - 1 || index[s + 1] != leaf) tree[capacity + leaf] = (double)p;
    }
    largest[t] = m;
    __syncthreads();
    for (int half = REPLAY_REDUCE_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) largest[t] = fmaxf(largest[t], largest[t + half]);
        __syncthreads();
    }
    if (t == 0) max_priority[0] = fmaxf(max_priority[0], largest[0]);
}

// replay_tree_subtrees — grid (level / span), block (REPLAY_SUBTREE_BLOCK).
// The `level` nodes tree[level .. 2*level) (the leaves when level == capacity)
// are cut into runs of `span` (a power of two, 2 <= span <= REPLAY_SUBTREE_SPAN,
// dividing level); block g sums run g up to its own root, writing every node
// of that subtree as tree[k] = tree[2k] + tree[2k+1]: the one float64 add per
// node of a level-by-level rebuild, so the tree's bits do not depend on how it
// is cut. The subtree is held in shared memory in heap order (local node j has
// children 2j and 2j+1, the run sits at [span, 2*span)), with one
// __syncthreads() per level; local node w + t of the level w wide is global
// node (level/span + g) * w + t.
// With top = level / span > 1 (at most REPLAY_SUBTREE_SPAN) and the whole grid
// launched, the last block to finish its subtree (an integer ticket after a
// __threadfence(), as replay_sample's weights) then sums the top roots
// tree[top .. 2*top) up to the root the same way, read from L2 (written by
// the other blocks of this launch), and puts the ticket back to 0: one launch
// rebuilds the whole tree, every node the same add as a level-by-level
// rebuild, whichever block is last. A partial grid writes only its subtrees.
// Reads tree[level + g*span .. + span). Writes the internal nodes of block g's
// subtree (and the last block, tree[1 .. top)); ticket[0] is 0 before and after.
__device__ __forceinline__ void sum_up(double* tree, double* node, int span, long long root, int t)
{
    for (int w = span / 2; w >= 1; w >>= 1) {
        if (t < w) {
            const double sum = node[2 * (w + t)] + node[2 * (w + t) + 1];
            node[w + t] = sum;
            tree[root * w + t] = sum;
        }
        __syncthreads();
    }
}

extern "C" __global__ void replay_tree_subtrees(double* __restrict__ tree, unsigned int* __restrict__ ticket,
                                                int level, int span)
{
    __shared__ double node[2 * REPLAY_SUBTREE_SPAN];
    __shared__ bool s_last;
    const int t = threadIdx.x;
    const int g = blockIdx.x;
    const int top = level / span;
    if (span < 2 || span > REPLAY_SUBTREE_SPAN || g >= top) return;
    const long long first = (long long)level + (long long)g * span;
    for (int i = t; i < span; i += REPLAY_SUBTREE_BLOCK) node[span + i] = tree[first + i];
    __syncthreads();
    sum_up(tree, node, span, (long long)top + g, t);
    if (top < 2 || top > REPLAY_SUBTREE_SPAN || (int)gridDim.x != top) return;
    if (t == 0) {
        __threadfence();  // this block's root, tree[top + g], is visible to every block before the ticket counts it
        s_last = atomicAdd(ticket, 1u) == (unsigned int)top - 1u;
        __threadfence();
    }
    __syncthreads();
    if (!s_last) return;
    for (int i = t; i < top; i += REPLAY_SUBTREE_BLOCK) node[top + i] = __ldcg(tree + top + i);
    __syncthreads();
    sum_up(tree, node, top, 1, t);
    if (t == 0) ticket[0] = 0u;
}
