"""The simulator's step kernel (cuda/lobsim/step.cu) and its numpy reference, part by part.

Each of the step's three parts (cuda/include/foxc/lobsim_step.cuh) has a numpy function here, called in
order by the step's reference and by the trainer's backtest_step. Each computes exactly what its part
computes: integer money is exact on both backends, and the one float update (the ATR EMA) uses the same
float32 operations in the same order (the kernel forbids FMA contraction). One thread per backtest, so
the functions vectorize over backtests.
"""
from __future__ import annotations

import numpy as np

from ..data.record import LEVELS, PRICE_UNDEF, SNAPSHOT_DTYPE, empty_snapshots
from ..driver import KernelSpec, f32, i32, i64, ptr, reference
from .layout import (BOOK_CROSSED, BOOK_OK, BOOK_UNREASONABLE, FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG,
                     NO_CANCEL, POSITION_DTYPE, QUEUE_LIVE, QUEUE_NONE, QUEUE_SENT, QUOTE_JOIN, QUOTE_KEEP, REASON_EPISODE_END,
                     REASON_PASSIVE, REASON_SIGNAL, REASON_STOP_LOSS, SHORT, TRADE_DTYPE)
from .layout import KERNEL_QUEUE_MODELS
from .passive import ASK, BID, PassiveBook, PassiveConfig, Resting, best, quote

LOBSIM_STEP = KernelSpec(
    "lobsim_step", "lobsim/step",
    (ptr("snaps"), ptr("cursor"), ptr("episode_end"),
     ptr("bid_px"), ptr("ask_px"), ptr("bid_sz"), ptr("ask_sz"), ptr("book_ts"), ptr("book_idx"), ptr("mid_x2"),
     ptr("atr_ema"), ptr("skip_range"), ptr("skip_crossed"),
     ptr("actions"), ptr("stop_loss"), ptr("fee_per_lot"), ptr("pos"), ptr("trade_log"), ptr("rewards"), ptr("dones"),
     i64("min_px"), i64("max_px"), f32("atr_alpha"), f32("reward_scale"), i32("trade_cap"), i32("lots_per_entry"),
     i32("n")),
    doc="book_update -> submit_market -> pnl_track for each backtest (one thread each)")


def tdiv(a, b):
    """C's truncating integer division, elementwise (b != 0)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def scaled_cost(cost, k, held):
    """trunc(cost * k / held) for 0 < k <= held without the overflowing product (as the kernel)."""
    q = tdiv(cost, held)
    r = cost - q * held
    return q * k + tdiv(r * k, held)


def snapshot_verdicts(s: np.ndarray, min_px, max_px) -> np.ndarray:
    """BOOK_OK / BOOK_UNREASONABLE / BOOK_CROSSED for each snapshot record, as snapshot_verdict() in C."""
    bid, ask = s["bid_px"], s["ask_px"]
    empty_best = ((bid[:, 0] == PRICE_UNDEF) | (ask[:, 0] == PRICE_UNDEF)
                  | (s["bid_sz"][:, 0] == 0) | (s["ask_sz"][:, 0] == 0))
    def in_range(px):
        return ((px == PRICE_UNDEF) | ((px >= min_px) & (px <= max_px))).all(axis=1)
    bad = empty_best | ~(in_range(bid) & in_range(ask))
    return np.where(bad, BOOK_UNREASONABLE, np.where(bid[:, 0] >= ask[:, 0], BOOK_CROSSED, BOOK_OK))


def _levels(mem, dtype, n):
    return mem.view(dtype, LEVELS * n).reshape(LEVELS, n)


def book_update(snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema, skip_range,
                skip_crossed, min_px, max_px, atr_alpha, n):
    """Apply snaps[cursor[b]] to backtest b's book, or skip and count it (book_update in lobsim_step.cuh)."""
    n = int(n)
    c = cursor.i64(n).copy()
    s = snaps.view(SNAPSHOT_DTYPE)[c]
    prev_idx = book_idx.i64(n).copy()
    book_idx.i64(n)[:] = c
    verdict = snapshot_verdicts(s, min_px, max_px)
    skip_range.u32(n)[verdict == BOOK_UNREASONABLE] += np.uint32(1)
    skip_crossed.u32(n)[verdict == BOOK_CROSSED] += np.uint32(1)
    ok = np.flatnonzero(verdict == BOOK_OK)
    s = s[ok]
    for mem, field, dt in ((bid_px, "bid_px", np.int64), (ask_px, "ask_px", np.int64),
                           (bid_sz, "bid_sz", np.uint32), (ask_sz, "ask_sz", np.uint32)):
        _levels(mem, dt, n)[:, ok] = s[field].T
    mid = s["bid_px"][:, 0] + s["ask_px"][:, 0]
    mids = mid_x2.i64(n)
    prev_mid = mids[ok]
    follow = (prev_idx[ok] + 1 == c[ok]) & (prev_mid != 0)
    d = np.abs(mid - prev_mid)[follow]
    x = (d.astype(np.float64) * 5e-10).astype(np.float32)
    ema = atr_ema.f32(n)
    at = ok[follow]
    ema[at] = ema[at] + atr_alpha * (x - ema[at])  # float32 throughout, no fused multiply-add
    mids[ok] = mid
    book_ts.i64(n)[ok] = s["ts_ns"]


