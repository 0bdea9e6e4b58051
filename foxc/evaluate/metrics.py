"""Evaluation figures from a trade list, an equity curve and the actions taken: pure numpy.

Money stays int64 price units × lots (×1e9: `gross_pnl`, `fees`, `net_pnl`, `max_drawdown`); ratios are floats,
None where they cannot be formed. win_rate: trades with net PnL > 0 (the simulator's `wins`); sharpe_per_trade:
mean / std (ddof 1) of the per-trade net PnL, trade_t_stat = that × √trades; sharpe_per_day: of the net PnL per UTC
day with data (sharpe_annual × √252); max_drawdown: the largest fall of the equity curve from its running peak (from
0); hold_frac: steps whose action is HOLD; exposure: steps that end holding a position; entropy_quarters: the
entropy (the policy's where given, else of the actions) of each quarter of the steps, for the stability rule.
"""
from __future__ import annotations

import math

import numpy as np

from ..lobsim.layout import N_ACTIONS, N_PASSIVE_ACTIONS

NS_PER_DAY = 86_400 * 10**9
TRADING_DAYS = 252


def ratio(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


def sharpe(values) -> float | None:
    """mean / std (ddof 1); None for fewer than 2 values or no dispersion."""
    x = np.asarray(values, np.float64)
    if x.size < 2:
        return None
    sd = float(x.std(ddof=1))
    return float(x.mean()) / sd if sd > 0 else None


def max_drawdown(equity) -> int:
    """Largest fall of the equity curve from its running peak; the curve starts from 0 (exact int64)."""
    e = np.concatenate([[0], np.asarray(equity, np.int64)])
    return int((np.maximum.accumulate(e) - e).max())


def daily_pnl(delta, ts_ns) -> tuple[np.ndarray, np.ndarray]:
    """(day numbers since the epoch, PnL per day): `delta[i]` is the equity change at the snapshot of ts_ns[i]."""
    day = np.asarray(ts_ns, np.int64) // NS_PER_DAY
    days, inverse = np.unique(day, return_inverse=True)
    return days, np.bincount(inverse, weights=np.asarray(delta, np.float64), minlength=days.size)


def entropy(p) -> float:
    """Entropy in nats of a distribution (or of counts, normalised here); 0·log 0 = 0."""
    p = np.asarray(p, np.float64)
    total = p.sum()
    if total <= 0:
        return 0.0
    p = p[p > 0] / total
    return float(-(p * np.log(p)).sum())


def row_entropies(probs) -> np.ndarray:
    """Entropy (nats) of each row of a [n, A] probability array."""
    p = np.asarray(probs, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -terms.sum(axis=1)


def action_counts(actions) -> np.ndarray:
    """Counts of each action: the five market actions, and the four quote actions where any was taken."""
    a = np.asarray(actions, np.int64)
    n = N_PASSIVE_ACTIONS if (a >= N_ACTIONS).any() else N_ACTIONS
    return np.bincount(a, minlength=n)[:n]


def quarter_entropies(actions, probs=None) -> list[float]:
    """The entropy of each quarter of the steps (policy's if given, else of the actions' histogram)."""
    n = len(actions)
    if n < 4:
        return []
    cuts = [n * k // 4 for k in range(5)]
    if probs is not None:
        h = row_entropies(probs)
        return [float(h[a:b].mean()) for a, b in zip(cuts, cuts[1:])]
    return [entropy(action_counts(actions[a:b])) for a, b in zip(cuts, cuts[1:])]


def trade_figures(pnl, fees, open_ts, close_ts) -> dict:
    pnl = np.asarray(pnl, np.int64)
    fees = np.asarray(fees, np.int64)
    n = int(pnl.size)
    s = sharpe(pnl)
    held = (np.asarray(close_ts, np.int64) - np.asarray(open_ts, np.int64)) / 1e9
    return {
        "trades": n,
        "wins": int((pnl > 0).sum()),
        "win_rate": ratio((pnl > 0).sum(), n),
        "gross_pnl": int((pnl + fees).sum()),
        "fees": int(fees.sum()),
        "net_pnl": int(pnl.sum()),
        "mean_trade_pnl": float(pnl.mean()) if n else None,
        "trade_pnl_std": float(pnl.std(ddof=1)) if n > 1 else None,
        "sharpe_per_trade": s,
        "trade_t_stat": s * math.sqrt(n) if s is not None else None,
        "mean_holding_s": float(held.mean()) if n else None,
    }


def equity_figures(delta, ts_ns) -> dict:
    """Figures of the equity curve whose per-snapshot changes are `delta` (int64, time order)."""
    equity = np.cumsum(np.asarray(delta, np.int64))
    dd = max_drawdown(equity)
    peak = int(max(0, equity.max())) if equity.size else 0
    days, per_day = daily_pnl(delta, ts_ns)
    s_day = sharpe(per_day)
    return {
        "final_equity": int(equity[-1]) if equity.size else 0,
        "max_drawdown": dd,
        "max_drawdown_frac": ratio(dd, peak) if peak > 0 else None,
        "days": int(days.size),
        "sharpe_per_day": s_day,
        "sharpe_annual": s_day * math.sqrt(TRADING_DAYS) if s_day is not None else None,
    }


def action_figures(actions, probs=None, in_position=None) -> dict:
    """Figures of the actions taken (int [n], time order), the policy's distributions ([n, 5] or None)
    and whether a position was open after each step (bool [n] or None)."""
    actions = np.asarray(actions, np.int64)
    n = int(actions.size)
    counts = action_counts(actions)
    out = {
        "steps": n,
        "action_counts": [int(c) for c in counts],
        "hold_frac": ratio(counts[0], n),
        "action_entropy": entropy(counts),
        "policy_entropy": float(row_entropies(probs).mean()) if probs is not None and n else None,
        "entropy_quarters": quarter_entropies(actions, probs),
    }
    if in_position is not None:
        exposed = int(np.asarray(in_position, bool).sum())
        out["exposure"] = ratio(exposed, n)
        out["exposure_steps"] = exposed
    return out


def summarize(trades: dict, delta, ts_ns, actions, probs=None, in_position=None) -> dict:
    """All figures: `trades` holds arrays pnl, fees, open_ts, close_ts (time order)."""
    out = trade_figures(trades["pnl"], trades["fees"], trades["open_ts"], trades["close_ts"])
    out.update(equity_figures(delta, ts_ns))
    out.update(action_figures(actions, probs, in_position))
    if in_position is not None:
        out["mean_holding_steps"] = ratio(out["exposure_steps"], out["trades"])
    return out
