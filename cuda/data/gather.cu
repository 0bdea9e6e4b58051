// The device dataset's per-step kernel: the window gather with fused labels at each backtest's cursor.
#include "foxc/snapshot.h"
#include "foxc/data.h"

// Twice the mid of a snapshot whose best prices are bid0, ask0 (exact in integer ticks), 0 without both.
__device__ __forceinline__ long long mid2_of(long long bid0, long long ask0)
{
    return bid0 != FOXC_PRICE_UNDEF && ask0 != FOXC_PRICE_UNDEF ? bid0 + ask0 : 0;
}

// FOXC_F_MID_REL of a snapshot whose best prices are bid0, ask0: its mid relative to the window's newest
// (mid2_newest, twice that mid), in ticks.
__device__ __forceinline__ float mid_rel(long long bid0, long long ask0, long long mid2_newest, long long tick)
{
    const bool touch = bid0 != FOXC_PRICE_UNDEF && ask0 != FOXC_PRICE_UNDEF;
    return touch && mid2_newest != 0 ? (float)((double)(bid0 + ask0 - mid2_newest) / (double)(2 * tick)) : 0.0f;
}

// One normalised feature f of snapshot s; mid2_newest is twice the mid of the window's newest snapshot.
// Every quotient is formed in double from exact integers, then rounded once to float.
__device__ float snapshot_feature(const FoxcSnapshot& s, int f, long long tick, long long mid2_newest)
{
    const bool touch = s.bid_px[0] != FOXC_PRICE_UNDEF && s.ask_px[0] != FOXC_PRICE_UNDEF;
    const long long mid2 = mid2_of(s.bid_px[0], s.ask_px[0]);
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
        return mid_rel(s.bid_px[0], s.ask_px[0], mid2_newest, tick);
    case FOXC_F_LOG_DT: {
        const long long dt = s.ts_ns - s.prev_ts_ns;
        return (float)log1p((double)(dt > 0 ? dt : 0) / 1000.0);
    }
    default:  // FOXC_F_LOG_TRADES
        return (float)log1p((double)s.trade_count);
    }
}

