"""The held-out and validation rows, and the trainer's greedy evaluation on the held-out ones.

The evaluation walks them with the live weights (or the run's policy) through the walk-forward folds' evaluator,
between steps, with its own buffers, reading the weights and the ISV only: it never changes the training's bits.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from ..data.source import no_room, records_need
from ..evaluate.agent import AgentPolicy
from ..evaluate.baseline import NotFitted, fit_baseline
from ..evaluate.selection import VAL_ROWS_MAX
from ..evaluate.runner import EvalConfig, Evaluator
from .config import ConfigError
from ..data.cache import CacheRows
from ..data.market import MarketData
from ..data.markets import MARKETS
from ..data.synthetic import synthetic_data

MIN_CHUNK = 64  # snapshots per evaluated chunk at least: the window and the forced close stay small


def synthetic_rows(n: int, flag: str, **kw):
    """synthetic_data(n, **kw); more rows than memory holds is refused naming `flag`."""
    try:
        return synthetic_data(n, **kw)
    except MemoryError as e:
        raise ConfigError(f"{flag} {n:,}: not enough memory for that many synthetic snapshots ({e})") from None


@contextmanager
def room_for_heldout(eval_rows: int, doing: str, rows: int):
    """A MemoryError `doing` something with `rows` held-out snapshots: one line naming --eval-rows and the remedy."""
    try:
        yield
    except MemoryError:
        need = f"{doing}: {records_need(rows, '')}"
        raise ConfigError(str(no_room(f"--eval-rows {eval_rows:,}", None, need, "give fewer --eval-rows"))) from None


def holdout_market(cfg, market):
    """(training rows, held-out rows): synthetic data's a fresh draw (seed + 7919), real data's its last
    --holdout (tail_split); (market, None) with --holdout 0."""
    if cfg.data is None:
        held = synthetic_rows(cfg.eval_rows, "--eval-rows", seed=cfg.seed + 7919, params=MARKETS[cfg.synthetic].params)
        return market, held
    if not cfg.holdout_frac:
        return market, None
    return tail_split(cfg, market, cfg.holdout_frac, f"--holdout {cfg.holdout_frac}")


def validation_split(cfg, market):
    """(training rows, validation rows): the last --val-frac of them, at most --eval-rows and VAL_ROWS_MAX (the
    run's policy is chosen on them); (market, None) with --val-frac 0."""
    if not cfg.val_frac or market.n_rows * cfg.val_frac < 2:  # too few to hold out: the episode check says so
        return market, None
    frac = min(cfg.val_frac, min(VAL_ROWS_MAX, cfg.eval_rows) / market.n_rows)
    return tail_split(cfg, market, frac, f"--val-frac {cfg.val_frac}")


def tail_split(cfg, market, frac: float, flag: str):
    """(head, tail) split at 1 - `frac` of the rows (`flag` names the setting); of a cache's, only the tail's first
    `eval_rows` are read."""
    n = market.n_rows
    cut = int(n * (1.0 - frac))
    if cut < 2 or n - cut < 2:
        cause = market.report.most_skipped()  # most rows of --data skipped: the cause, not the fraction
        raise ConfigError(f"--data {cfg.data}: {cause}: the {n:,} kept are too few to hold out {flag} of them"
                         if cause else f"{flag} of {n} rows leaves too few rows to train or evaluate on")
    part = lambda r: MarketData(r, market.instrument, market.instrument_id, market.source,  # noqa: E731
                                market.files, market.tick, market.report)
    if isinstance(market, CacheRows):  # rows on disk: read only the evaluated ones (and the rest of their shards)
        stop, (first, end) = min(n, cut + cfg.eval_rows), market.segment_bounds()
        a, b = np.searchsorted(end, [cut, stop - 1], "right")
        with room_for_heldout(cfg.eval_rows, f"reading the {stop - cut:,} held-out snapshots with the rest of the "
                                             "cache's shards that hold them", int(end[b] - first[a])):
            tail = part(market.read_rows(cut, stop))
        return market.head(cut), tail
    return part(np.ascontiguousarray(market.records[:cut])), part(np.ascontiguousarray(market.records[cut:]))


class HeldOutEvaluation:
    def __init__(self, rt, ts, held, cfg, optimum: float | None = None, train=None):
        """`ts`: the TrainStep whose live weights are evaluated; `optimum`: the market's optimal PnL (ticks per
        snapshot) or None; `train`: real training rows the final evaluation's yardstick is fitted on (None: none)."""
        records = held.records[:cfg.eval_rows]
        chunks = max(1, min(cfg.n_backtests, len(records) // MIN_CHUNK))
        fee = int(round(cfg.fee * 1e9))
        self.rows, self.eval_rows = len(records), cfg.eval_rows
        with self.room():
            self.evaluator = Evaluator(records, EvalConfig(n_backtests=chunks, fee_per_lot=fee,
                                                           lots_per_entry=cfg.lots_per_entry, seed=cfg.seed,
                                                           passive=cfg.passive(held.tick)),
                                       tick=held.tick, rt=rt)
        self.policy = AgentPolicy(rt, ts.learner.params, ts.isv, cfg.seq_len, cfg.actor, cfg.precision)
        self.optimum = optimum
        self.yardstick, self.yardstick_note = None, None
        if train is not None:
            try:
                self.yardstick = fit_baseline(train.records, train.tick)[0]
            except NotFitted as e:  # too few mid moves: the comparison says so
                self.yardstick_note = str(e)

    def room(self):
        return room_for_heldout(self.eval_rows, "evaluating the held-out snapshots (their records, and arrays of "
                                                "each as they are evaluated)", self.rows)

    def run(self, policy=None, compare: bool = False) -> dict:
        """One greedy pass with `policy` (default: the live weights): `eval_*` fields; `compare`: the yardstick's too."""
        t0 = time.perf_counter()
        with self.room():
            m = self.evaluator.run(policy or self.policy).metrics
            y = self.evaluator.run(self.yardstick).metrics if compare and self.yardstick is not None else None
        out = {"eval_pnl": m["pnl_ticks"], "eval_pnl_se": m["pnl_ticks_se"], "eval_trades": m["trades"],
               "eval_wr": m["win_rate"], "eval_t": m["trade_t_stat"], "eval_time_in_market": m["exposure"],
               "eval_rows": self.rows, "eval_chunks": m["chunks"]}
        if y is not None:
            out.update(eval_yardstick_pnl=y["pnl_ticks"], eval_yardstick_t=y["trade_t_stat"],
                       eval_yardstick_trades=y["trades"])
        elif compare and self.yardstick_note:
            out["eval_yardstick_note"] = self.yardstick_note
        out["eval_seconds"] = round(time.perf_counter() - t0, 3)
        if self.optimum is not None:
            out["eval_opt_frac"] = m["pnl_ticks"] / self.optimum if self.optimum > 0 else None
        return out

    def close(self):
        self.policy.close()
        self.evaluator.close()
