// The sampled batch's priorities from |TD error| into the sum-tree's leaves, and the tree's sums, in
// one launch.
#include "foxc/isv_slots.h"
#include "foxc/replay.h"

// Sums the subtree held in shared memory in heap order (local node j has children 2j and 2j+1, its
// `span` leaves at node[span .. 2*span)) up to its root, one __syncthreads() per level: every node
// tree[k] = tree[2k] + tree[2k+1], the one float64 add per node of a level-by-level rebuild, so the
// tree's bits do not depend on how it is cut. Local node w + t of the level w wide is global node
// root * w + t.
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

// replay_update_tree — grid (top = capacity / span), block (REPLAY_SUBTREE_BLOCK), span =
// min(capacity, REPLAY_SUBTREE_SPAN); another grid does nothing. Block g owns the leaves
// g*span .. g*span + span - 1 (tree[capacity + leaf]).
// Priorities: p_s = (|td_s| + REPLAY_PRIORITY_EPS)^alpha, alpha = isv[ISV_PER_ALPHA], for the batch's
// samples s with a leaf index[s] in 0 .. capacity - 1 and a finite td (others are skipped); the block
// owning index[s] writes p_s to that leaf. Duplicate indices from replay_sample are adjacent: only
// the last of each run writes, so exactly one thread writes a leaf and the result is the same on
// every run. Block 0 also takes every sample's p into max_priority[0] = max(max_priority[0],
// max_s p_s) (a block reduction; no other block reads it). batch = 0: the sums alone.
// Sums: each block sums its leaves (as they stand after its writes) up to its subtree's root; with
// top > 1 (at most REPLAY_SUBTREE_SPAN), the last block to finish its subtree (an integer ticket
// after a __threadfence(), as replay_ring_push's slots) sums the top roots tree[top .. 2*top) up to
// the root the same way, read from L2 (written by the other blocks of this launch), and puts the
// ticket back to 0: every node the same add as a level-by-level rebuild, whichever block is last.
// Reads index, td [batch], isv, the leaves. Writes the batch's leaves, every internal node but
// tree[0], max_priority; ticket[0] is 0 before and after.
extern "C" __global__ void replay_update_tree(
    double* __restrict__ tree, float* __restrict__ max_priority, unsigned int* __restrict__ ticket,
    const int* __restrict__ index, const float* __restrict__ td, const float* __restrict__ isv, int batch,
    int capacity)
{
    __shared__ double node[2 * REPLAY_SUBTREE_SPAN];
    __shared__ float largest[REPLAY_SUBTREE_BLOCK];
    __shared__ bool s_last;
    const int t = threadIdx.x;
    const int g = blockIdx.x;
    const int span = min(capacity, REPLAY_SUBTREE_SPAN);
    const int top = capacity / span;
    if ((int)gridDim.x != top) return;
    const int first = g * span;  // this block's first leaf
    // the leaves and the batch's first REPLAY_SUBTREE_BLOCK samples are loaded at once (one memory latency)
    constexpr int LEAVES = REPLAY_SUBTREE_SPAN / REPLAY_SUBTREE_BLOCK;
    double leaves[LEAVES];
#pragma unroll
    for (int q = 0; q < LEAVES; ++q) {
        const int i = q * REPLAY_SUBTREE_BLOCK + t;
        leaves[q] = i < span ? tree[capacity + first + i] : 0.0;
    }
    const float alpha = isv[ISV_PER_ALPHA];
    int leaf = t < batch ? index[t] : -1, after = t + 1 < batch ? index[t + 1] : -1;
    float e = t < batch ? fabsf(td[t]) : 0.0f;
#pragma unroll
    for (int q = 0; q < LEAVES; ++q) {
        const int i = q * REPLAY_SUBTREE_BLOCK + t;
        if (i < span) node[span + i] = leaves[q];
    }
    __syncthreads();

    float m = 0.0f;
    for (int s = t; s < batch; s += REPLAY_SUBTREE_BLOCK) {
        if (s != t) {
            leaf = index[s];
            after = s + 1 < batch ? index[s + 1] : -1;
            e = fabsf(td[s]);
        }
        const bool mine = leaf >= first && leaf < first + span;
        if (!mine && g != 0) continue;  // block 0 takes every sample's priority into the max
        if (leaf < 0 || leaf >= capacity || !isfinite(e)) continue;
        const float p = powf(e + REPLAY_PRIORITY_EPS, alpha);
        m = fmaxf(m, p);
        if (mine && (s == batch - 1 || after != leaf)) {
            tree[capacity + leaf] = (double)p;
            node[span + leaf - first] = (double)p;
        }
    }
    if (g == 0) {
        largest[t] = m;
        __syncthreads();
        for (int half = REPLAY_SUBTREE_BLOCK / 2; half > 0; half >>= 1) {
            if (t < half) largest[t] = fmaxf(largest[t], largest[t + half]);
            __syncthreads();
        }
        if (t == 0) max_priority[0] = fmaxf(max_priority[0], largest[0]);
    }
    __syncthreads();

    sum_up(tree, node, span, (long long)top + g, t);
    if (top < 2 || top > REPLAY_SUBTREE_SPAN) return;
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
