// Device helpers shared by the simulator's kernels: which snapshots are usable.
#ifndef FOXC_LOBSIM_BOOK_CUH
#define FOXC_LOBSIM_BOOK_CUH

#include "foxc/lobsim.h"
#include "foxc/snapshot.h"

// The verdict on one snapshot. book_update applies only FOXC_BOOK_OK snapshots and
// pnl_track marks to a snapshot only when it is FOXC_BOOK_OK, so both agree on the mid.
__device__ __forceinline__ int snapshot_verdict(const FoxcSnapshot* s, long long min_px, long long max_px)
{
    const long long bid0 = s->bid_px[0], ask0 = s->ask_px[0];
    if (bid0 == FOXC_PRICE_UNDEF || ask0 == FOXC_PRICE_UNDEF || s->bid_sz[0] == 0u || s->ask_sz[0] == 0u)
        return FOXC_BOOK_UNREASONABLE;
    bool in_range = true;
#pragma unroll
    for (int l = 0; l < FOXC_LEVELS; ++l) {
        const long long b = s->bid_px[l], a = s->ask_px[l];
        in_range &= b == FOXC_PRICE_UNDEF || (b >= min_px && b <= max_px);
        in_range &= a == FOXC_PRICE_UNDEF || (a >= min_px && a <= max_px);
    }
    if (!in_range) return FOXC_BOOK_UNREASONABLE;
    return bid0 >= ask0 ? FOXC_BOOK_CROSSED : FOXC_BOOK_OK;
}

#endif  // FOXC_LOBSIM_BOOK_CUH
