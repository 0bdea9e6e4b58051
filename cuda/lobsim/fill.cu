// The simulator's orders: actions become target positions, filled by market orders on the book.
#include "foxc/lobsim.h"
#include "foxc/snapshot.h"

// trunc(cost * k / held) for 0 < k <= held, without forming the (overflowing) product.
// q and r share cost's sign under truncating division, so trunc(q*k + r*k/held) = q*k + trunc(r*k/held).
__device__ __forceinline__ long long scaled_cost(long long cost, long long k, long long held)
{
    const long long q = cost / held, r = cost % held;
    return q * k + r * k / held;
}

// One fill of q lots at price px on `side` (+1 buy, -1 sell) into the position record p.
// The part that reduces the open position closes first (realizing PnL against the cost basis);
// the rest opens or adds. A close that leaves the position flat writes the trade record to the
// ring slot p.trades % cap and sets p.closed_pending; pnl_track logs it.
__device__ __forceinline__ void fill(FoxcPosition& p, int side, long long q, long long px, long long fee,
                                     long long ts, unsigned int reason, FoxcTrade* ring, int cap)
{
    const long long held = p.lots < 0 ? -(long long)p.lots : (long long)p.lots;
    const bool reducing = p.lots != 0 && ((p.lots > 0) != (side > 0));
    const long long closing = reducing ? (q < held ? q : held) : 0;
    const long long opening = q - closing;
    const long long fee_q = fee * q;
    p.cash -= side * q * px + fee_q;
    p.fees_paid += fee_q;
    if (closing > 0) {
        const long long removed = scaled_cost(p.cost, closing, held);
        p.realized_pnl += -side * closing * px - removed;
        p.cost -= removed;
        p.lots += side * (int)closing;
        p.close_notional += closing * px;
        p.close_lots += (int)closing;
        p.trade_fees += fee * closing;
        if (p.lots == 0) {
            FoxcTrade t;
            t.open_ts = p.entry_ts;
            t.close_ts = ts;
            t.entry_px = p.open_lots > 0 ? p.open_notional / p.open_lots : 0;
            t.exit_px = p.close_notional / p.close_lots;
            t.side = -side;
            t.pnl = (long long)t.side * (p.close_notional - p.open_notional) - p.trade_fees;
            t.fees = p.trade_fees;
            t.lots = p.open_lots;
            t.reason = reason;
            t.pad = 0u;
            ring[p.trades % (unsigned int)cap] = t;
            p.closed_pending = 1u;
            p.cost = 0;
        }
    }
    if (opening > 0) {
        if (p.lots == 0) {  // a new trade
            p.entry_ts = ts;
            p.open_notional = 0;
            p.close_notional = 0;
            p.trade_fees = 0;
            p.open_lots = 0;
            p.close_lots = 0;
            p.trail_hwm = 0;
        }
        p.cost += side * opening * px;
        p.lots += side * (int)opening;
        p.open_notional += opening * px;
        p.open_lots += (int)opening;
        p.trade_fees += fee * opening;
    }
}

// submit_market — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n.
// Reads actions[b], stop_loss[b], cursor[b], episode_end[b], pos[b].lots; when the target
// differs from the position, also the book (level-major, as book_update writes it),
// book_ts[b], mid_x2[b], fee_per_lot[b] and the rest of pos[b].
// Target: episode end (cursor >= episode_end) -> 0 with reason EPISODE_END; else a stop-loss
// flag on an open position -> 0 with reason STOP_LOSS; else from the action (LONG -> +lots_per_entry,
// SHORT -> -lots_per_entry, FLAT_FROM_LONG/SHORT -> 0 when long/short, HOLD and invalid -> no order).
// The order walks the opposite side's levels best first, never taking more than a level shows;
// what the book cannot fill is counted in unfilled_lots, except at an episode end, where the rest
// is closed at the deepest displayed level's price (the mid when none) and counted in forced_lots.
// Writes pos[b] (only when an order is sent or an action is invalid) and, when a trade closes,
// trade_log[b * trade_cap + pos[b].trades % trade_cap].
extern "C" __global__ void submit_market(
    const int* __restrict__ actions, const unsigned int* __restrict__ stop_loss,
    const long long* __restrict__ cursor, const long long* __restrict__ episode_end,
    const long long* __restrict__ bid_px, const long long* __restrict__ ask_px,
    const unsigned int* __restrict__ bid_sz, const unsigned int* __restrict__ ask_sz,
    const long long* __restrict__ book_ts, const long long* __restrict__ mid_x2,
    const long long* __restrict__ fee_per_lot,
    FoxcPosition* __restrict__ pos, FoxcTrade* __restrict__ trade_log,
    int trade_cap, int lots_per_entry, int n)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    const int lots = pos[b].lots;
    const bool at_end = cursor[b] >= episode_end[b];
    int target = lots;
    unsigned int reason = FOXC_REASON_SIGNAL;
    if (at_end) {
        target = 0;
        reason = FOXC_REASON_EPISODE_END;
    } else if (stop_loss[b] != 0u && lots != 0) {
        target = 0;
        reason = FOXC_REASON_STOP_LOSS;
    } else {
        switch (actions[b]) {
        case FOXC_ACTION_HOLD: break;
        case FOXC_ACTION_LONG: target = lots_per_entry; break;
        case FOXC_ACTION_SHORT: target = -lots_per_entry; break;
        case FOXC_ACTION_FLAT_FROM_LONG: if (lots > 0) target = 0; break;
        case FOXC_ACTION_FLAT_FROM_SHORT: if (lots < 0) target = 0; break;
        default: pos[b].invalid_actions += 1u; return;
        }
    }
    if (target == lots) return;

    FoxcPosition p = pos[b];
    FoxcTrade* ring = trade_log + (long long)b * trade_cap;
    const int side = target > lots ? 1 : -1;
    long long remaining = side > 0 ? (long long)target - lots : (long long)lots - target;
    const long long* px = side > 0 ? ask_px : bid_px;
    const unsigned int* sz = side > 0 ? ask_sz : bid_sz;
    const long long fee = fee_per_lot[b], ts = book_ts[b];
    long long last_px = 0;
#pragma unroll 1  // fills are rare and short: a loop keeps the inlined fill() once
    for (int l = 0; l < FOXC_LEVELS; ++l) {
        if (remaining == 0) break;
        const long long at = (long long)l * n + b;
        const long long level_px = px[at];
        const unsigned int level_sz = sz[at];
        if (level_px == FOXC_PRICE_UNDEF || level_sz == 0u) continue;
        const long long q = remaining < (long long)level_sz ? remaining : (long long)level_sz;
        fill(p, side, q, level_px, fee, ts, reason, ring, trade_cap);
        last_px = level_px;
        remaining -= q;
    }
    if (remaining > 0) {
        if (at_end) {
            const long long forced_px = last_px != 0 ? last_px : (mid_x2[b] >> 1);
            fill(p, side, remaining, forced_px, fee, ts, reason, ring, trade_cap);
            p.forced_lots += (unsigned int)remaining;
        } else {
            p.unfilled_lots += (unsigned int)remaining;
        }
    }
    p.vwap_px = p.lots != 0 ? p.cost / p.lots : 0;
    p.last_reason = reason;
    pos[b] = p;
}
