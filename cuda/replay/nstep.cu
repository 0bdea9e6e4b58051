// The n-step ring per backtest and its flush into the replay storage.
//
// One step: replay_ring_push appends this step's entry to each backtest's ring
// and decides how many transitions leave it; replay_flush gives them consecutive
// slots (each block the sum of the emit counts before it: integer sums, so slot
// order is the same on every run) and copies them out; its last block (an integer
// ticket) advances the write head. No spin-waits, no float atomics.
//
// Ring of backtest b: entries start..start+count-1 (mod n_max) of ring_h and
// ring_rows; ring_pos[2b] = start, ring_pos[2b+1] = count. Entry i (0 = oldest)
// with window end j = min(i + n, count) becomes the transition
//   h_t = h of entry i, action and log pi of entry i,
//   return = sum_{q=i}^{j-1} gamma^(q-i) r_q, gamma_n = gamma^(j-i),
//   h_tp1 = h of entry j if j < count, else this step's next-state h_tp1,
//   done = done of the newest entry if j == count, else 0.
// It leaves the ring when its window is complete (i + n <= count), or for every
// entry when the newest one is done.
#include "foxc/isv_slots.h"
#include "foxc/replay.h"

__device__ __forceinline__ int replay_n_step(const float* isv, int n_max)
{
    // fmaxf first, so a NaN slot reads as 1.
    return (int)fminf(fmaxf(isv[ISV_N_STEP], 1.0f), (float)n_max);
}

// replay_ring_push — grid (n_backtests), block (REPLAY_ROW_BLOCK).
// Reads h_t[n_backtests*width] (the agent's state rows), action, reward, reward_raw, done, log_pi [n_backtests],
// isv[ISV_N_STEP], ring_pos. Writes the new entry into ring_h / ring_rows,
// ring_pos count += 1, flush[2b] = transitions to emit, flush[2b+1] = n used.
extern "C" __global__ void replay_ring_push(
    float* __restrict__ ring_h, float* __restrict__ ring_rows, unsigned int* __restrict__ ring_pos,
    int* __restrict__ flush,
    const float* __restrict__ h_t, const int* __restrict__ action, const float* __restrict__ reward,
    const float* __restrict__ reward_raw, const float* __restrict__ done, const float* __restrict__ log_pi,
    const float* __restrict__ isv, int n_backtests, int n_max, int width)
{
    const int b = blockIdx.x;
    const int t = threadIdx.x;
    if (b >= n_backtests) return;
    const unsigned int start = ring_pos[2 * b];
    const unsigned int count = ring_pos[2 * b + 1];
    const unsigned int slot = (start + count) % (unsigned int)n_max;
    const long long entry = (long long)b * n_max + slot;
    for (int k = t; k < width; k += blockDim.x)
        ring_h[entry * width + k] = h_t[(long long)b * width + k];
    __syncthreads();  // every thread has read ring_pos before thread 0 advances it
    if (t == 0) {
        float* row = ring_rows + entry * RING_COLS;
        const float d = done[b];
        row[RING_ACTION] = (float)action[b];
        row[RING_REWARD] = reward[b];
        row[RING_REWARD_RAW] = reward_raw[b];
        row[RING_DONE] = d;
        row[RING_LOG_PI] = log_pi[b];
        const int held = (int)count + 1;
        const int n = replay_n_step(isv, n_max);
        const int emit = d > 0.5f ? held : max(0, held - n + 1);
        ring_pos[2 * b + 1] = (unsigned int)held;
        flush[2 * b] = emit;
        flush[2 * b + 1] = n;
    }
}

// The sum over a block of one unsigned value per thread (every thread gets it). Integer sums are exact,
// so the result does not depend on the order of the adds.
__device__ __forceinline__ unsigned int block_sum_u32(unsigned int v, unsigned int* scratch)
{
    const int t = threadIdx.x;
    scratch[t] = v;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {
        if (t < half) scratch[t] += scratch[t + half];
        __syncthreads();
    }
    const unsigned int sum = scratch[0];
    __syncthreads();  // every thread has read the sum before the scratch is reused
    return sum;
}

