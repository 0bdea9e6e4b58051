// Stratified proportional sampling from the sum-tree, with the importance weights, in one launch.
//
// tree (float64, 2*capacity): node k has children 2k and 2k+1, the root is 1,
// leaf i sits at capacity + i. Internal nodes are float64 because a float32
// root over 2^20 leaves no longer resolves the small ones (they add nothing to
// the sum) and the walk's `u -= left` drifts by a float32 ulp of the root per
// level; float64 keeps both far below any priority the update can produce.
// The walk below never enters a subtree whose sum is 0, so with leaves >= 0 it
// ends on a positive leaf whatever the rounding: unfilled leaves are 0.
#include "foxc/isv_slots.h"
#include "foxc/replay.h"
#include "foxc/replay_rows.cuh"
#include "foxc/rng.h"

// replay_sample — grid (ceil(batch / REPLAY_ROW_WARPS)), block (REPLAY_ROW_BLOCK); one launch per
// sample(). Warp w of block b draws sample s = b * REPLAY_ROW_WARPS + w (one a warp, so that every
// resident warp walks: a sample a block left three warps of four idle through the walk's latencies),
// u uniformly in stratum s of [0, root): u = (s + frac) * root / batch,
// frac from its own xorshift32 state rng[s] (advanced and stored). The warp walks the tree
// REPLAY_WALK_DEPTH levels per round: its lanes load the 30 nodes of the next 4 levels below the
// current node at once (one memory latency per round instead of one per level; the first round's, below
// the root, go out with the generator state, the length and the root), then every lane walks
// those levels in shared memory with the same float64 compares and `u -= left` as a one-level walk, so
// the leaf is the same, and in every lane. The leaf is clamped to the filled range [0, length). Then
// every load of the draw goes out at once (one memory latency): lane c < TR_COLS takes column c of the
// transition's row, every lane its pending mark and its floats k, k + 32, ... of the width-float rows
// h_t and h_tp1 (coalesced). A transition flushed this step whose next state is still pending
// (pending[leaf] = b + 1: replay_flush_write) gets out_next[s] = b and no h_tp1 row (replay_next_state
// copies it); otherwise out_next[s] = -1. Leaves are non-decreasing in s, so duplicates in a batch
// are adjacent (the priority update relies on that).
// The importance weights (replay_next_state writes them) need P_min, the smallest positive prob of the
// batch: each block writes the smallest positive prob of its samples to block_min[b] (infinity when
// none), and replay_next_state takes their min.
// Reads tree, counters[CTR_LENGTH], store_*, pending. Writes rng[s], out_* [batch(*width)],
// out_index (-1 when the buffer is empty), out_prob = leaf / root (0 when empty), block_min [gridDim.x].
extern "C" __global__ void __launch_bounds__(REPLAY_ROW_BLOCK) replay_sample(
    const double* __restrict__ tree, const unsigned int* __restrict__ counters,
    const float* __restrict__ store_h_t, const float* __restrict__ store_h_tp1,
    const float* __restrict__ store_rows, const int* __restrict__ pending, unsigned int* __restrict__ rng,
    float* __restrict__ out_h_t, float* __restrict__ out_h_tp1, int* __restrict__ out_action,
    float* __restrict__ out_return, float* __restrict__ out_return_raw, float* __restrict__ out_done,
    float* __restrict__ out_log_pi, float* __restrict__ out_gamma_n, int* __restrict__ out_index,
    double* __restrict__ out_prob, int* __restrict__ out_next, double* __restrict__ block_min,
    int batch, int capacity, int width)
{
    static_assert(REPLAY_ROW_WARPS * 32 == REPLAY_ROW_BLOCK, "one sample a warp");
    __shared__ double below_[REPLAY_ROW_WARPS][2 << REPLAY_WALK_DEPTH];  // a warp's heap nodes 2 .. 2^(depth+1) - 1
    __shared__ double smallest[REPLAY_ROW_WARPS];
    const double none = 1.0 / 0.0;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const int s = blockIdx.x * REPLAY_ROW_WARPS + warp;
    double* below = below_[warp];
    double drawn = none;  // this warp's prob when positive
    if (s < batch) {  // the block meets at barriers below: no early return
        const unsigned int length = counters[CTR_LENGTH];
        const double root = tree[1];
        const unsigned int state = rng[s];
        int levels = __ffs(capacity) - 1;  // capacity is a power of two
        int r = min(levels, REPLAY_WALK_DEPTH);
        // the first round's nodes (the root's heap is the tree's) go out with the loads above
        for (int j = 2 + lane; j < (2 << r); j += 32) below[j] = tree[j];
        int leaf = -1;
        if (length > 0u && root > 0.0) {  // the same in every lane: the warp walks in step
            const unsigned int x = xorshift32(state);
            const double frac = (double)(x >> 8) * 0x1p-24;
            double u = ((double)s + frac) * (root / (double)batch);
            long long node = 1;
            while (true) {
                __syncwarp();  // the round's nodes are in `below` for every lane
                int j = 1;
                for (int q = 0; q < r; ++q) {
                    const double left = below[2 * j];
                    const double right = below[2 * j + 1];
                    if ((u < left && left > 0.0) || !(right > 0.0)) {
                        j = 2 * j;
                    } else {
                        u -= left;
                        j = 2 * j + 1;
                    }
                }
                node = (node << r) + (j - (1 << r));
                levels -= r;
                if (levels == 0) break;
                r = min(levels, REPLAY_WALK_DEPTH);
                __syncwarp();  // every lane has read `below` before the next round refills it
                for (int k = 2 + lane; k < (2 << r); k += 32) {
                    const int d = 31 - __clz(k);
                    below[k] = tree[(node << d) + (k - (1 << d))];
                }
            }
            if (lane == 0) rng[s] = x;  // after the walk's __syncwarp(): every lane has read the old state
            leaf = min((int)(node - capacity), (int)length - 1);
        }
        // every load first, then every store: the same in every lane but the column
        const float column = leaf >= 0 && lane < TR_COLS ? store_rows[(long long)leaf * TR_COLS + lane] : 0.0f;
        const double prob = leaf >= 0 ? tree[capacity + leaf] / root : 0.0;
        const int awaits = leaf >= 0 ? pending[leaf] - 1 : -1;
        const long long row = (long long)leaf * width;
        replay_copy_rows(out_h_t + (long long)s * width, leaf >= 0 ? store_h_t + row : nullptr,
                         awaits < 0 ? out_h_tp1 + (long long)s * width : nullptr,
                         leaf >= 0 ? store_h_tp1 + row : nullptr, width, lane, 32);
        if (lane == TR_ACTION) out_action[s] = (int)column;
        if (lane == TR_RETURN) out_return[s] = column;
        if (lane == TR_RETURN_RAW) out_return_raw[s] = column;
        if (lane == TR_DONE) out_done[s] = column;
        if (lane == TR_LOG_PI) out_log_pi[s] = column;
        if (lane == TR_GAMMA_N) out_gamma_n[s] = column;
        if (lane == 0) {
            out_prob[s] = prob;
            out_index[s] = leaf;
            out_next[s] = awaits;
        }
        if (prob > 0.0) drawn = prob;
    }
    if (lane == 0) smallest[warp] = drawn;
    __syncthreads();
    if (t == 0) {
        double m = smallest[0];
        for (int w = 1; w < REPLAY_ROW_WARPS; ++w) m = fmin(m, smallest[w]);
        block_min[blockIdx.x] = m;
    }
}
