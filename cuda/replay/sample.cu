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
#include "foxc/rng.h"

// replay_sample — grid (ceil(batch / REPLAY_ROW_WARPS)), block (REPLAY_ROW_BLOCK); one launch per
// sample(). Warp w of block b draws sample s = b * REPLAY_ROW_WARPS + w (one a warp, so that every
// resident warp walks: a sample a block left three warps of four idle through the walk's latencies),
// u uniformly in stratum s of [0, root): u = (s + frac) * root / batch,
// frac from its own xorshift32 state rng[s] (advanced and stored). The warp walks the tree
// REPLAY_WALK_DEPTH levels per round: its lanes load the 30 nodes of the next 4 levels below the
// current node at once (one memory latency per round instead of one per level), then every lane walks
// those levels in shared memory with the same float64 compares and `u -= left` as a one-level walk, so
// the leaf is the same, and in every lane. The leaf is clamped to the filled range [0, length); lane 0
// unpacks the scalars, and the lanes copy floats k, k + 32, ... of the width-float rows h_t and h_tp1
// (coalesced). A transition flushed this step whose next state is still pending (pending[leaf] = b + 1:
// replay_flush_write) gets out_next[s] = b and no h_tp1 row (replay_next_state copies it); otherwise
// out_next[s] = -1. Leaves are non-decreasing in s, so duplicates in a batch
// are adjacent (the priority update relies on that).
// Importance weights, w_s = (length * P_s)^-beta / max_s' (length * P_s')^-beta
// = (P_min / P_s)^beta, beta = isv[ISV_PER_BETA], P_min the smallest positive
// prob of the batch: the last block to finish computes them. Each block bumps
// ticket[0] (an integer atomic) after a __threadfence(); the block that draws
// ticket gridDim.x - 1 reads every prob, takes the min (exact, so any order gives
// the same value), writes all weights and sets ticket[0] back to 0. Which block
// is last does not change any value. Prob 0 (empty buffer) gives weight 0.
// Reads tree, counters[CTR_LENGTH], store_*, pending, isv. Writes rng[s], out_* [batch(*width)],
// out_index (-1 when the buffer is empty), out_prob = leaf / root (0 when
// empty), out_weight [batch]; ticket[0] is 0 before and after.
extern "C" __global__ void __launch_bounds__(REPLAY_ROW_BLOCK) replay_sample(
    const double* __restrict__ tree, const unsigned int* __restrict__ counters,
    const float* __restrict__ store_h_t, const float* __restrict__ store_h_tp1,
    const float* __restrict__ store_rows, const int* __restrict__ pending, unsigned int* __restrict__ rng,
    const float* __restrict__ isv,
    float* __restrict__ out_h_t, float* __restrict__ out_h_tp1, int* __restrict__ out_action,
    float* __restrict__ out_return, float* __restrict__ out_return_raw, float* __restrict__ out_done,
    float* __restrict__ out_log_pi, float* __restrict__ out_gamma_n, int* __restrict__ out_index,
    double* __restrict__ out_prob, float* __restrict__ out_weight, int* __restrict__ out_next,
    unsigned int* __restrict__ ticket,
    int batch, int capacity, int width)
{
    static_assert(REPLAY_ROW_WARPS * 32 == REPLAY_ROW_BLOCK, "one sample a warp");
    __shared__ double below_[REPLAY_ROW_WARPS][2 << REPLAY_WALK_DEPTH];  // a warp's heap nodes 2 .. 2^(depth+1) - 1
    __shared__ double smallest[REPLAY_ROW_BLOCK];
    __shared__ bool s_last;
    const int t = threadIdx.x, lane = t % 32;
    const int s = blockIdx.x * REPLAY_ROW_WARPS + t / 32;
    double* below = below_[t / 32];
    if (s < batch) {  // the block meets at barriers below: no early return
        const unsigned int length = counters[CTR_LENGTH];
        const double root = tree[1];
        int leaf = -1;
        if (length > 0u && root > 0.0) {  // the same in every lane: the warp walks in step
            const unsigned int x = xorshift32(rng[s]);
            __syncwarp();  // every lane has read the old state before lane 0 stores the new one
            if (lane == 0) rng[s] = x;
            const double frac = (double)(x >> 8) * 0x1p-24;
            double u = ((double)s + frac) * (root / (double)batch);
            long long node = 1;
            int levels = __ffs(capacity) - 1;  // capacity is a power of two
            while (levels > 0) {
                const int r = min(levels, REPLAY_WALK_DEPTH);
                for (int j = 2 + lane; j < (2 << r); j += 32) {
                    const int d = 31 - __clz(j);
                    below[j] = tree[(node << d) + (j - (1 << d))];
                }
                __syncwarp();
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
                __syncwarp();  // every lane has read `below` before the next round refills it
                node = (node << r) + (j - (1 << r));
                levels -= r;
            }
            leaf = min((int)(node - capacity), (int)length - 1);
            if (lane == 0) {
                const float* row = store_rows + (long long)leaf * TR_COLS;
                out_action[s] = (int)row[TR_ACTION];
                out_return[s] = row[TR_RETURN];
                out_return_raw[s] = row[TR_RETURN_RAW];
                out_done[s] = row[TR_DONE];
                out_log_pi[s] = row[TR_LOG_PI];
                out_gamma_n[s] = row[TR_GAMMA_N];
                out_prob[s] = tree[capacity + leaf] / root;
            }
        } else if (lane == 0) {
            out_action[s] = 0;
            out_return[s] = 0.0f;
            out_return_raw[s] = 0.0f;
            out_done[s] = 0.0f;
            out_log_pi[s] = 0.0f;
            out_gamma_n[s] = 0.0f;
            out_prob[s] = 0.0;
        }
        const int awaits = leaf >= 0 ? pending[leaf] - 1 : -1;  // the same in every lane
        if (lane == 0) {
            out_index[s] = leaf;
            out_next[s] = awaits;
            __threadfence();  // out_prob[s] is visible to every block before this block's ticket counts it
        }
        for (int k = lane; k < width; k += 32) {
            const long long dst = (long long)s * width + k;
            const long long src = (long long)leaf * width + k;
            out_h_t[dst] = leaf >= 0 ? store_h_t[src] : 0.0f;
            if (awaits < 0) out_h_tp1[dst] = leaf >= 0 ? store_h_tp1[src] : 0.0f;
        }
    }
    __syncthreads();
    if (t == 0) {
        const unsigned int drawn = atomicAdd(ticket, 1u);
        s_last = drawn == gridDim.x - 1u;
        __threadfence();
    }
    __syncthreads();
    if (!s_last) return;
    double m = 1.0 / 0.0;
    for (int i = t; i < batch; i += REPLAY_ROW_BLOCK) {
        const double p = __ldcg(out_prob + i);  // from L2: written by other blocks of this launch
        if (p > 0.0 && p < m) m = p;
    }
    smallest[t] = m;
    __syncthreads();
    for (int half = REPLAY_ROW_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) smallest[t] = fmin(smallest[t], smallest[t + half]);
        __syncthreads();
    }
    const double p_min = smallest[0];
    const float beta = isv[ISV_PER_BETA];
    for (int i = t; i < batch; i += REPLAY_ROW_BLOCK) {
        const double p = __ldcg(out_prob + i);
        out_weight[i] = p > 0.0 ? powf((float)(p_min / p), beta) : 0.0f;
    }
    if (t == 0) ticket[0] = 0u;
}