// replay_flush — grid (n_backtests), block (REPLAY_ROW_BLOCK, a power of two).
// Block b gives the transitions leaving its ring consecutive slots after those of the backtests
// before it (its offset: the sum of their emit counts, integer sums, so the slots are the same on
// every run) and copies them out: for each, thread k copies floats k, k + block, ... of h_t and
// h_tp1 (coalesced rows), thread 0 computes the n-step returns, writes the transition row and sets
// the leaf to the running max priority. Then thread 0 drops the emitted entries from the ring.
// The last block to finish (an integer ticket after a __threadfence(), as replay_tree_subtrees)
// publishes the flush: counters FLUSH_BASE = the write head before, FLUSH_TOTAL = the emitted
// count, WRITE_HEAD advanced mod capacity, LENGTH grown up to capacity; every block has read the
// write head before it takes its ticket. When one flush can emit more than capacity transitions
// (n_backtests x n_max > capacity), only the last capacity are written, so no two blocks write the
// same slot (each block then also sums every emit count for the flush's total).
// Reads ring_*, flush, counters, h_tp1[n_backtests*width], isv[ISV_GAMMA], max_priority[0].
// Writes store_h_t, store_h_tp1 [capacity*width], store_rows [capacity*TR_COLS], tree[capacity +
// slot] (float64), ring_pos, counters; ticket[0] is 0 before and after.
extern "C" __global__ void replay_flush(
    const float* __restrict__ ring_h, const float* __restrict__ ring_rows, unsigned int* __restrict__ ring_pos,
    const int* __restrict__ flush, unsigned int* __restrict__ counters, unsigned int* __restrict__ ticket,
    const float* __restrict__ h_tp1, const float* __restrict__ isv, const float* __restrict__ max_priority,
    float* __restrict__ store_h_t, float* __restrict__ store_h_tp1, float* __restrict__ store_rows,
    double* __restrict__ tree, int n_backtests, int n_max, int capacity, int width)
{
    __shared__ unsigned int scratch[REPLAY_ROW_BLOCK];
    __shared__ bool s_last;
    const int b = blockIdx.x;
    const int t = threadIdx.x;
    const unsigned int cap = (unsigned int)capacity;
    const int emit = b < n_backtests ? flush[2 * b] : 0;
    const unsigned int base = counters[CTR_WRITE_HEAD];
    const bool may_overflow = (long long)n_backtests * n_max > (long long)capacity;  // uniform
    if (emit > 0) {  // block-uniform
        unsigned int before = 0u, all = 0u;
        for (int i = t; i < (may_overflow ? n_backtests : b); i += blockDim.x) {
            const unsigned int e = (unsigned int)flush[2 * i];
            if (i < b) before += e;
            all += e;
        }
        const unsigned int first = block_sum_u32(before, scratch);
        const unsigned int total = may_overflow ? block_sum_u32(all, scratch) : 0u;
        const int n = flush[2 * b + 1];
        const unsigned int start = ring_pos[2 * b];
        const int count = (int)ring_pos[2 * b + 1];
        const long long ring0 = (long long)b * n_max;
        const float gamma = isv[ISV_GAMMA];
        const float newest_done = ring_rows[(ring0 + (start + count - 1) % (unsigned int)n_max) * RING_COLS + RING_DONE];
        for (int i = 0; i < emit; ++i) {
            const unsigned int o = first + (unsigned int)i;
            if (may_overflow && total - o > cap) continue;  // overwritten later in this same flush
            const unsigned int slot = (base + o) & (cap - 1u);
            const int j = min(i + n, count);
            const long long entry_i = ring0 + (start + i) % (unsigned int)n_max;
            const float* next = j < count ? ring_h + (ring0 + (start + j) % (unsigned int)n_max) * width
                                          : h_tp1 + (long long)b * width;
            for (int k = t; k < width; k += blockDim.x) {
                store_h_t[(long long)slot * width + k] = ring_h[entry_i * width + k];
                store_h_tp1[(long long)slot * width + k] = next[k];
            }
            if (t == 0) {
                float ret = 0.0f, ret_raw = 0.0f, gamma_n = 1.0f;
                for (int q = j - 1; q >= i; --q) {  // Horner from the newest reward back
                    const float* row = ring_rows + (ring0 + (start + q) % (unsigned int)n_max) * RING_COLS;
                    ret = fmaf(gamma, ret, row[RING_REWARD]);
                    ret_raw = fmaf(gamma, ret_raw, row[RING_REWARD_RAW]);
                    gamma_n *= gamma;
                }
                const float* first_row = ring_rows + entry_i * RING_COLS;
                float* out = store_rows + (long long)slot * TR_COLS;
                out[TR_ACTION] = first_row[RING_ACTION];
                out[TR_RETURN] = ret;
                out[TR_RETURN_RAW] = ret_raw;
                out[TR_DONE] = j == count && newest_done > 0.5f ? 1.0f : 0.0f;
                out[TR_LOG_PI] = first_row[RING_LOG_PI];
                out[TR_GAMMA_N] = gamma_n;
                out[TR_STEPS] = (float)(j - i);
                out[TR_COLS - 1] = 0.0f;
                tree[capacity + slot] = (double)max_priority[0];
            }
        }
        __syncthreads();  // every thread has read ring_pos and the ring before thread 0 moves it
        if (t == 0) {
            ring_pos[2 * b] = (start + (unsigned int)emit) % (unsigned int)n_max;
            ring_pos[2 * b + 1] = (unsigned int)(count - emit);
        }
    }
    if (t == 0) {
        __threadfence();  // this block's reads of the write head are done before the ticket counts it
        s_last = atomicAdd(ticket, 1u) == gridDim.x - 1u;
    }
    __syncthreads();
    if (!s_last) return;
    unsigned int all = 0u;
    for (int i = t; i < n_backtests; i += blockDim.x) all += (unsigned int)flush[2 * i];
    const unsigned int total = block_sum_u32(all, scratch);
    if (t == 0) {
        counters[CTR_FLUSH_BASE] = base;
        counters[CTR_FLUSH_TOTAL] = total;
        counters[CTR_WRITE_HEAD] = (base + total) & (cap - 1u);
        const unsigned int len = counters[CTR_LENGTH];
        counters[CTR_LENGTH] = total >= cap - len ? cap : len + total;
        ticket[0] = 0u;
    }
}
