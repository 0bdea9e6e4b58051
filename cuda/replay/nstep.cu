// The n-step ring per backtest and its flush into the replay storage.
//
// One step: replay_ring_push appends this step's entry to each backtest's ring,
// decides how many transitions leave it and (its last block) gives them
// consecutive slots (an exclusive prefix sum in backtest order: integer sums,
// so slot order is the same on every run); replay_flush_write copies them out,
// all but the next states that are this step's h_tp1, which it marks pending;
// replay_next_state writes those once h_tp1 exists. So the flush and the
// sample need nothing of this step but the ring: a trainer runs them beside
// the encoder and only replay_next_state after it. Stream order is the only
// barrier between the kernels: no spin-waits, no float atomics.
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
#include "foxc/replay_rows.cuh"

__device__ __forceinline__ int replay_n_step(const float* isv, int n_max)
{
    // fmaxf first, so a NaN slot reads as 1.
    return (int)fminf(fmaxf(isv[ISV_N_STEP], 1.0f), (float)n_max);
}

// The leaving transitions' slots, by one block of REPLAY_ROW_BLOCK threads once every flush[2b] is written:
// offsets[b] = exclusive prefix sum of the emit counts; counters FLUSH_BASE = write head before,
// FLUSH_TOTAL = emitted, WRITE_HEAD advanced mod capacity, LENGTH grown up to capacity. The backtests go in
// chunks of REPLAY_ROW_BLOCK * REPLAY_ROW_REGS: thread t loads the emit counts of a run of REPLAY_ROW_REGS
// consecutive backtests at once (one memory latency a chunk), the runs' totals are scanned across the block,
// then each thread writes its run's offsets. Unsigned integer sums are exact, so the offsets are a serial
// scan's whatever the order.
__device__ void replay_flush_slots(const int* flush, unsigned int* offsets, unsigned int* counters,
                                   int n_backtests, int capacity)
{
    __shared__ unsigned int warp_total[REPLAY_ROW_BLOCK / 32];
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    const unsigned int head = counters[CTR_WRITE_HEAD], len = counters[CTR_LENGTH];  // with the first chunk
    unsigned int before = 0u;  // the emit counts of the chunks before this one
    for (int c0 = 0; c0 < n_backtests; c0 += REPLAY_ROW_BLOCK * REPLAY_ROW_REGS) {
        const int lo = c0 + t * REPLAY_ROW_REGS;
        unsigned int emit[REPLAY_ROW_REGS], own = 0u;
#pragma unroll
        for (int r = 0; r < REPLAY_ROW_REGS; ++r)  // from L2: other blocks wrote them
            emit[r] = lo + r < n_backtests ? (unsigned int)__ldcg(flush + 2 * (lo + r)) : 0u;
#pragma unroll
        for (int r = 0; r < REPLAY_ROW_REGS; ++r) own += emit[r];
        unsigned int inclusive = own;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const unsigned int below = __shfl_up_sync(0xffffffffu, inclusive, d);
            if (lane >= d) inclusive += below;
        }
        if (lane == 31) warp_total[warp] = inclusive;
        __syncthreads();
        unsigned int next = before + inclusive - own;
        for (int w = 0; w < REPLAY_ROW_BLOCK / 32; ++w) {
            next += w < warp ? warp_total[w] : 0u;
            before += warp_total[w];
        }
#pragma unroll
        for (int r = 0; r < REPLAY_ROW_REGS; ++r) {
            if (lo + r < n_backtests) offsets[lo + r] = next;
            next += emit[r];
        }
        __syncthreads();  // every thread has read warp_total before the next chunk writes it
    }
    if (t == 0) {
        const unsigned int cap = (unsigned int)capacity;
        counters[CTR_FLUSH_BASE] = head;
        counters[CTR_FLUSH_TOTAL] = before;
        counters[CTR_WRITE_HEAD] = (head + before) & (cap - 1u);
        counters[CTR_LENGTH] = before >= cap - len ? cap : len + before;
    }
}