// gather_windows: grid (B), block (FOXC_GATHER_BLOCK), dynamic shared memory K * sizeof(FoxcSnapshot).
// Block b writes the features of the window of K snapshots ending at cursor[b] (any row of the records),
// each row clamped to segment_first[segment of the cursor's snapshot]: where the segment holds fewer than
// K - 1 earlier snapshots its first one is repeated, so a window never reads across a segment. Writes
// features[k][b][f] (time-major, as the encoder reads them; FOXC_FEATURES per snapshot, k = 0 the
// oldest) and labels_out[p][b][h] = labels[p][h][cursor] for the FOXC_LABEL_PLANES.
// held[b] is the cursor whose window features[.][b] holds (-1: none; the kernel sets it to cursor[b]).
// When the window slid by one snapshot within its segment (held[b] = cursor[b] - 1 >= the segment's
// first row), its first K - 1 rows are the held window's last K - 1, whose features depend on their own
// snapshot only, but for the mid relative to the newest: those are moved down a row, that one feature is
// formed again, and only the newest snapshot is read whole (an episode's window slides every step but its
// first; reading and forming all K was most of the kernel). Otherwise the K snapshots are staged in shared
// memory and every feature formed. Either way each feature is the same function of the same snapshots,
// so the features have the same bits. The records must not change under a held window (the owner fills
// held with -1 when it rewrites rows a held window may cover).
// Reads: records, labels, segment_first, cursor, held, features (a sliding window's held rows).
// Writes: features, labels_out, held.
static_assert(FOXC_GATHER_BLOCK >= FOXC_GATHER_MAX_K - 1, "a sliding window's held rows: a thread each");
extern "C" __global__ void __launch_bounds__(FOXC_GATHER_BLOCK) gather_windows(
    const FoxcSnapshot* __restrict__ records, const float* __restrict__ labels,
    const long long* __restrict__ segment_first, const long long* __restrict__ cursor, long long* held,
    float* features, float* __restrict__ labels_out, int n_records, int B, int K, long long tick)
{
    extern __shared__ long long window_words[];
    const int b = blockIdx.x;
    if (b >= B)
        return;  // uniform across the block
    const long long c = cursor[b];
    const long long first = segment_first[records[c].segment];
    const long long oldest = c - K + 1;
    const bool slide = held[b] == c - 1 && c - 1 >= first;  // uniform across the block
    constexpr int SNAPSHOT_WORDS = (int)(sizeof(FoxcSnapshot) / sizeof(long long));
    float* column = features + (size_t)b * FOXC_FEATURES;  // row k of window b: column + k * B * FOXC_FEATURES
    const size_t row_stride = (size_t)B * FOXC_FEATURES;

    if (slide) {
        // shared memory: the newest snapshot, the held rows 1..K-1, then the mid relative to the newest of
        // rows 0..K-2 (K * 352 bytes hold them all). Every global load is issued before the first barrier:
        // a load waited for inside the copy loop below stalled its warp once an iteration.
        float* moved = reinterpret_cast<float*>(window_words + SNAPSHOT_WORDS);
        float* rel = moved + (K - 1) * FOXC_FEATURES;
        const FoxcSnapshot& newest = *reinterpret_cast<const FoxcSnapshot*>(window_words);
        for (int i = threadIdx.x; i < SNAPSHOT_WORDS; i += blockDim.x)
            window_words[i] = reinterpret_cast<const long long*>(records + c)[i];
        for (int e = threadIdx.x; e < (K - 1) * FOXC_FEATURES; e += blockDim.x) {
            const int k = e / FOXC_FEATURES;
            moved[e] = column[(k + 1) * row_stride + e - k * FOXC_FEATURES];
        }
        long long bid0 = 0, ask0 = 0;
        if (threadIdx.x < K - 1) {  // row k = threadIdx.x of the window's first K - 1
            const long long row = oldest + threadIdx.x > first ? oldest + threadIdx.x : first;
            bid0 = records[row].bid_px[0];
            ask0 = records[row].ask_px[0];
        }
        __syncthreads();  // every held row is read before any is overwritten
        const long long mid2_newest = mid2_of(newest.bid_px[0], newest.ask_px[0]);
        if (threadIdx.x < K - 1)
            rel[threadIdx.x] = mid_rel(bid0, ask0, mid2_newest, tick);
        __syncthreads();
        for (int e = threadIdx.x; e < (K - 1) * FOXC_FEATURES; e += blockDim.x) {
            const int k = e / FOXC_FEATURES, f = e - k * FOXC_FEATURES;
            column[k * row_stride + f] = f == FOXC_F_MID_REL ? rel[k] : moved[e];
        }
        for (int f = threadIdx.x; f < FOXC_FEATURES; f += blockDim.x)
            column[(K - 1) * row_stride + f] = snapshot_feature(newest, f, tick, mid2_newest);
    } else {
        for (int i = threadIdx.x; i < K * SNAPSHOT_WORDS; i += blockDim.x) {
            const int k = i / SNAPSHOT_WORDS;
            const long long row = oldest + k > first ? oldest + k : first;
            window_words[i] = reinterpret_cast<const long long*>(records + row)[i - k * SNAPSHOT_WORDS];
        }
        __syncthreads();

        const FoxcSnapshot* window = reinterpret_cast<const FoxcSnapshot*>(window_words);
        const FoxcSnapshot& newest = window[K - 1];
        const long long mid2_newest = mid2_of(newest.bid_px[0], newest.ask_px[0]);
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
                column[k * row_stride + f] = snapshot_feature(window[k], f, tick, mid2_newest);
            }
        }
    }
    if (threadIdx.x == 0)
        held[b] = c;  // every thread read held[b] before the barrier above
    for (int e = threadIdx.x; e < FOXC_LABEL_PLANES * FOXC_HORIZONS; e += blockDim.x) {
        const int p = e / FOXC_HORIZONS, h = e - p * FOXC_HORIZONS;
        labels_out[((size_t)p * B + b) * FOXC_HORIZONS + h] =
            labels[((size_t)p * FOXC_HORIZONS + h) * n_records + c];
    }
}
