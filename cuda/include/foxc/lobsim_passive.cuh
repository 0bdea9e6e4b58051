// Resting orders (--orders passive): passive_phase, run for backtest b between submit_market and pnl_track by
// lobsim_step_passive. Each rule is foxc/lobsim/passive.py's (PassiveBook, checked against hftbacktest), in the same
// double operations in the same order: every float update is an explicit round-to-nearest intrinsic, so no fused
// multiply-add makes the queue estimates differ from numpy's by a bit (and it may be inlined, unlike the step's
// other parts: inlined, its parameters stay in registers instead of a 144-byte stack frame). Per side s and backtest b the order's state
// lives at s * n + b (q_state FOXC_QUEUE_NONE / SENT / LIVE, its price, leaves, arrival and cancel time on the
// exchange's clock, the size in front of it and the volume traded at its price since the displayed size last
// changed, the time it was posted).
#ifndef FOXC_LOBSIM_PASSIVE_CUH
#define FOXC_LOBSIM_PASSIVE_CUH

#include "foxc/lobsim.h"
#include "foxc/lobsim_step.cuh"
#include "foxc/snapshot.h"

struct PassiveParams {
    const int* __restrict__ quotes;
    long long* q_px;
    long long* q_leaves;
    unsigned int* q_state;
    long long* q_arrive;
    long long* q_cancel;
    double* q_front;
    double* q_cum;
    long long* q_since;
    unsigned int* q_posts;
    unsigned int* q_rejects;
    unsigned int* q_fill_lots;
    long long maker_fee, entry_latency, cancel_latency, tick;
    int queue_model, power, partial, max_position;
};

struct Resting {
    long long px, leaves, arrive, cancel, since;
    unsigned int state;
    double front, cum;
};

__device__ __forceinline__ void drop(Resting& o)
{
    o.px = 0; o.leaves = 0; o.arrive = 0; o.cancel = FOXC_NO_CANCEL; o.since = 0;
    o.state = FOXC_QUEUE_NONE; o.front = 0.0; o.cum = 0.0;
}

// The displayed size at `price` on the held book's side (level-major arrays); 0 where no level has it.
__device__ __forceinline__ long long held_size(const long long* px, const unsigned int* sz, int b, int n,
                                               long long price)
{
    for (int l = 0; l < FOXC_LEVELS; ++l)
        if (px[(long long)l * n + b] == price) return (long long)sz[(long long)l * n + b];
    return 0;
}

__device__ __forceinline__ long long snap_size(const FoxcSnapshot* s, int side, long long price)
{
    const long long* px = side == 0 ? s->bid_px : s->ask_px;
    const unsigned int* sz = side == 0 ? s->bid_sz : s->ask_sz;
    for (int l = 0; l < FOXC_LEVELS; ++l)
        if (px[l] == price) return (long long)sz[l];
    return 0;
}

// Python's min(a, b): a unless b < a (so NaN in a is kept, and min(-0.0, 0.0) is -0.0).
__device__ __forceinline__ double py_min(double a, double b) { return b < a ? b : a; }

// Rust's f64::min: the other operand where one is NaN.
__device__ __forceinline__ double rust_min(double a, double b)
{
    if (isnan(a)) return b;
    if (isnan(b)) return a;
    return b < a ? b : a;
}

__device__ __forceinline__ double power_n(double x, int n)
{
    double out = x;
    for (int k = 1; k < n; ++k) out = __dmul_rn(out, x);
    return out;
}

// hftbacktest's ProbQueueModel (power) or RiskAdverseQueueModel on a change of the displayed size at the price.
__device__ __forceinline__ void depth_change(Resting& o, long long before, long long after, const PassiveParams& q)
{
    if (q.queue_model == FOXC_QUEUE_RISK_AVERSE) {
        o.front = py_min(o.front, (double)after);
        return;
    }
    const double change = __dsub_rn((double)(before - after), o.cum);
    o.cum = 0.0;
    if (change < 0.0) {
        o.front = py_min(o.front, (double)after);
        return;
    }
    const double front = o.front, back = __dsub_rn((double)before, o.front);
    const double fb = power_n(back, q.power), ff = power_n(front, q.power);
    double prob = __ddiv_rn(fb, __dadd_rn(fb, ff));
    if (isinf(prob)) prob = 1.0;
    const double est = __dadd_rn(__dsub_rn(front, __dmul_rn(__dsub_rn(1.0, prob), change)),
                                 py_min(__dsub_rn(back, __dmul_rn(prob, change)), 0.0));
    o.front = rust_min(est, (double)after);
}