// replay_ring_push — grid (ceil(n_backtests / REPLAY_ROW_WARPS)), block (REPLAY_ROW_BLOCK): a warp a backtest.
// Reads h_t[n_backtests*width] (the agent's state rows), action, reward, reward_raw, done, log_pi [n_backtests],
// isv[ISV_N_STEP], ring_pos. Writes the new entry into ring_h / ring_rows,
// ring_pos count += 1, flush[2b] = transitions to emit, flush[2b+1] = n used.
// Each block bumps ticket[0] (an integer atomic) after a __threadfence(); the block that draws ticket
// gridDim.x - 1 computes the slots (replay_flush_slots: offsets, counters) and sets ticket[0] back to 0.
extern "C" __global__ void __launch_bounds__(REPLAY_ROW_BLOCK) replay_ring_push(
    float* __restrict__ ring_h, float* __restrict__ ring_rows, unsigned int* __restrict__ ring_pos,
    int* __restrict__ flush, unsigned int* __restrict__ offsets, unsigned int* __restrict__ counters,
    unsigned int* __restrict__ ticket,
    const float* __restrict__ h_t, const int* __restrict__ action, const float* __restrict__ reward,
    const float* __restrict__ reward_raw, const float* __restrict__ done, const float* __restrict__ log_pi,
    const float* __restrict__ isv, int n_backtests, int n_max, int width, int capacity)
{
    __shared__ bool s_last;
    const int t = threadIdx.x, lane = t % 32;
    const int b = blockIdx.x * REPLAY_ROW_WARPS + t / 32;
    if (b < n_backtests) {  // the same in the whole warp: every block takes a ticket below
        // every load first: lane c < RING_COLS takes column c of the new ring entry
        const unsigned int start = ring_pos[2 * b];
        const unsigned int count = ring_pos[2 * b + 1];
        const float d = done[b];
        float column = d;
        if (lane == RING_ACTION) column = (float)action[b];
        if (lane == RING_REWARD) column = reward[b];
        if (lane == RING_REWARD_RAW) column = reward_raw[b];
        if (lane == RING_LOG_PI) column = log_pi[b];
        const int n = replay_n_step(isv, n_max);
        const unsigned int slot = (start + count) % (unsigned int)n_max;
        const long long entry = (long long)b * n_max + slot;
        replay_copy_rows(ring_h + entry * width, h_t + (long long)b * width, nullptr, nullptr, width, lane, 32);
        if (lane < RING_COLS) ring_rows[entry * RING_COLS + lane] = column;
        __syncwarp();  // every lane has read ring_pos before lane 0 advances it
        if (lane == 0) {
            const int held = (int)count + 1;
            ring_pos[2 * b + 1] = (unsigned int)held;
            flush[2 * b] = d > 0.5f ? held : max(0, held - n + 1);
            flush[2 * b + 1] = n;
            __threadfence();  // this backtest's flush entry is visible to every block before the ticket counts it
        }
    }
    __syncthreads();
    if (t == 0) s_last = atomicAdd(ticket, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!s_last) return;
    replay_flush_slots(flush, offsets, counters, n_backtests, capacity);
    if (t == 0) ticket[0] = 0u;
}