def _fill(p, side, q, px, fee, ts, reason, ring, rows, cap):
    """Fill q[i] lots at px[i] into records p[i] (a structured copy), as fill() in fill.cu; q may be 0."""
    lots = p["lots"].astype(np.int64)
    held = np.abs(lots)
    reducing = (lots != 0) & ((lots > 0) != (side > 0))
    closing = np.where(reducing, np.minimum(q, held), 0)
    opening = q - closing
    fee_q = fee * q
    p["cash"] -= side * q * px + fee_q
    p["fees_paid"] += fee_q
    c = np.flatnonzero(closing > 0)
    if c.size:
        sc, kc, pxc = side[c], closing[c], px[c]
        removed = scaled_cost(p["cost"][c], kc, held[c])
        p["realized_pnl"][c] += -sc * kc * pxc - removed
        p["cost"][c] -= removed
        p["lots"][c] += (sc * kc).astype(np.int32)
        p["close_notional"][c] += kc * pxc
        p["close_lots"][c] += kc.astype(np.int32)
        p["trade_fees"][c] += fee[c] * kc
        done = c[p["lots"][c] == 0]
        if done.size:
            r = p[done]
            t = np.zeros(done.size, TRADE_DTYPE)
            t["open_ts"] = r["entry_ts"]
            t["close_ts"] = ts[done]
            open_lots = r["open_lots"].astype(np.int64)
            t["entry_px"] = np.where(open_lots > 0, tdiv(r["open_notional"], np.maximum(open_lots, 1)), 0)
            t["exit_px"] = tdiv(r["close_notional"], r["close_lots"])
            t["side"] = -side[done]
            t["pnl"] = t["side"].astype(np.int64) * (r["close_notional"] - r["open_notional"]) - r["trade_fees"]
            t["fees"] = r["trade_fees"]
            t["lots"] = r["open_lots"]
            t["reason"] = reason[done]
            ring[rows[done] * cap + r["trades"].astype(np.int64) % cap] = t
            p["closed_pending"][done] = 1
            p["cost"][done] = 0
    o = np.flatnonzero(opening > 0)
    if o.size:
        new = o[p["lots"][o] == 0]
        p["entry_ts"][new] = ts[new]
        for field in ("open_notional", "close_notional", "trade_fees", "open_lots", "close_lots", "trail_hwm"):
            p[field][new] = 0
        so, ko, pxo = side[o], opening[o], px[o]
        p["cost"][o] += so * ko * pxo
        p["lots"][o] += (so * ko).astype(np.int32)
        p["open_notional"][o] += ko * pxo
        p["open_lots"][o] += ko.astype(np.int32)
        p["trade_fees"][o] += fee[o] * ko