__device__ __forceinline__ long long round_half_away(double x)
{
    return x >= 0.0 ? (long long)floor(__dadd_rn(x, 0.5)) : -(long long)floor(__dadd_rn(-x, 0.5));
}

struct PassiveFill {
    FoxcPosition& p;
    FoxcTrade* ring;
    int cap;
    long long ts;
    bool any;
};

__device__ __forceinline__ void fill_order(Resting& o, int side, long long lots, const PassiveParams& q,
                                           PassiveFill& f, int b, int n)
{
    fill(f.p, side == 0 ? 1 : -1, lots, o.px, q.maker_fee, f.ts, FOXC_REASON_PASSIVE, f.ring, f.cap);
    log_closed(f.p, f.ring, f.cap);
    q.q_fill_lots[(long long)side * n + b] += (unsigned int)lots;
    f.p.last_reason = FOXC_REASON_PASSIVE;
    f.any = true;
    o.leaves -= lots;
    if (o.leaves == 0) drop(o);
}

// The interval's trades on one side: through the price fills the rest; at the price they advance the queue.
__device__ __forceinline__ void side_trades(Resting& o, int side, long long px, long long vol, const PassiveParams& q,
                                            PassiveFill& f, int b, int n)
{
    if (o.state != FOXC_QUEUE_LIVE || vol <= 0) return;
    const bool through = side == 0 ? px < o.px : px > o.px;
    if (through) {
        fill_order(o, side, o.leaves, q, f, b, n);
    } else if (px == o.px) {
        o.front = __dsub_rn(o.front, (double)vol);
        o.cum = __dadd_rn(o.cum, (double)vol);
        const long long executable = round_half_away(-o.front);
        if (executable > 0) {
            o.front = 0.0;
            fill_order(o, side, q.partial ? (executable < o.leaves ? executable : o.leaves) : o.leaves, q, f, b, n);
        }
    }
}