// replay_flush_write — grid (ceil(n_backtests / REPLAY_ROW_WARPS)), block (REPLAY_ROW_BLOCK): a warp a backtest.
// The warp of backtest b copies the transitions leaving its ring: for each, lane k copies
// floats k, k + 32, ... of h_t and, when it is a ring entry (j < count), of h_tp1 (coalesced rows);
// lane q < j - i loads reward q of the window, and every lane sums the n-step returns from them (Horner,
// newest first, the same in every lane); lane 0 writes the transition row, sets the leaf to the running
// max priority and pending[slot] = b + 1 when the next state is this step's h_tp1 (j == count; else 0):
// replay_next_state writes those rows. Then lane 0 drops the emitted entries from the ring.
// Reads ring_*, flush, offsets, counters, isv[ISV_GAMMA], max_priority[0]. Writes store_h_t,
// store_h_tp1 [capacity*width], store_rows [capacity*TR_COLS], tree[capacity + slot] (float64),
// pending[capacity], ring_pos.
// When one flush emits more than capacity transitions, only the last capacity
// are written, so no two warps write the same slot.
extern "C" __global__ void __launch_bounds__(REPLAY_ROW_BLOCK) replay_flush_write(
    const float* __restrict__ ring_h, const float* __restrict__ ring_rows, unsigned int* __restrict__ ring_pos,
    const int* __restrict__ flush, const unsigned int* __restrict__ offsets,
    const unsigned int* __restrict__ counters, const float* __restrict__ isv, const float* __restrict__ max_priority,
    float* __restrict__ store_h_t, float* __restrict__ store_h_tp1, float* __restrict__ store_rows,
    double* __restrict__ tree, int* __restrict__ pending, int n_backtests, int n_max, int capacity, int width)
{
    const int lane = threadIdx.x % 32;
    const int b = blockIdx.x * REPLAY_ROW_WARPS + threadIdx.x / 32;
    if (b >= n_backtests) return;
    const int emit = flush[2 * b];
    if (emit == 0) return;  // the same in the whole warp
    const int n = flush[2 * b + 1];
    const unsigned int start = ring_pos[2 * b];
    const int count = (int)ring_pos[2 * b + 1];
    const unsigned int cap = (unsigned int)capacity;
    const unsigned int base = counters[CTR_FLUSH_BASE];
    const unsigned int total = counters[CTR_FLUSH_TOTAL];
    const unsigned int first = offsets[b];
    const long long ring0 = (long long)b * n_max;
    const float gamma = isv[ISV_GAMMA];
    const float priority = max_priority[0];
    const float newest_done = ring_rows[(ring0 + (start + count - 1) % (unsigned int)n_max) * RING_COLS + RING_DONE];

    for (int i = 0; i < emit; ++i) {
        const unsigned int o = first + (unsigned int)i;
        if (total - o > cap) continue;  // overwritten later in this same flush
        const unsigned int slot = (base + o) & (cap - 1u);
        const int j = min(i + n, count);
        const long long entry_i = ring0 + (start + i) % (unsigned int)n_max;
        // every load first: lane q < j - i the window's reward q, lanes 0 and 1 the first entry's action and log pi
        const float* window = ring_rows + (ring0 + (start + i + lane) % (unsigned int)n_max) * RING_COLS;
        const float r = lane < j - i ? window[RING_REWARD] : 0.0f;
        const float r_raw = lane < j - i ? window[RING_REWARD_RAW] : 0.0f;
        const int column = lane == 0 ? RING_ACTION : RING_LOG_PI;
        const float carried = lane < 2 ? ring_rows[entry_i * RING_COLS + column] : 0.0f;
        replay_copy_rows(store_h_t + (long long)slot * width, ring_h + entry_i * width,
                         j < count ? store_h_tp1 + (long long)slot * width : nullptr,
                         j < count ? ring_h + (ring0 + (start + j) % (unsigned int)n_max) * width : nullptr,
                         width, lane, 32);
        float ret = 0.0f, ret_raw = 0.0f, gamma_n = 1.0f;
        for (int q = j - i - 1; q >= 0; --q) {  // Horner from the newest reward back
            ret = fmaf(gamma, ret, __shfl_sync(0xffffffffu, r, q));
            ret_raw = fmaf(gamma, ret_raw, __shfl_sync(0xffffffffu, r_raw, q));
            gamma_n *= gamma;
        }
        const float log_pi = __shfl_sync(0xffffffffu, carried, 1);
        if (lane == 0) {
            float* out = store_rows + (long long)slot * TR_COLS;
            out[TR_ACTION] = carried;
            out[TR_RETURN] = ret;
            out[TR_RETURN_RAW] = ret_raw;
            out[TR_DONE] = j == count && newest_done > 0.5f ? 1.0f : 0.0f;
            out[TR_LOG_PI] = log_pi;
            out[TR_GAMMA_N] = gamma_n;
            out[TR_STEPS] = (float)(j - i);
            out[TR_COLS - 1] = 0.0f;
            tree[capacity + slot] = (double)priority;
            pending[slot] = j == count ? b + 1 : 0;
        }
    }
    __syncwarp();  // every lane has read ring_pos and the ring before lane 0 moves it
    if (lane == 0) {
        ring_pos[2 * b] = (start + (unsigned int)emit) % (unsigned int)n_max;
        ring_pos[2 * b + 1] = (unsigned int)(count - emit);
    }
}

