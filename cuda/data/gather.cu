// The device dataset's per-step kernels: window gather with fused labels, and the cursor advance.
#include "foxc/snapshot.h"
#include "foxc/data.h"
#include "foxc/rng.h"

// One normalised feature f of snapshot s; mid2_newest is twice the mid of the window's newest snapshot.
// Every quotient is formed in double from exact integers, then rounded once to float.
__device__ float snapshot_feature(const FoxcSnapshot& s, int f, long long tick, long long mid2_newest)
{
    const bool touch = s.bid_px[0] != FOXC_PRICE_UNDEF && s.ask_px[0] != FOXC_PRICE_UNDEF;
    const long long mid2 = touch ? s.bid_px[0] + s.ask_px[0] : 0;
    if (f < FOXC_F_BID_SZ) {
        const long long px = f < FOXC_F_ASK_PX ? s.bid_px[f - FOXC_F_BID_PX] : s.ask_px[f - FOXC_F_ASK_PX];
        if (!touch || px == FOXC_PRICE_UNDEF)
            return 0.0f;
        return (float)((double)(2 * px - mid2) / (double)(2 * tick));
    }
    if (f < FOXC_F_SPREAD) {
        const unsigned int sz = f < FOXC_F_ASK_SZ ? s.bid_sz[f - FOXC_F_BID_SZ] : s.ask_sz[f - FOXC_F_ASK_SZ];
        return (float)log1p((double)sz);
    }
    switch (f) {
    case FOXC_F_SPREAD:
        return touch ? (float)((double)(s.ask_px[0] - s.bid_px[0]) / (double)tick) : 0.0f;
    case FOXC_F_IMBALANCE: {
        const double b = (double)s.bid_sz[0], a = (double)s.ask_sz[0];
        return b + a > 0.0 ? (float)((b - a) / (b + a)) : 0.0f;
    }
    case FOXC_F_DEPTH_IMB: {
        unsigned long long b = 0, a = 0;
        for (int l = 0; l < FOXC_LEVELS; ++l) {
            b += s.bid_sz[l];
            a += s.ask_sz[l];
        }
        return b + a > 0 ? (float)(((double)b - (double)a) / ((double)b + (double)a)) : 0.0f;
    }
    case FOXC_F_MID_REL:
        return touch && mid2_newest != 0 ? (float)((double)(mid2 - mid2_newest) / (double)(2 * tick)) : 0.0f;
    case FOXC_F_LOG_DT: {
        const long long dt = s.ts_ns - s.prev_ts_ns;
        return (float)log1p((double)(dt > 0 ? dt : 0) / 1000.0);
    }
    default:  // FOXC_F_LOG_TRADES
        return (float)log1p((double)s.trade_count);
    }
}

// gpu_sample_and_gather: grid (B), block (FOXC_GATHER_BLOCK), dynamic shared memory K * sizeof(FoxcSnapshot).
// Block b: when the backtest's cursor is unset (< 0) or its done flag is set, draws a new cursor
// valid_cursors[xorshift32(rng[b]) % n_valid] (every valid cursor has K - 1 snapshots before it in its
// segment and one after) and clears episode_steps[b] and done[b]. Writes last[b] = 1 when the snapshot
// at the cursor is the episode's final one (segment end, or max_episode_steps > 0 reached).
// Stages records[cursor-K+1 .. cursor] in shared memory and writes features[k][b][f] (time-major, as
// the encoder reads them; FOXC_FEATURES per snapshot, k = 0 the oldest) and labels_out[p][b][h] = labels[p][h][cursor] for the FOXC_LABEL_PLANES.
// Reads: records, labels, segment_end, valid_cursors. Reads and writes: cursors, episode_steps, done,
// rng. Writes: last, features, labels_out.
extern "C" __global__ void __launch_bounds__(FOXC_GATHER_BLOCK) gpu_sample_and_gather(
    const FoxcSnapshot* __restrict__ records, const float* __restrict__ labels,
    const int* __restrict__ segment_end, const int* __restrict__ valid_cursors,
    int* __restrict__ cursors, int* __restrict__ episode_steps, int* __restrict__ done,
    int* __restrict__ last, unsigned int* __restrict__ rng,
    float* __restrict__ features, float* __restrict__ labels_out,
    int n_records, int n_valid, int B, int K, long long tick, int max_episode_steps)
{
    extern __shared__ long long window_words[];
    __shared__ int s_cursor;
    const int b = blockIdx.x;
    if (b >= B)
        return;  // uniform across the block
    if (threadIdx.x == 0) {
        int c = cursors[b];
        if (c < 0 || done[b]) {
            const unsigned int x = xorshift32(rng[b]);
            rng[b] = x;
            c = valid_cursors[x % (unsigned int)n_valid];
            cursors[b] = c;
            episode_steps[b] = 0;
            done[b] = 0;
        }
        const int end = segment_end[records[c].segment];
        last[b] = (c + 1 >= end) || (max_episode_steps > 0 && episode_steps[b] + 1 >= max_episode_steps);
        s_cursor = c;
    }
    __syncthreads();
    const int c = s_cursor;

    const int words = K * (int)(sizeof(FoxcSnapshot) / sizeof(long long));
    const long long* src = reinterpret_cast<const long long*>(records + (c - K + 1));
    for (int i = threadIdx.x; i < words; i += blockDim.x)
        window_words[i] = src[i];
    __syncthreads();

    const FoxcSnapshot* window = reinterpret_cast<const FoxcSnapshot*>(window_words);
    const FoxcSnapshot& newest = window[K - 1];
    const long long mid2_newest = newest.bid_px[0] != FOXC_PRICE_UNDEF && newest.ask_px[0] != FOXC_PRICE_UNDEF
                                      ? newest.bid_px[0] + newest.ask_px[0] : 0;
    for (int e = threadIdx.x; e < K * FOXC_FEATURES; e += blockDim.x) {
        const int k = e / FOXC_FEATURES, f = e - k * FOXC_FEATURES;
        features[((size_t)k * B + b) * FOXC_FEATURES + f] = snapshot_feature(window[k], f, tick, mid2_newest);
    }
    for (int e = threadIdx.x; e < FOXC_LABEL_PLANES * FOXC_HORIZONS; e += blockDim.x) {
        const int p = e / FOXC_HORIZONS, h = e - p * FOXC_HORIZONS;
        labels_out[((size_t)p * B + b) * FOXC_HORIZONS + h] =
            labels[((size_t)p * FOXC_HORIZONS + h) * n_records + c];
    }
}

// gpu_advance_cursors: grid ceil(B / 256), block 256, one thread per backtest.
// After the simulator stepped on records[cursors[b]]: an episode at its last snapshot ends
// (done[b] = 1, the next gather redraws the cursor); otherwise the cursor and the step count move on.
// Reads last; reads and writes cursors, episode_steps, done.
extern "C" __global__ void gpu_advance_cursors(
    int* __restrict__ cursors, int* __restrict__ episode_steps, const int* __restrict__ last,
    int* __restrict__ done, int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B)
        return;
    if (last[b]) {
        done[b] = 1;
    } else {
        cursors[b] += 1;
        episode_steps[b] += 1;
        done[b] = 0;
    }
}