def submit_market(actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n):
    """Actions -> target positions -> market orders walking the book (submit_market in lobsim_step.cuh)."""
    n, cap, per_entry = int(n), int(trade_cap), int(lots_per_entry)
    P = pos.view(POSITION_DTYPE, n)
    lots = P["lots"].astype(np.int64)
    act = actions.i32(n)
    at_end = cursor.i64(n) >= episode_end.i64(n)
    stop = ~at_end & (stop_loss.u32(n) != 0) & (lots != 0)
    signal = ~at_end & ~stop
    target = lots.copy()
    target[signal & (act == LONG)] = per_entry
    target[signal & (act == SHORT)] = -per_entry
    target[signal & (act == FLAT_FROM_LONG) & (lots > 0)] = 0
    target[signal & (act == FLAT_FROM_SHORT) & (lots < 0)] = 0
    target[at_end | stop] = 0
    invalid = signal & ((act < HOLD) | (act > FLAT_FROM_SHORT))
    P["invalid_actions"][invalid] += np.uint32(1)
    rows = np.flatnonzero(target != lots)
    if rows.size == 0:
        return
    reason = np.where(at_end, REASON_EPISODE_END, np.where(stop, REASON_STOP_LOSS, REASON_SIGNAL))[rows].astype(np.uint32)
    p = P[rows].copy()
    side = np.where(target[rows] > lots[rows], 1, -1).astype(np.int64)
    remaining = np.abs(target[rows] - lots[rows])
    buy = side > 0
    px_book = np.where(buy, _levels(ask_px, np.int64, n)[:, rows], _levels(bid_px, np.int64, n)[:, rows])
    sz_book = np.where(buy, _levels(ask_sz, np.uint32, n)[:, rows], _levels(bid_sz, np.uint32, n)[:, rows])
    fee = fee_per_lot.i64(n)[rows].copy()
    ts = book_ts.i64(n)[rows].copy()
    ring = trade_log.view(TRADE_DTYPE, n * cap)
    last_px = np.zeros(rows.size, np.int64)
    for level in range(LEVELS):
        lp, ls = px_book[level], sz_book[level].astype(np.int64)
        take = (remaining > 0) & (lp != PRICE_UNDEF) & (ls != 0)
        q = np.where(take, np.minimum(remaining, ls), 0)
        _fill(p, side, q, np.where(take, lp, 0), fee, ts, reason, ring, rows, cap)
        last_px = np.where(take, lp, last_px)
        remaining -= q
    end_rows = at_end[rows]
    forced = (remaining > 0) & end_rows
    if forced.any():
        forced_px = np.where(last_px != 0, last_px, mid_x2.i64(n)[rows] >> 1)
        q = np.where(forced, remaining, 0)
        _fill(p, side, q, np.where(forced, forced_px, 0), fee, ts, reason, ring, rows, cap)
        p["forced_lots"] += q.astype(np.uint32)
    p["unfilled_lots"] += np.where(~end_rows, remaining, 0).astype(np.uint32)
    p["vwap_px"] = np.where(p["lots"] != 0, tdiv(p["cost"], np.where(p["lots"] != 0, p["lots"], 1)), 0)
    p["last_reason"] = reason
    P[rows] = p


def log_closed(p, ring, rows, cap):
    """The closed trade a fill left pending in records p (rows' backtests) counted: trades, wins, pnl_sum (log_closed
    in lobsim_step.cuh)."""
    pending = np.flatnonzero(p["closed_pending"] != 0)
    if pending.size:
        k = p["trades"][pending].astype(np.int64)
        net = ring["pnl"][rows[pending] * cap + k % cap]
        p["trades"][pending] += np.uint32(1)
        p["wins"][pending] += (net > 0).astype(np.uint32)
        p["pnl_sum"][pending] += net
        p["closed_pending"][pending] = 0


def pnl_track(snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap, n):
    """Mark to mid, rewards, closed-trade statistics, episode ends (pnl_track in lobsim_step.cuh)."""
    n, cap = int(n), int(trade_cap)
    c = cursor.i64(n)
    at_end = c >= episode_end.i64(n)
    mark = mid_x2.i64(n).copy()
    go_on = np.flatnonzero(~at_end)
    nxt = snaps.view(SNAPSHOT_DTYPE)[c[go_on] + 1]
    usable = snapshot_verdicts(nxt, min_px, max_px) == BOOK_OK
    mark[go_on[usable]] = nxt["bid_px"][usable, 0] + nxt["ask_px"][usable, 0]
    P = pos.view(POSITION_DTYPE, n)
    lots = P["lots"].astype(np.int64)
    value = (lots * mark) >> 1
    equity = P["cash"] + value
    unrealized = value - P["cost"]
    rewards.f32(n)[:] = ((equity - P["equity"]).astype(np.float64) * np.float64(reward_scale)).astype(np.float32)
    peak = np.maximum(P["peak_equity"], equity)
    P["equity"] = equity
    P["unrealized_pnl"] = unrealized
    P["trail_hwm"] = np.where(lots == 0, 0, np.maximum(P["trail_hwm"], unrealized))
    log_closed(P, trade_log.view(TRADE_DTYPE, n * cap), np.arange(n), cap)
    end = np.flatnonzero(at_end)
    P["episodes"][end] += np.uint32(1)
    P["last_episode_pnl"][end] = equity[end] - P["episode_equity0"][end]
    P["episode_equity0"][end] = equity[end]
    peak[end] = equity[end]
    P["peak_equity"] = peak
    dones.f32(n)[:] = at_end.astype(np.float32)


