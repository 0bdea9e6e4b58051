"""Shared builders for the simulator's CPU and GPU tests: hand-made books, a host-driven simulator, a naive fill,
random runs and a mid-run simulator's step arguments."""
from __future__ import annotations

import numpy as np

from foxc.data.record import LEVELS, PRICE_SCALE, PRICE_UNDEF, SNAPSHOT_DTYPE, empty_snapshots
from foxc.lobsim import FLAT_FROM_LONG, FLAT_FROM_SHORT, LONG, SHORT, LobSim, LobSimConfig
from foxc.lobsim.books import random_books

TICK = PRICE_SCALE // 100
FEE = 7_000_000  # 0.007 per lot per side


def book(bids, asks, ts=0) -> np.ndarray:
    """One snapshot from [(price, size), ...] per side, best first; prices as floats."""
    s = empty_snapshots(1)
    for side, levels in (("bid", bids), ("ask", asks)):
        for l, (px, sz) in enumerate(levels):
            s[f"{side}_px"][0, l] = round(px * PRICE_SCALE)
            s[f"{side}_sz"][0, l] = sz
    s["ts_ns"] = ts
    return s


class HostDrivenSim:
    """A LobSim whose cursors the test sets: snapshots uploaded once, one cursor and episode end per backtest."""

    def __init__(self, rt, snapshots: np.ndarray, n: int, **config):
        self.rt, self.n = rt, n
        self.snapshots = rt.device_array(snapshots.size, SNAPSHOT_DTYPE, "snaps")
        self.snapshots.upload(snapshots)
        self.cursor = rt.device_array(n, np.int64, "cursor")
        self.end = rt.device_array(n, np.int64, "end")
        self.set_cursor(np.zeros(n, np.int64), np.full(n, snapshots.size - 1, np.int64))
        self.sim = LobSim(rt, LobSimConfig(n_backtests=n, **config), self.snapshots, self.cursor, self.end)

    def set_cursor(self, cursor, end=None):
        self.cursor.upload(np.asarray(cursor, np.int64))
        if end is not None:
            self.end.upload(np.asarray(end, np.int64))

    def step(self, actions, stop=None):
        self.sim.actions.upload(np.asarray(actions, np.int32))
        self.sim.stop_loss.upload(np.zeros(self.n, np.uint32) if stop is None else np.asarray(stop, np.uint32))
        self.sim.launch_step(self.rt.stream)
        self.rt.stream.synchronize()
        return self.sim.rewards.download(), self.sim.dones.download(), self.sim.positions()


def naive_order(lots, action, stop, at_end, bid_px, bid_sz, ask_px, ask_sz, per_entry):
    """Fills [(signed lots, price)] of one backtest's order, walking the book by hand (no forced close)."""
    if at_end:
        target = 0
    elif stop and lots != 0:
        target = 0
    elif action == LONG:
        target = per_entry
    elif action == SHORT:
        target = -per_entry
    elif action == FLAT_FROM_LONG and lots > 0 or action == FLAT_FROM_SHORT and lots < 0:
        target = 0
    else:
        target = lots
    want = target - lots
    fills = []
    px, sz = (ask_px, ask_sz) if want > 0 else (bid_px, bid_sz)
    left = abs(want)
    for l in range(LEVELS):
        if left == 0:
            break
        if px[l] == PRICE_UNDEF or sz[l] == 0:
            continue
        q = min(left, int(sz[l]))
        fills.append((q if want > 0 else -q, int(px[l])))
        left -= q
    return fills, left


def run_random(rt, snaps, n, steps, rng, seed_actions, **config):
    """Host-driven random run: cursors walk forward, episodes of 40 snapshots; returns per-step records."""
    h = HostDrivenSim(rt, snaps, n, **config)
    arng = np.random.default_rng(seed_actions)
    start = arng.integers(0, snaps.size - 41, n)
    cursor, end = start.copy(), start + 39
    h.set_cursor(cursor, end)
    history = []
    for _ in range(steps):
        acts = arng.integers(-1, 6, n)  # includes invalid actions
        stop = (arng.random(n) < 0.05).astype(np.uint32)
        before = h.sim.positions()
        r, d, after = h.step(acts, stop)
        history.append(dict(cursor=cursor.copy(), end=end.copy(), acts=acts, stop=stop, before=before,
                            after=after, rewards=r, dones=d, book=h.sim.book()))
        cursor = np.where(d != 0, start, cursor + 1)
        end = np.where(d != 0, start + 39, end)
        h.set_cursor(cursor, end)
    return h, history


LOTS_PER_ENTRY = 7  # mid_run_state's simulator


def mid_run_state(rt, rng, n, steps=30):
    """A simulator n backtests into random trading: its arrays as host copies, the snapshots, the next cursors."""
    snaps = random_books(4000, rng, bad_frac=0.05, empty_level_frac=0.3, max_size=6)
    h, _ = run_random(rt, snaps, n, steps, rng, int(rng.integers(1 << 30)), fee_per_lot=FEE,
                      lots_per_entry=LOTS_PER_ENTRY)
    s = h.sim
    state = {name: getattr(s, name).download() for name in
             ("bid_px", "ask_px", "bid_sz", "ask_sz", "book_ts", "book_idx", "mid_x2", "atr_ema", "skip_range",
              "skip_crossed", "fee_per_lot", "pos", "trade_log")}
    state["snaps"] = snaps
    state["cursor"] = h.cursor.download()
    state["end"] = h.end.download()
    return state


def step_args(rng, st, poisoned, poison_log=False) -> list:
    """lobsim_step's arguments for one more step from mid_run_state `st`: most cursors follow on, some jump
    anywhere, some episodes end now; random actions (invalid ones too) and stop flags; rewards and dones
    poisoned (the trade log too with `poison_log`: pnl_track then reads only this step's closes)."""
    n, snaps = st["pos"].size, st["snaps"]
    cursor = st["cursor"].copy()
    jump = rng.random(n) < 0.2
    cursor[jump] = rng.integers(0, snaps.size - 1, int(jump.sum()))
    end = np.where(rng.random(n) < 0.1, cursor, np.maximum(st["end"], cursor))
    actions = rng.integers(-1, 6, n).astype(np.int32)
    stop = (rng.random(n) < 0.1).astype(np.uint32)
    log = poisoned(st["trade_log"].shape, st["trade_log"].dtype) if poison_log else st["trade_log"].copy()
    return [snaps, cursor, end, *(st[k].copy() for k in ("bid_px", "ask_px", "bid_sz", "ask_sz", "book_ts",
                                                          "book_idx", "mid_x2", "atr_ema", "skip_range",
                                                          "skip_crossed")),
            actions, stop, st["fee_per_lot"], st["pos"].copy(), log, poisoned(n), poisoned(n),
            1, 10**7 * 10**9, np.float32(0.05).item(), 1e-9, st["trade_log"].shape[1], LOTS_PER_ENTRY, n]
