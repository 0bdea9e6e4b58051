// The device dataset's per-step kernel: the window gather with fused labels at each backtest's cursor.
#include "foxc/snapshot.h"
#include "foxc/data.h"

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

// gather_windows: grid (B), block (FOXC_GATHER_BLOCK), dynamic shared memory K * sizeof(FoxcSnapshot).
// Block b stages the window of K snapshots ending at cursor[b] (any row of the records) in shared memory,
// each row clamped to segment_first[segment of the cursor's snapshot]: where the segment holds fewer than
// K - 1 earlier snapshots its first one is repeated, so a window never reads across a segment. Writes
// features[k][b][f] (time-major, as the encoder reads them; FOXC_FEATURES per snapshot, k = 0 the
// oldest) and labels_out[p][b][h] = labels[p][h][cursor] for the FOXC_LABEL_PLANES.
// Reads: records, labels, segment_first, cursor. Writes: features, labels_out.
extern "C" __global__ void __launch_bounds__(FOXC_GATHER_BLOCK) gather_windows(
    const FoxcSnapshot* __restrict__ records, const float* __restrict__ labels,
    const long long* __restrict__ segment_first, const long long* __restrict__ cursor,
    float* __restrict__ features, float* __restrict__ labels_out, int n_records, int B, int K, long long tick)
{
    extern __shared__ long long window_words[];
    const int b = blockIdx.x;
    if (b >= B)
        return;  // uniform across the block
    const long long c = cursor[b];
    const long long first = segment_first[records[c].segment];
    const long long oldest = c - K + 1;

    constexpr int SNAPSHOT_WORDS = (int)(sizeof(FoxcSnapshot) / sizeof(long long));
    for (int i = threadIdx.x; i < K * SNAPSHOT_WORDS; i += blockDim.x) {
        const int k = i / SNAPSHOT_WORDS;
        const long long row = oldest + k > first ? oldest + k : first;
        window_words[i] = reinterpret_cast<const long long*>(records + row)[i - k * SNAPSHOT_WORDS];
    }
    __syncthreads();

    const FoxcSnapshot* window = reinterpret_cast<const FoxcSnapshot*>(window_words);
    const FoxcSnapshot& newest = window[K - 1];
    const long long mid2_newest = newest.bid_px[0] != FOXC_PRICE_UNDEF && newest.ask_px[0] != FOXC_PRICE_UNDEF
                                      ? newest.bid_px[0] + newest.ask_px[0] : 0;
    // One pass per kind of feature (prices, sizes, the rest), so the threads of a warp take the same
    // branch of snapshot_feature: with all 46 in one pass a warp ran the price, size and other paths
    // (each in double) one after another.
    static_assert(FOXC_F_BID_PX == 0 && FOXC_F_ASK_PX < FOXC_F_BID_SZ && FOXC_F_BID_SZ < FOXC_F_ASK_SZ &&
                  FOXC_F_ASK_SZ < FOXC_F_SPREAD && FOXC_F_SPREAD < FOXC_FEATURES, "feature kinds in this order");
    const int kind_first[4] = {FOXC_F_BID_PX, FOXC_F_BID_SZ, FOXC_F_SPREAD, FOXC_FEATURES};
#pragma unroll
    for (int kind = 0; kind < 3; ++kind) {
        const int f0 = kind_first[kind], n = kind_first[kind + 1] - f0;
        for (int e = threadIdx.x; e < K * n; e += blockDim.x) {
            const int k = e / n, f = f0 + e - k * n;
            features[((size_t)k * B + b) * FOXC_FEATURES + f] = snapshot_feature(window[k], f, tick, mid2_newest);
        }
    }
    for (int e = threadIdx.x; e < FOXC_LABEL_PLANES * FOXC_HORIZONS; e += blockDim.x) {
        const int p = e / FOXC_HORIZONS, h = e - p * FOXC_HORIZONS;
        labels_out[((size_t)p * B + b) * FOXC_HORIZONS + h] =
            labels[((size_t)p * FOXC_HORIZONS + h) * n_records + c];
    }
}
