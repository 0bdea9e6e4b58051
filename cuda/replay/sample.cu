// Stratified proportional sampling from the sum-tree, and the importance weights.
//
// tree (float64, 2*capacity): node k has children 2k and 2k+1, the root is 1,
// leaf i sits at capacity + i. Internal nodes are float64 because a float32
// root over 2^20 leaves no longer resolves the small ones (they add nothing to
// the sum) and the walk's `u -= left` drifts by a float32 ulp of the root per
// level; float64 keeps both far below any priority the update can produce.
// The walk below never enters a subtree whose sum is 0, so with leaves >= 0 it
// ends on a positive leaf whatever the rounding: unfilled leaves are 0.
#include "foxc/replay.h"

// replay_sample — grid (batch), block (REPLAY_HIDDEN_DIM).
// Sample s draws u uniformly in stratum s of [0, root): u = (s + frac) * root / batch,
// frac from its own xorshift32 state rng[s] (advanced and stored). Thread 0
// walks the tree, clamps the leaf to the filled range [0, length) and unpacks
// the scalars; all threads then copy float k of h_t and h_tp1 (coalesced).
// Leaves are non-decreasing in s, so duplicates in a batch are adjacent (the
// priority update relies on that).
// Reads tree, counters[CTR_LENGTH], store_*. Writes rng[s], out_* [batch(*H)],
// out_index (-1 when the buffer is empty), out_prob = leaf / root (0 when empty).
extern "C" __global__ void replay_sample(
    const double* __restrict__ tree, const unsigned int* __restrict__ counters,
    const float* __restrict__ store_h_t, const float* __restrict__ store_h_tp1,
    const float* __restrict__ store_rows, unsigned int* __restrict__ rng,
    float* __restrict__ out_h_t, float* __restrict__ out_h_tp1, int* __restrict__ out_action,
    float* __restrict__ out_return, float* __restrict__ out_return_raw, float* __restrict__ out_done,
    float* __restrict__ out_log_pi, float* __restrict__ out_gamma_n, int* __restrict__ out_index,
    double* __restrict__ out_prob, int batch, int capacity)
{
    __shared__ int s_leaf;
    const int s = blockIdx.x;
    const int t = threadIdx.x;
    if (s >= batch) return;
    if (t == 0) {
        const unsigned int length = counters[CTR_LENGTH];
        const double root = tree[1];
        int leaf = -1;
        if (length > 0u && root > 0.0) {
            const unsigned int x = replay_xorshift32(rng[s]);
            rng[s] = x;
            const double frac = (double)(x >> 8) * 0x1p-24;
            double u = ((double)s + frac) * (root / (double)batch);
            int node = 1;
            while (node < capacity) {
                const double left = tree[2 * node];
                const double right = tree[2 * node + 1];
                if ((u < left && left > 0.0) || !(right > 0.0)) {
                    node = 2 * node;
                } else {
                    u -= left;
                    node = 2 * node + 1;
                }
            }
            leaf = min(node - capacity, (int)length - 1);
            const float* row = store_rows + (long long)leaf * TR_COLS;
            out_action[s] = (int)row[TR_ACTION];
            out_return[s] = row[TR_RETURN];
            out_return_raw[s] = row[TR_RETURN_RAW];
            out_done[s] = row[TR_DONE];
            out_log_pi[s] = row[TR_LOG_PI];
            out_gamma_n[s] = row[TR_GAMMA_N];
            out_prob[s] = tree[capacity + leaf] / root;
        } else {
            out_action[s] = 0;
            out_return[s] = 0.0f;
            out_return_raw[s] = 0.0f;
            out_done[s] = 0.0f;
            out_log_pi[s] = 0.0f;
            out_gamma_n[s] = 0.0f;
            out_prob[s] = 0.0;
        }
        out_index[s] = leaf;
        s_leaf = leaf;
    }
    __syncthreads();
    const int leaf = s_leaf;
    const long long dst = (long long)s * REPLAY_HIDDEN_DIM + t;
    if (leaf >= 0) {
        const long long src = (long long)leaf * REPLAY_HIDDEN_DIM + t;
        out_h_t[dst] = store_h_t[src];
        out_h_tp1[dst] = store_h_tp1[src];
    } else {
        out_h_t[dst] = 0.0f;
        out_h_tp1[dst] = 0.0f;
    }
}

// replay_is_weights — grid (1), block (REPLAY_REDUCE_BLOCK).
// w_s = (length * P_s)^-beta / max_s' (length * P_s')^-beta = (P_min / P_s)^beta,
// beta = isv[ISV_PER_BETA]; P_min is the smallest positive prob of the batch,
// found by a block reduction (min is exact, so the order does not matter).
// A sample with prob 0 (empty buffer) gets weight 0.
// Reads prob[batch], isv. Writes weight[batch].
#include "foxc/isv_slots.h"

extern "C" __global__ void replay_is_weights(
    const double* __restrict__ prob, const float* __restrict__ isv, float* __restrict__ weight, int batch)
{
    __shared__ double smallest[REPLAY_REDUCE_BLOCK];
    const int t = threadIdx.x;
    double m = 1.0 / 0.0;
    for (int s = t; s < batch; s += REPLAY_REDUCE_BLOCK) {
        const double p = prob[s];
        if (p > 0.0 && p < m) m = p;
    }
    smallest[t] = m;
    __syncthreads();
    for (int half = REPLAY_REDUCE_BLOCK / 2; half > 0; half >>= 1) {
        if (t < half) smallest[t] = fmin(smallest[t], smallest[t + half]);
        __syncthreads();
    }
    const double p_min = smallest[0];
    const float beta = isv[ISV_PER_BETA];
    for (int s = t; s < batch; s += REPLAY_REDUCE_BLOCK) {
        const double p = prob[s];
        weight[s] = p > 0.0 ? powf((float)(p_min / p), beta) : 0.0f;
    }
}
