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

// replay_tree_level — grid (ceil(count / 256), capped), block (256), grid-stride.
// tree[k] = tree[2k] + tree[2k+1] for k in [first, first + count): one tree
// level. The host launches it log2(capacity) times, leaves' parents first; stream
// order makes each level complete before the next reads it.
extern "C" __global__ void replay_tree_level(double* __restrict__ tree, int first, int count)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
        const int k = first + i;
        tree[k] = tree[2 * k] + tree[2 * k + 1];
    }
}
