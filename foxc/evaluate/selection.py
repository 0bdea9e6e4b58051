"""A run's policy chosen on rows it did not train on: the best validated weights, or flat.

The end of the training window (--val-frac) is held out; every --val-every steps the live weights act greedily on it
and the validation with the best net PnL among those above flat (0) by more than VAL_Z standard errors is kept (its
weights and ISV copied on the device; checkpoints carry them), else flat. The standard error is of batch means over
VAL_BLOCK_ROWS snapshots: the rows are walked in few long chunks (each chunk's end closes its position).
"""
from __future__ import annotations

import time

import numpy as np

from ..component import Component, Persistent
from ..isv.registry import N_SLOTS
from .agent import NAME, RECORD, AgentPolicy, FlatPolicy, kept_record
from .runner import EvalConfig, Evaluator, chunk_standard_error

VAL_Z = 2.0  # standard errors above flat a validation must be to be kept
VAL_CHUNK_ROWS = 512  # snapshots per validation chunk at least (fewer chunks, fewer forced closes)
VAL_ROWS_MAX = 131_072  # validation rows at most: a standard error ~5 % of the default market's optimum
VAL_BLOCK_ROWS = 256  # pieces of the batch-means standard error
RULE = (f"the validation with the best net PnL among those that beat flat by more than {VAL_Z:g} standard errors; "
        "flat when none did")


def validates_at(step: int, every: int) -> bool:
    """Whether a run validates after `step`: every `every` steps, or (0) at 10, 20, 50, 100, 200, 500, ...: early
    weights are candidates too, and the steps do not depend on the run's length (a resume validates where an
    uninterrupted run does)."""
    if every:
        return step % every == 0
    if step < 10:
        return False
    digits = str(step).rstrip("0")
    return digits in ("1", "2", "5")


class Kept(Component):
    """The weights and ISV the validation kept so far, and its record, on the device (persistent)."""

    def __init__(self, rt, params, isv):
        self.rt = rt
        keep = self.persistent = Persistent()
        self.theta = keep("theta", rt.device_array(params.size, np.float32, "kept_theta"))
        self.isv = keep("isv", rt.device_array(N_SLOTS, np.float32, "kept_isv"))
        self.record = keep("record", rt.device_array(len(RECORD), np.float64, "kept_record"))
        self._params, self._bus = params, isv

    def reset(self):
        for a in (self.theta, self.isv):
            a.upload(np.zeros(a.shape, a.dtype))
        self.record.upload(np.array([-1, 0, 0, 0, 0], np.float64))

    def read(self) -> dict:
        return kept_record(self.record.download())

    def consider(self, step: int, m: dict) -> bool:
        """Count validation `m` (Validation.run's) at `step`; keep the live weights when it is the best that beats
        flat by VAL_Z standard errors so far. Between steps (host uploads: never inside a capture)."""
        r = self.read()
        better = m["val_se"] is not None and m["val_pnl_ticks"] > VAL_Z * m["val_se"] and (
            r["step"] < 0 or m["val_pnl_ticks"] > r["val_pnl_ticks"])
        if better:
            self.rt.copy_dtod(self.theta.ptr, self._params.theta.ptr, self.theta.nbytes)
            self.rt.copy_dtod(self.isv.ptr, self._bus.device.ptr, self.isv.nbytes)
            r.update(step=step, val_pnl_ticks=m["val_pnl_ticks"], val_se=m["val_se"], val_trades=m["val_trades"])
        r["validations"] += 1
        self.record.upload(np.array([r[k] for k in RECORD], np.float64))
        self.rt.stream.synchronize()
        return better

    def policy(self, seq_len: int, actor: str, precision: str):
        """The run's policy as it stands: the kept weights, FlatPolicy when the validation kept none, None when
        nothing was validated (the live weights are the run's policy)."""
        r = self.read()
        if r["validations"] == 0:
            return None
        if r["step"] < 0:
            return FlatPolicy()
        self.rt.stream.synchronize()
        return AgentPolicy.from_arrays(self.rt, self.theta.download(), self.isv.download(), seq_len, actor,
                                       precision, name=f"{NAME}, kept at step {r['step']}", orders=self._params.orders)

    def buffers(self) -> list:
        return [self.theta, self.isv, self.record]


class Validation(Component):
    """Greedy passes of the live weights over the validation rows."""

    def __init__(self, rt, params, isv, rows, cfg):
        """`rows`: MarketData of the validation rows; `cfg`: the run's TrainConfig (fee, lots, K, actor)."""
        records = rows.records
        chunks = max(1, min(cfg.n_backtests, len(records) // VAL_CHUNK_ROWS))
        self.rows = len(records)
        self.evaluator = Evaluator(records, EvalConfig(n_backtests=chunks, fee_per_lot=int(round(cfg.fee * 1e9)),
                                                       lots_per_entry=cfg.lots_per_entry, seed=cfg.seed,
                                                       passive=cfg.passive(rows.tick)),
                                   tick=rows.tick, rt=rt)
        self.policy = AgentPolicy(rt, params, isv, cfg.seq_len, cfg.actor, cfg.precision)

    def run(self) -> dict:
        """One greedy pass; the `val_*` fields of a metrics record."""
        t0 = time.perf_counter()
        ev = self.evaluator.run(self.policy)
        delta = np.diff(ev.equity, prepend=0)
        se = chunk_standard_error(delta, ev.chunks, VAL_BLOCK_ROWS)
        tick, lots = self.evaluator.tick, self.evaluator.config.lots_per_entry
        return {"val_pnl_ticks": ev.metrics["pnl_ticks"], "val_se": None if se is None else se / tick / lots,
                "val_trades": ev.metrics["trades"], "val_rows": self.rows,
                "val_seconds": round(time.perf_counter() - t0, 3)}

    def buffers(self) -> list:
        return [self.policy, self.evaluator]