@reference(LOBSIM_STEP)
def lobsim_step(launch, snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema,
                skip_range, skip_crossed, actions, stop_loss, fee_per_lot, pos, trade_log, rewards, dones,
                min_px, max_px, atr_alpha, reward_scale, trade_cap, lots_per_entry, n):
    book_update(snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema, skip_range,
                skip_crossed, min_px, max_px, atr_alpha, n)
    submit_market(actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n)
    pnl_track(snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap, n)


# --- resting orders (--orders passive): lobsim_step_passive ------------------------------------------------------
LOBSIM_STEP_PASSIVE = KernelSpec(
    "lobsim_step_passive", "lobsim/step",
    (*LOBSIM_STEP.params,
     ptr("quotes"), ptr("q_px"), ptr("q_leaves"), ptr("q_state"), ptr("q_arrive"), ptr("q_cancel"), ptr("q_front"),
     ptr("q_cum"), ptr("q_since"), ptr("q_posts"), ptr("q_rejects"), ptr("q_fill_lots"),
     i64("maker_fee"), i64("entry_latency"), i64("cancel_latency"), i64("tick"), i32("queue_model"), i32("power"),
     i32("partial"), i32("max_position")),
    doc="book_update -> submit_market -> passive_phase -> pnl_track for each backtest (one thread each)")

PASSIVE_STATE = (("q_px", np.int64, 0), ("q_leaves", np.int64, 0), ("q_state", np.uint32, QUEUE_NONE),
                 ("q_arrive", np.int64, 0), ("q_cancel", np.int64, NO_CANCEL), ("q_front", np.float64, 0.0),
                 ("q_cum", np.float64, 0.0), ("q_since", np.int64, 0))  # per side and backtest [2, n], when empty


