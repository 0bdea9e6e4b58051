"""Shared builders for the simulator's CPU and GPU tests: hand-made books, a host-driven simulator, a naive fill."""
from __future__ import annotations

import numpy as np

from foxc.data.record import LEVELS, PRICE_SCALE, PRICE_UNDEF, SNAPSHOT_DTYPE, empty_snapshots
from foxc.lobsim import FLAT_FROM_LONG, FLAT_FROM_SHORT, LONG, SHORT, LobSim, LobSimConfig

TICK = PRICE_SCALE // 100


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
