// The simulator's book: apply each backtest's current snapshot.
#include "foxc/lobsim.h"
#include "foxc/lobsim_book.cuh"
#include "foxc/snapshot.h"

// book_update — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n.
// Reads snaps[cursor[b]] and book_idx[b], mid_x2[b], atr_ema[b]. When the snapshot is
// usable it writes the book (level-major: element (level l, backtest b) at l * n + b, so a
// warp's stores coalesce), book_ts[b], mid_x2[b] = best bid + best ask, and atr_ema[b]
// (EMA of |Δmid| in price units, updated only when cursor[b] follows the previous cursor
// and a previous mid exists). Otherwise the book is kept and skip_range[b] or
// skip_crossed[b] is incremented. book_idx[b] = cursor[b] either way.
extern "C" __global__ void book_update(
    const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,
    long long* __restrict__ bid_px, long long* __restrict__ ask_px,
    unsigned int* __restrict__ bid_sz, unsigned int* __restrict__ ask_sz,
    long long* __restrict__ book_ts, long long* __restrict__ book_idx,
    long long* __restrict__ mid_x2, float* __restrict__ atr_ema,
    unsigned int* __restrict__ skip_range, unsigned int* __restrict__ skip_crossed,
    long long min_px, long long max_px, float atr_alpha, int n)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    const long long c = cursor[b];
    const FoxcSnapshot* s = snaps + c;
    const long long prev_idx = book_idx[b];
    book_idx[b] = c;
    const int verdict = snapshot_verdict(s, min_px, max_px);
    if (verdict == FOXC_BOOK_UNREASONABLE) { skip_range[b] += 1u; return; }
    if (verdict == FOXC_BOOK_CROSSED) { skip_crossed[b] += 1u; return; }
#pragma unroll
    for (int l = 0; l < FOXC_LEVELS; ++l) {
        const long long at = (long long)l * n + b;
        bid_px[at] = s->bid_px[l];
        ask_px[at] = s->ask_px[l];
        bid_sz[at] = s->bid_sz[l];
        ask_sz[at] = s->ask_sz[l];
    }
    const long long mid = s->bid_px[0] + s->ask_px[0];
    const long long prev_mid = mid_x2[b];
    if (prev_idx + 1 == c && prev_mid != 0) {
        const long long d = mid > prev_mid ? mid - prev_mid : prev_mid - mid;
        const float x = (float)((double)d * 5e-10);  // |Δmid| in price units (mid_x2 is twice the mid, ×1e9)
        const float ema = atr_ema[b];
        atr_ema[b] = __fadd_rn(ema, __fmul_rn(atr_alpha, __fsub_rn(x, ema)));  // no FMA: the reference rounds twice too
    }
    mid_x2[b] = mid;
    book_ts[b] = s->ts_ns;
}