def passive_phase(snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, pos, trade_log, quotes,
                  state: dict, counts: dict, min_px, max_px, cfg, trade_cap, lots_per_entry, n):
    """Each backtest's quotes, decided on the book it holds at book_ts (only when that is snaps[cursor]), then the
    interval to the next snapshot through foxc.lobsim.passive (passive_phase in lobsim_passive.cuh). At an
    episode's end every order is dropped unfilled. `state`: PASSIVE_STATE's arrays [2, n]; `counts`: q_posts, q_rejects, q_fill_lots [2, n]."""
    n, cap, lots_per_entry = int(n), int(trade_cap), int(lots_per_entry)
    c, end = cursor.i64(n), episode_end.i64(n)
    q = quotes.view(np.int32, 2 * n).reshape(2, n)
    live = state["q_state"] != QUEUE_NONE
    at_end = c >= end
    for name, _, empty in PASSIVE_STATE:
        state[name][:, at_end] = empty
    todo = np.flatnonzero(~at_end & (live.any(axis=0) | (q != QUOTE_KEEP).any(axis=0)))
    if todo.size == 0:
        return
    P = pos.view(POSITION_DTYPE, n)
    ring = trade_log.view(TRADE_DTYPE, n * cap)
    records = snaps.view(SNAPSHOT_DTYPE)
    book = {name: _levels(mem, dt, n) for name, mem, dt in (("bid_px", bid_px, np.int64), ("ask_px", ask_px, np.int64),
                                                             ("bid_sz", bid_sz, np.uint32), ("ask_sz", ask_sz, np.uint32))}
    held = empty_snapshots(1)[0]
    ts_book = book_ts.i64(n)
    for b in todo.tolist():
        rows = np.array([b])
        p = P[rows].copy()
        log_closed(p, ring, rows, cap)  # a close submit_market made: its ring slot is not to be overwritten
        pb = PassiveBook(cfg)
        pb.position = int(p["lots"][0])
        for side in (BID, ASK):
            if state["q_state"][side, b] != QUEUE_NONE:
                cancel = int(state["q_cancel"][side, b])
                pb.orders[side] = Resting(int(state["q_px"][side, b]), int(state["q_leaves"][side, b]),
                                          int(state["q_arrive"][side, b]), state["q_state"][side, b] == QUEUE_LIVE,
                                          float(state["q_front"][side, b]), float(state["q_cum"][side, b]),
                                          None if cancel == NO_CANCEL else cancel)
        for name in ("bid_px", "ask_px", "bid_sz", "ask_sz"):
            held[name] = book[name][:, b]
        now = int(ts_book[b])
        pb.keep_within_limit(now)
        fresh = snapshot_verdicts(records[c[b]:c[b] + 1], min_px, max_px)[0] == BOOK_OK  # the snapshot acted on
        since = state["q_since"][:, b].copy()
        for side in (BID, ASK):
            code = int(q[side, b])
            if not QUOTE_KEEP <= code < QUOTE_JOIN + LEVELS:
                p["invalid_actions"] += np.uint32(1)
                continue
            touch = best(held, side)
            if code == QUOTE_KEEP or not fresh or touch == PRICE_UNDEF:
                continue
            before = pb.orders[side]
            quote(pb, side, code, now, touch, lots_per_entry)
            if pb.orders[side] is not before:
                counts["q_posts"][side, b] += np.uint32(1)
                since[side] = now
        nxt = records[c[b] + 1]
        if snapshot_verdicts(records[c[b] + 1:c[b] + 2], min_px, max_px)[0] == BOOK_OK:
            fills = pb.step(held, nxt)
            for f in fills:
                side = np.array([1 if f.side == BID else -1], np.int64)
                _fill(p, side, np.array([f.lots], np.int64), np.array([f.price], np.int64),
                      np.array([cfg.maker_fee], np.int64), np.array([nxt["ts_ns"]], np.int64),
                      np.array([REASON_PASSIVE], np.uint32), ring, rows, cap)
                log_closed(p, ring, rows, cap)
                counts["q_fill_lots"][f.side, b] += np.uint32(f.lots)
                p["last_reason"] = REASON_PASSIVE
            if fills:
                lots = p["lots"].astype(np.int64)
                p["vwap_px"] = np.where(lots != 0, tdiv(p["cost"], np.where(lots != 0, lots, 1)), 0)
            counts["q_rejects"][:, b] += np.array(pb.rejected, np.uint32)
        for side in (BID, ASK):
            order = pb.orders[side]
            if order is None:
                for name, _, empty in PASSIVE_STATE:
                    state[name][side, b] = empty
                continue
            state["q_px"][side, b], state["q_leaves"][side, b] = order.price, order.leaves
            state["q_state"][side, b] = QUEUE_LIVE if order.live else QUEUE_SENT
            state["q_arrive"][side, b] = order.arrive_ns
            state["q_cancel"][side, b] = NO_CANCEL if order.cancel_ns is None else order.cancel_ns
            state["q_front"][side, b], state["q_cum"][side, b] = order.front, order.cum_trade
            state["q_since"][side, b] = since[side]
        P[b] = p[0]


@reference(LOBSIM_STEP_PASSIVE)
def lobsim_step_passive(launch, snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2,
                        atr_ema, skip_range, skip_crossed, actions, stop_loss, fee_per_lot, pos, trade_log, rewards,
                        dones, min_px, max_px, atr_alpha, reward_scale, trade_cap, lots_per_entry, n, quotes, q_px,
                        q_leaves, q_state, q_arrive, q_cancel, q_front, q_cum, q_since, q_posts, q_rejects,
                        q_fill_lots, maker_fee, entry_latency, cancel_latency, tick, queue_model, power, partial,
                        max_position):
    n = int(n)
    mems = dict(q_px=q_px, q_leaves=q_leaves, q_state=q_state, q_arrive=q_arrive, q_cancel=q_cancel, q_front=q_front,
                q_cum=q_cum, q_since=q_since)
    state = {name: mems[name].view(dt, 2 * n).reshape(2, n) for name, dt, _ in PASSIVE_STATE}
    counts = {name: mem.view(np.uint32, 2 * n).reshape(2, n)
              for name, mem in (("q_posts", q_posts), ("q_rejects", q_rejects), ("q_fill_lots", q_fill_lots))}
    cfg = PassiveConfig(queue=KERNEL_QUEUE_MODELS[int(queue_model)], power=int(power),
                        entry_latency_ns=int(entry_latency), cancel_latency_ns=int(cancel_latency),
                        maker_fee=int(maker_fee), max_position=int(max_position), partial=bool(partial), tick=int(tick))
    book_update(snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema, skip_range,
                skip_crossed, min_px, max_px, atr_alpha, n)
    submit_market(actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n)
    passive_phase(snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, pos, trade_log, quotes, state,
                  counts, min_px, max_px, cfg, trade_cap, lots_per_entry, n)
    pnl_track(snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap, n)