// passive_phase — backtest b, after submit_market (which may have closed a trade: logged first).
// At an episode's end (cursor >= episode_end) both orders are dropped unfilled. Otherwise an order whose fill
// would take the position (after the market order) past max_position is cancelled, then each side's quote
// (quotes[s * n + b], FOXC_QUOTE_*) is applied at book_ts[b] on the held book (when it is snaps[cursor]), then the interval to
// snaps[cursor + 1] is played when that snapshot is usable (PassiveBook.step): cancels and arrivals before its
// exchange time (ts_ns - feed_delay_ns), its trades, its book. Fills go through fill() at the order's price with
// the maker fee, stamped with the snapshot's ts_ns, reason FOXC_REASON_PASSIVE, each close logged at once.
__device__ __forceinline__ void passive_phase(
    int b, const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,
    const long long* __restrict__ episode_end, const long long* bid_px, const long long* ask_px,
    const unsigned int* bid_sz, const unsigned int* ask_sz, const long long* book_ts, FoxcPosition* pos,
    FoxcTrade* trade_log, long long min_px, long long max_px, int trade_cap, int lots_per_entry, int n,
    bool fresh, const PassiveParams& q)
{
    const unsigned int state0 = q.q_state[b], state1 = q.q_state[(long long)n + b];
    const long long c = cursor[b];
    const bool at_end = c >= episode_end[b];
    const int code[2] = {q.quotes[b], q.quotes[(long long)n + b]};
    if (state0 == FOXC_QUEUE_NONE && state1 == FOXC_QUEUE_NONE &&
        (at_end || (code[0] == FOXC_QUOTE_KEEP && code[1] == FOXC_QUOTE_KEEP))) return;  // nothing rests or moves
    Resting o[2];
#pragma unroll
    for (int s = 0; s < 2; ++s) {  // an empty side holds the canonical values: not read
        const long long at = (long long)s * n + b;
        drop(o[s]);
        if ((s == 0 ? state0 : state1) == FOXC_QUEUE_NONE) continue;
        o[s].px = q.q_px[at]; o[s].leaves = q.q_leaves[at]; o[s].state = s == 0 ? state0 : state1;
        o[s].arrive = q.q_arrive[at]; o[s].cancel = q.q_cancel[at]; o[s].front = q.q_front[at];
        o[s].cum = q.q_cum[at]; o[s].since = q.q_since[at];
    }
    if (at_end) {
        drop(o[0]);
        drop(o[1]);
    } else {
        FoxcPosition p = pos[b];
        FoxcTrade* ring = trade_log + (long long)b * trade_cap;
        log_closed(p, ring, trade_cap);
        const long long now = book_ts[b];
        for (int s = 0; s < 2; ++s) {  // an order a market order left past the limit is cancelled (keep_within_limit)
            const long long room = (long long)q.max_position - (s == 0 ? (long long)p.lots : -(long long)p.lots);
            if (o[s].state != FOXC_QUEUE_NONE && o[s].cancel == FOXC_NO_CANCEL && o[s].leaves > room)
                o[s].cancel = now + q.cancel_latency;
        }
        // quotes act only on the snapshot the agent saw (fresh: book_update applied snaps[cursor]); where it was
        // skipped the held book is older (at an episode's start, another episode's)
        for (int s = 0; s < 2; ++s) {
            const int k = code[s];
            if (k < FOXC_QUOTE_KEEP || k >= FOXC_QUOTE_JOIN + FOXC_LEVELS) { p.invalid_actions += 1u; continue; }
            const long long touch = s == 0 ? bid_px[b] : ask_px[b];
            if (k == FOXC_QUOTE_KEEP || !fresh || touch == FOXC_PRICE_UNDEF) continue;
            Resting& r = o[s];
            if (k == FOXC_QUOTE_CANCEL) {
                if (r.state != FOXC_QUEUE_NONE && r.cancel == FOXC_NO_CANCEL) r.cancel = now + q.cancel_latency;
                continue;
            }
            const long long behind = (long long)(k - FOXC_QUOTE_JOIN) * q.tick;
            const long long price = s == 0 ? touch - behind : touch + behind;
            if (r.state == FOXC_QUEUE_NONE) {
                const long long room = (long long)q.max_position - (s == 0 ? (long long)p.lots : -(long long)p.lots);
                const long long lots = (long long)lots_per_entry < room ? (long long)lots_per_entry : room;
                if (lots > 0) {
                    r.px = price; r.leaves = lots; r.arrive = now + q.entry_latency; r.cancel = FOXC_NO_CANCEL;
                    r.state = FOXC_QUEUE_SENT; r.front = 0.0; r.cum = 0.0; r.since = now;
                    q.q_posts[(long long)s * n + b] += 1u;
                }
            } else if (r.px != price && r.cancel == FOXC_NO_CANCEL) {
                r.cancel = now + q.cancel_latency;
            }
        }
        const FoxcSnapshot* next = snaps + c + 1;
        PassiveFill f{p, ring, trade_cap, next->ts_ns, false};
        if (snapshot_verdict(next, min_px, max_px) == FOXC_BOOK_OK) {
            const long long ts = next->ts_ns - next->feed_delay_ns;
            for (int s = 0; s < 2; ++s) {
                Resting& r = o[s];
                if (r.state == FOXC_QUEUE_NONE) continue;
                if (r.cancel != FOXC_NO_CANCEL && r.cancel < ts) {
                    drop(r);
                } else if (r.state == FOXC_QUEUE_SENT && r.arrive < ts) {  // joins the book the held snapshot shows
                    const long long opposite = s == 0 ? ask_px[b] : bid_px[b];
                    const bool crosses = opposite != FOXC_PRICE_UNDEF && (s == 0 ? r.px >= opposite : r.px <= opposite);
                    if (crosses) {  // post-only: refused
                        drop(r);
                        q.q_rejects[(long long)s * n + b] += 1u;
                    } else {
                        r.state = FOXC_QUEUE_LIVE;
                        r.front = (double)held_size(s == 0 ? bid_px : ask_px, s == 0 ? bid_sz : ask_sz, b, n, r.px);
                    }
                }
            }
            side_trades(o[0], 0, next->sell_lo_px, (long long)next->sell_lo_vol, q, f, b, n);
            side_trades(o[1], 1, next->buy_hi_px, (long long)next->buy_hi_vol, q, f, b, n);
            for (int s = 0; s < 2; ++s) {
                Resting& r = o[s];
                if (r.state != FOXC_QUEUE_LIVE) continue;
                const long long before = held_size(s == 0 ? bid_px : ask_px, s == 0 ? bid_sz : ask_sz, b, n, r.px);
                const long long after = snap_size(next, s, r.px);
                if (before != after) depth_change(r, before, after, q);
                const long long opposite = s == 0 ? next->ask_px[0] : next->bid_px[0];
                if (opposite != FOXC_PRICE_UNDEF && (s == 0 ? r.px >= opposite : r.px <= opposite))
                    fill_order(r, s, r.leaves, q, f, b, n);
            }
        }
        if (f.any) p.vwap_px = p.lots != 0 ? p.cost / p.lots : 0;
        pos[b] = p;
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {  // a side empty before and after keeps its canonical values: not written
        const long long at = (long long)s * n + b;
        if ((s == 0 ? state0 : state1) == FOXC_QUEUE_NONE && o[s].state == FOXC_QUEUE_NONE) continue;
        q.q_px[at] = o[s].px; q.q_leaves[at] = o[s].leaves; q.q_state[at] = o[s].state;
        q.q_arrive[at] = o[s].arrive; q.q_cancel[at] = o[s].cancel; q.q_front[at] = o[s].front;
        q.q_cum[at] = o[s].cum; q.q_since[at] = o[s].since;
    }
}


// The passive kernel's parameters after LOBSIM_STEP_PARAMS (lobsim_step_passive, the trainer's backtest_step_passive).
#define LOBSIM_PASSIVE_PARAMS                                                                                  \
    const int* __restrict__ quotes, long long* __restrict__ q_px, long long* __restrict__ q_leaves,            \
    unsigned int* __restrict__ q_state, long long* __restrict__ q_arrive, long long* __restrict__ q_cancel,    \
    double* __restrict__ q_front, double* __restrict__ q_cum, long long* __restrict__ q_since,                 \
    unsigned int* __restrict__ q_posts, unsigned int* __restrict__ q_rejects,                                  \
    unsigned int* __restrict__ q_fill_lots, long long maker_fee, long long entry_latency,                      \
    long long cancel_latency, long long tick, int queue_model, int power, int partial, int max_position
#define LOBSIM_PASSIVE_ARGS                                                                                    \
    quotes, q_px, q_leaves, q_state, q_arrive, q_cancel, q_front, q_cum, q_since, q_posts, q_rejects,          \
    q_fill_lots, maker_fee, entry_latency, cancel_latency, tick, queue_model, power, partial, max_position

// book_update -> submit_market -> passive_phase -> pnl_track for backtest b: the step with resting orders.
__device__ __forceinline__ void step_backtest_passive(int b, LOBSIM_STEP_PARAMS, const PassiveParams& q)
{
    const unsigned int skips = skip_range[b] + skip_crossed[b];  // book_update counts a snapshot it skips
    book_update(b, snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema,
                skip_range, skip_crossed, min_px, max_px, atr_alpha, n);
    const bool fresh = skip_range[b] + skip_crossed[b] == skips;
    submit_market(b, actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n);
    passive_phase(b, snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, pos, trade_log, min_px,
                  max_px, trade_cap, lots_per_entry, n, fresh, q);
    pnl_track(b, snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap);
}

#endif  // FOXC_LOBSIM_PASSIVE_CUH
