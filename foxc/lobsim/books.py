"""Small random MBP-10 books for tests and the simulator benchmark (not the training data generator).

A random walk of the mid in whole ticks, a spread of 1 to 3 ticks, ten levels a
tick apart on each side with random sizes; optionally a fraction of snapshots
made unusable (an empty best level, a price out of range, or a crossed book).
"""
from __future__ import annotations

import numpy as np

from ..data.record import LEVELS, PRICE_SCALE, PRICE_UNDEF, empty_snapshots

TICK = PRICE_SCALE // 100  # 0.01


def random_books(n: int, rng: np.random.Generator, *, start_price: float = 100.0, segments: int = 1,
                 max_size: int = 20, empty_level_frac: float = 0.05, bad_frac: float = 0.0,
                 trades: bool = False) -> np.ndarray:
    """n snapshots in `segments` contiguous segments (ts in ns, 1 ms apart). With `trades`, each interval has a
    seller- and a buyer-initiated print with probability 0.6 each, at the previous touch or a tick through it, and
    a feed delay of 0 to 0.5 ms (drawn after everything else, so the books are the same either way)."""
    s = empty_snapshots(n)
    mid_ticks = int(start_price * PRICE_SCALE) // TICK + np.cumsum(rng.integers(-2, 3, n))
    spread = rng.integers(1, 4, n)
    bid0 = (mid_ticks - spread // 2) * TICK
    ask0 = bid0 + spread * TICK
    steps = np.arange(LEVELS, dtype=np.int64) * TICK
    s["bid_px"] = bid0[:, None] - steps
    s["ask_px"] = ask0[:, None] + steps
    s["bid_sz"] = rng.integers(1, max_size + 1, (n, LEVELS))
    s["ask_sz"] = rng.integers(1, max_size + 1, (n, LEVELS))
    s["bid_ct"] = np.minimum(s["bid_sz"], rng.integers(1, 5, (n, LEVELS)))
    s["ask_ct"] = np.minimum(s["ask_sz"], rng.integers(1, 5, (n, LEVELS)))
    # thin books: empty the deepest levels of some snapshots (MBP-10 empties from the back)
    for side in ("bid", "ask"):
        depth = np.where(rng.random(n) < empty_level_frac, rng.integers(1, LEVELS, n), LEVELS)
        gone = np.arange(LEVELS)[None, :] >= depth[:, None]
        s[f"{side}_px"][gone] = PRICE_UNDEF
        s[f"{side}_sz"][gone] = 0
        s[f"{side}_ct"][gone] = 0
    s["ts_ns"] = 1_700_000_000_000_000_000 + np.arange(n, dtype=np.int64) * 1_000_000
    s["segment"] = np.minimum(np.arange(n) * segments // max(n, 1), segments - 1)
    s["prev_ts_ns"] = np.where(np.r_[True, s["segment"][1:] != s["segment"][:-1]], s["ts_ns"],
                               np.r_[s["ts_ns"][:1], s["ts_ns"][:-1]])
    s["trade_count"] = rng.integers(0, 4, n)
    if bad_frac > 0:
        bad = np.flatnonzero(rng.random(n) < bad_frac)
        kind = rng.integers(0, 3, bad.size)
        s["bid_px"][bad[kind == 0], 0] = PRICE_UNDEF
        s["bid_sz"][bad[kind == 0], 0] = 0
        s["ask_px"][bad[kind == 1], 0] = 10**17  # far above any reasonable price
        crossed = bad[kind == 2]
        s["bid_px"][crossed, 0] = s["ask_px"][crossed, 0] + TICK
    if trades:
        for side, px, vol, total, sign in (("bid", "sell_lo_px", "sell_lo_vol", "sell_vol", -1),
                                           ("ask", "buy_hi_px", "buy_hi_vol", "buy_vol", 1)):
            hit = np.r_[False, rng.random(n - 1) < 0.6]
            touch = np.r_[s[f"{side}_px"][:1, 0], s[f"{side}_px"][:-1, 0]]
            hit &= touch != PRICE_UNDEF
            through = rng.random(n) < 0.2
            s[px] = np.where(hit, touch + sign * through * TICK, PRICE_UNDEF)
            s[vol] = np.where(hit, rng.integers(1, 10, n), 0)
            s[total] = s[vol] + np.where(hit, rng.integers(0, 3, n), 0)
        s["last_px"] = np.where(s["buy_vol"] > 0, s["buy_hi_px"], s["sell_lo_px"])
        s["feed_delay_ns"] = rng.integers(0, 500_000, n)
    return s
