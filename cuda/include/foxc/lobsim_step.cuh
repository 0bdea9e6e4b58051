// The simulator's step for one backtest, as device functions called in this order by every kernel that
// steps backtests (lobsim_step in cuda/lobsim/step.cu; the trainer's backtest_step in
// cuda/trainer/bridge.cu, which goes on with its bridges and the reward):
//   book_update    apply the snapshot at the cursor to the book
//   submit_market  the action becomes a target position, filled by a market order on that book
//   pnl_track      mark to mid, the step's reward, closed-trade statistics, episode ends
// Each part was a kernel of its own and is now a __noinline__ function, so that it compiles as it would
// alone: no contraction of one part's products into another's sums, the same bits however the parts are
// grouped into launches. One thread runs the parts for its backtest b, so a part reads what the one
// before it wrote for b in program order. Nothing a part writes is read later through a __restrict__
// pointer: a const __restrict__ pointer may be read through the non-coherent cache, which need not see
// the kernel's own writes; only what no part writes (snapshots, cursors, actions, fees) is __restrict__.
//
// The book is level-major: element (level l, backtest b) at l * n + b, so a warp's accesses coalesce.
#ifndef FOXC_LOBSIM_STEP_CUH
#define FOXC_LOBSIM_STEP_CUH

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

// book_update — backtest b < n.
// Reads snaps[cursor[b]] and book_idx[b], mid_x2[b], atr_ema[b]. When the snapshot is usable it
// writes the book, book_ts[b], mid_x2[b] = best bid + best ask, and atr_ema[b] (EMA of |Δmid| in
// price units, updated only when cursor[b] follows the previous cursor and a previous mid exists).
// Otherwise the book is kept and skip_range[b] or skip_crossed[b] is incremented.
// book_idx[b] = cursor[b] either way.
__device__ __noinline__ void book_update(
    int b, const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,
    long long* bid_px, long long* ask_px, unsigned int* bid_sz, unsigned int* ask_sz,
    long long* book_ts, long long* book_idx, long long* mid_x2, float* atr_ema,
    unsigned int* skip_range, unsigned int* skip_crossed, long long min_px, long long max_px, float atr_alpha, int n)
{
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

// A close a fill left pending (closed_pending) counted in trades, wins and pnl_sum; its record is in the ring's slot
// trades % cap. pnl_track calls it once a step; passive_phase after each fill, so each close keeps its own slot.
__device__ __forceinline__ void log_closed(FoxcPosition& p, const FoxcTrade* ring, int cap)
{
    if (p.closed_pending == 0u) return;
    const unsigned int k = p.trades;
    const long long net = ring[k % (unsigned int)cap].pnl;
    p.trades = k + 1u;
    p.wins += net > 0 ? 1u : 0u;
    p.pnl_sum += net;
    p.closed_pending = 0u;
}

// submit_market — backtest b < n.
// Reads actions[b], stop_loss[b], cursor[b], episode_end[b], pos[b].lots; when the target
// differs from the position, also the book (as book_update writes it), book_ts[b], mid_x2[b],
// fee_per_lot[b] and the rest of pos[b].
// Target: episode end (cursor >= episode_end) -> 0 with reason EPISODE_END; else a stop-loss
// flag on an open position -> 0 with reason STOP_LOSS; else from the action (LONG -> +lots_per_entry,
// SHORT -> -lots_per_entry, FLAT_FROM_LONG/SHORT -> 0 when long/short, HOLD and invalid -> no order).
// The order walks the opposite side's levels best first, never taking more than a level shows;
// what the book cannot fill is counted in unfilled_lots, except at an episode end, where the rest
// is closed at the deepest displayed level's price (the mid when none) and counted in forced_lots.
// Writes pos[b] (only when an order is sent or an action is invalid) and, when a trade closes,
// trade_log[b * trade_cap + pos[b].trades % trade_cap].
__device__ __noinline__ void submit_market(
    int b, const int* __restrict__ actions, const unsigned int* __restrict__ stop_loss,
    const long long* __restrict__ cursor, const long long* __restrict__ episode_end,
    const long long* bid_px, const long long* ask_px, const unsigned int* bid_sz, const unsigned int* ask_sz,
    const long long* book_ts, const long long* mid_x2, const long long* __restrict__ fee_per_lot,
    FoxcPosition* pos, FoxcTrade* trade_log, int trade_cap, int lots_per_entry, int n)
{
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

// pnl_track — backtest b.
// Marks pos[b] to the mid the position will be held through: the next snapshot's
// (snaps[cursor[b] + 1]) when the episode goes on and that snapshot is usable (the same verdict
// book_update will give it), else the current book's (mid_x2[b]). Writes pos[b].equity,
// unrealized_pnl, peak_equity, trail_hwm; rewards[b] = (equity - previous equity) * reward_scale
// (float32 of the exact integer change: price moves, spread crossed and fees); when
// submit_market closed a trade, reads its record from trade_log and updates trades, wins,
// pnl_sum; at an episode end (cursor[b] >= episode_end[b]) sets dones[b] = 1 and starts the
// next episode's accounts (episodes, last_episode_pnl, episode_equity0, peak_equity), else dones[b] = 0.
__device__ __noinline__ void pnl_track(
    int b, const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,
    const long long* __restrict__ episode_end, const long long* mid_x2, FoxcPosition* pos,
    const FoxcTrade* trade_log, float* rewards, float* dones,
    long long min_px, long long max_px, float reward_scale, int trade_cap)
{
    const long long c = cursor[b];
    const bool at_end = c >= episode_end[b];
    long long mark = mid_x2[b];
    if (!at_end) {
        const FoxcSnapshot* next = snaps + c + 1;
        if (snapshot_verdict(next, min_px, max_px) == FOXC_BOOK_OK) mark = next->bid_px[0] + next->ask_px[0];
    }
    FoxcPosition* p = pos + b;
    const int lots = p->lots;
    const long long value = ((long long)lots * mark) >> 1;  // mark is twice the mid
    const long long equity = p->cash + value;
    const long long unrealized = value - p->cost;
    rewards[b] = (float)((double)(equity - p->equity) * (double)reward_scale);
    long long peak = p->peak_equity > equity ? p->peak_equity : equity;
    p->equity = equity;
    p->unrealized_pnl = unrealized;
    const long long hwm = p->trail_hwm;
    p->trail_hwm = lots == 0 ? 0 : (hwm > unrealized ? hwm : unrealized);
    log_closed(*p, trade_log + (long long)b * trade_cap, trade_cap);
    if (at_end) {
        p->episodes += 1u;
        p->last_episode_pnl = equity - p->episode_equity0;
        p->episode_equity0 = equity;
        peak = equity;
    }
    p->peak_equity = peak;
    dones[b] = at_end ? 1.0f : 0.0f;
}

// The parameters of a kernel that steps backtests (lobsim_step's; the first of backtest_step's) and one
// step of backtest b over them: book_update -> submit_market -> pnl_track.
#define LOBSIM_STEP_PARAMS                                                                                     \
    const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,                              \
    const long long* __restrict__ episode_end,                                                                 \
    long long* __restrict__ bid_px, long long* __restrict__ ask_px,                                            \
    unsigned int* __restrict__ bid_sz, unsigned int* __restrict__ ask_sz,                                      \
    long long* __restrict__ book_ts, long long* __restrict__ book_idx,                                         \
    long long* __restrict__ mid_x2, float* __restrict__ atr_ema,                                               \
    unsigned int* __restrict__ skip_range, unsigned int* __restrict__ skip_crossed,                            \
    const int* __restrict__ actions, const unsigned int* __restrict__ stop_loss,                               \
    const long long* __restrict__ fee_per_lot, FoxcPosition* __restrict__ pos, FoxcTrade* __restrict__ trade_log, \
    float* __restrict__ rewards, float* __restrict__ dones,                                                    \
    long long min_px, long long max_px, float atr_alpha, float reward_scale, int trade_cap, int lots_per_entry, \
    int n
#define LOBSIM_STEP_ARGS                                                                                       \
    snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema, skip_range, \
    skip_crossed, actions, stop_loss, fee_per_lot, pos, trade_log, rewards, dones, min_px, max_px, atr_alpha,   \
    reward_scale, trade_cap, lots_per_entry, n

__device__ __forceinline__ void step_backtest(int b, LOBSIM_STEP_PARAMS)
{
    book_update(b, snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema,
                skip_range, skip_crossed, min_px, max_px, atr_alpha, n);
    submit_market(b, actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n);
    pnl_track(b, snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap);
}

#endif  // FOXC_LOBSIM_STEP_CUH