// replay_next_state — grid (ceil(n_backtests / REPLAY_ROW_WARPS) + ceil(batch / REPLAY_ROW_WARPS)),
// block (REPLAY_ROW_BLOCK); a warp an item, after replay_flush_write, replay_sample and whatever writes
// h_tp1. The first blocks' warps are backtests: backtest b's transitions that left its ring this step with
// window end j == count (i >= count - n, count = what the ring held before the flush: ring_pos[2b+1] + emit)
// and pending[slot] == b + 1 take h_tp1[b] as their stored next state, and pending[slot] = 0 again (so a
// second launch writes nothing). The last blocks' warps are samples: out_next[s] = b >= 0 (replay_sample
// drew a pending transition) takes h_tp1[b] as out_h_tp1[s], and every sample its importance weight
// out_weight[s] = (P_min / P_s)^beta (0 where P_s = out_prob[s] is 0), beta = isv[ISV_PER_BETA]: a warp
// a sample, so the powf of a batch run side by side. P_min, the batch's smallest positive prob, is the
// min of replay_sample's block_min[ceil(batch / REPLAY_ROW_WARPS)]: every sample block takes it (exact,
// so each finds the same; infinity when none). The two parts share no written array.
extern "C" __global__ void __launch_bounds__(REPLAY_ROW_BLOCK) replay_next_state(
    const unsigned int* __restrict__ ring_pos, const int* __restrict__ flush,
    const unsigned int* __restrict__ offsets, const unsigned int* __restrict__ counters,
    const float* __restrict__ h_tp1, int* __restrict__ pending, float* __restrict__ store_h_tp1,
    const int* __restrict__ out_next, const double* __restrict__ out_prob, const double* __restrict__ block_min,
    const float* __restrict__ isv, float* __restrict__ out_h_tp1, float* __restrict__ out_weight,
    int n_backtests, int batch, int capacity, int width)
{
    const int lane = threadIdx.x % 32;
    const int backtest_blocks = (n_backtests + REPLAY_ROW_WARPS - 1) / REPLAY_ROW_WARPS;
    const bool backtests = (int)blockIdx.x < backtest_blocks;
    const int item = ((int)blockIdx.x - (backtests ? 0 : backtest_blocks)) * REPLAY_ROW_WARPS + threadIdx.x / 32;
    if (!backtests) {  // the same in the whole block: it meets at a barrier below
        __shared__ double smallest[REPLAY_ROW_WARPS];
        const int b = item < batch ? out_next[item] : -1;
        const double p = item < batch ? out_prob[item] : 0.0;
        const float beta = isv[ISV_PER_BETA];
        double m = 1.0 / 0.0;
        for (int i = threadIdx.x; i < (batch + REPLAY_ROW_WARPS - 1) / REPLAY_ROW_WARPS; i += REPLAY_ROW_BLOCK)
            m = fmin(m, block_min[i]);
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) m = fmin(m, __shfl_xor_sync(0xffffffffu, m, d));
        if (lane == 0) smallest[threadIdx.x / 32] = m;
        __syncthreads();
        double p_min = smallest[0];
        for (int w = 1; w < REPLAY_ROW_WARPS; ++w) p_min = fmin(p_min, smallest[w]);
        if (b >= 0)
            replay_copy_rows(out_h_tp1 + (long long)item * width, h_tp1 + (long long)b * width, nullptr, nullptr,
                             width, lane, 32);
        if (lane == 0 && item < batch) out_weight[item] = p > 0.0 ? powf((float)(p_min / p), beta) : 0.0f;
        return;
    }
    const int b = item;
    if (b >= n_backtests) return;
    const int emit = flush[2 * b];
    const int n = flush[2 * b + 1];
    const int count = (int)ring_pos[2 * b + 1] + emit;
    const unsigned int cap = (unsigned int)capacity;
    const unsigned int base = counters[CTR_FLUSH_BASE];
    const unsigned int total = counters[CTR_FLUSH_TOTAL];
    for (int i = max(0, count - n); i < emit; ++i) {
        const unsigned int o = offsets[b] + (unsigned int)i;
        if (total - o > cap) continue;  // overwritten later in the same flush
        const unsigned int slot = (base + o) & (cap - 1u);
        if (pending[slot] != b + 1) continue;  // the same in every lane
        replay_copy_rows(store_h_tp1 + (long long)slot * width, h_tp1 + (long long)b * width, nullptr, nullptr, width,
                         lane, 32);
        __syncwarp();  // every lane has read pending[slot] before lane 0 clears it
        if (lane == 0) pending[slot] = 0;
    }
}
