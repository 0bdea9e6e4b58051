"""One walk-forward fold: train on window i, evaluate on window i+1 with learning off; the same code in every worker.

A fold writes into its directory the trainer's checkpoint(s) (and metrics.jsonl, summary.json or train.json where the
trainer writes them), `eval.json` (the figures), `equity.npy` and `trades.npy`, and returns a JSON-able record. As a
worker process (foxc.walkforward.worker) reads its windows from the memory-mapped `data_npy`, or
from a prepared cache only the shards that hold them, each verified by its hash.

A fold trainer (`--trainer`: a TRAINERS name or "package.module:attribute") has `name`, `is_baseline`,
`train(window: MarketData, steps, out_dir, config) -> checkpoint path` and `load_policy(checkpoint, config, rt)`;
`config` is TrainerConfig's fields as a dict, with `fold` and `cache`.
"""
from __future__ import annotations

import importlib
import json
import os
import socket
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..cli import one_line
from ..data import cache as data_cache  # read_rows looked up when called (tests replace it)
from ..data.market import MarketData
from ..data.source import records_need
from ..data.validate import DataError
from ..driver import open_runtime
from ..errors import UserError
from ..evaluate.baseline import TRAINER as BASELINE, NotFitted, no_room_in_fold
from ..evaluate.runner import EvalConfig, Evaluator
from ..lobsim.passive import PassiveConfig
from ..jobs import Job
from ..jsonfile import JsonFileError, read_json
from .report import FAILED_RECORD, RECORD

TRAINERS = {"rl": "foxc.trainer.fold:TRAINER", "baseline": "foxc.evaluate.baseline:TRAINER"}
CURVE_POINTS = 1000
TRAIN_SUMMARY_KEYS = ("steps", "sps", "frames", "frames_dropped", "graph", "kernels_per_step", "this_run",
                      "checkpoint_errors", "selection")


def resolve_trainer(spec: str):
    """The trainer named by `spec` (a TRAINERS key or "module:attribute"); a UserError when it names none."""
    target = TRAINERS.get(spec, spec)
    if not target.partition(":")[0] or ":" not in target:
        raise UserError(f"--trainer {spec}: unknown trainer '{spec}': use one of {', '.join(TRAINERS)} or "
                        "'package.module:attribute'")
    module, attr = target.split(":", 1)
    try:
        trainer = getattr(importlib.import_module(module), attr, None)
    except ModuleNotFoundError as e:  # a module that is not there (one that fails to import keeps its traceback)
        raise UserError(f"--trainer {spec}: {e}") from None
    if trainer is None:
        raise UserError(f"--trainer {spec}: module '{module}' has no attribute '{attr}'")
    for need in ("name", "is_baseline", "train", "load_policy"):
        if not hasattr(trainer, need):
            raise UserError(f"--trainer {spec}: trainer '{spec}' has no '{need}' (see foxc.walkforward.folds)")
    return trainer


@dataclass
class TrainerConfig:  # a fold spec's `config`, for each fold's trainer
    train_args: list[str] = field(default_factory=list)  # training flags, parsed by the trainer
    backend: str | None = None
    seed: int = 0
    baseline: dict = field(default_factory=dict)  # the baseline trainer's options over its DEFAULTS


@dataclass
class FoldSpec(Job):
    fold: int
    train: tuple[int, int]         # [start, stop) rows of the whole data
    eval: tuple[int, int]
    steps: int
    out_dir: str
    trainer: str = "baseline"
    config: dict = field(default_factory=dict)   # TrainerConfig's fields
    eval_config: dict = field(default_factory=dict)
    tick: int = 1
    source: str = ""
    data_npy: str = ""             # for worker processes: the whole data as a .npy file (memory-mapped)
    cache: str = ""                # or a prepared cache the fold reads its windows' shards from
    cache_sha256: str = ""         # the cache's identity when the folds were planned
    train_days: tuple[str, str] | None = None  # folds by dates: the first and last UTC date of each window
    eval_days: tuple[str, str] | None = None

    SPEC_FILE: ClassVar[str] = "fold.json"
    WORKER: ClassVar[str] = "foxc.walkforward.worker"
    CONFIGS: ClassVar[dict] = {"config": TrainerConfig, "eval_config": EvalConfig}

    @property
    def key(self) -> int:
        return self.fold

    def record_shape(self, record: dict) -> dict:
        return FAILED_RECORD if "error" in record else RECORD

    def failed(self, error: str, data_error: str | None = None) -> dict:
        return {"fold": self.fold, "error": error, "fold_dir": self.out_dir, "host": socket.gethostname(),
                **fold_days(self), **({"data_error": data_error} if data_error is not None else {})}


def fold_days(fold) -> dict:
    """A fold by dates (a FoldSpec or FoldWindows): the first and last date of its two windows, for its record."""
    return {"train_days": list(fold.train_days), "eval_days": list(fold.eval_days)} if fold.train_days else {}


def describe_window(window: np.ndarray, start: int, stop: int) -> dict:
    """What the report says of rows [start, stop) of the data; `window` holds them."""
    return {"start": int(start), "stop": int(stop), "rows": int(stop - start),
            "first_ts_ns": int(window["ts_ns"][0]), "last_ts_ns": int(window["ts_ns"][-1]),
            "segments": int(len(np.unique(window["segment"])))}


def run_fold(spec: FoldSpec, train_records: np.ndarray, eval_records: np.ndarray) -> dict:
    """Train, then evaluate with learning off; returns the fold's record (raises on failure)."""
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    trainer = resolve_trainer(spec.trainer)
    window = MarketData(np.ascontiguousarray(train_records), "", 0, spec.source, [], spec.tick)
    config = {**spec.config, "fold": spec.fold, "cache": spec.cache}
    t0 = time.perf_counter()
    with third_party_memory(spec, window, config, "training on its training window"):
        checkpoint = Path(trainer.train(window, spec.steps, out, config))
    t1 = time.perf_counter()
    ecfg = EvalConfig(**spec.eval_config)
    rt = open_runtime(ecfg.backend)
    with third_party_memory(spec, window, config, "loading the policy it trained"):
        policy = trainer.load_policy(checkpoint, config, rt)
    # an agent trained with resting orders is evaluated with them, as it trained (its quotes' settings)
    ecfg = replace(ecfg, passive=PassiveConfig.of_settings(getattr(policy, "run_settings", {}), spec.tick))
    try:
        with Evaluator(np.ascontiguousarray(eval_records), ecfg, tick=spec.tick, rt=rt) as evaluator:
            ev = evaluator.run(policy)
            t2 = time.perf_counter()
            yardstick = None if trainer.is_baseline else _yardstick(window, evaluator, out, config)
    except MemoryError:  # the host's, or the device's (DeviceOutOfMemory)
        raise no_room_evaluating(len(eval_records), spec.source, config) from None
    np.save(out / "equity.npy", ev.equity)
    np.save(out / "trades.npy", ev.trades)
    at = np.unique(np.linspace(0, len(ev.equity) - 1, min(CURVE_POINTS, len(ev.equity))).round().astype(np.int64))
    record = {"fold": spec.fold, "trainer": trainer.name, "is_baseline": bool(trainer.is_baseline), "policy": ev.policy,
              "train_window": describe_window(train_records, *spec.train),
              "eval_window": describe_window(eval_records, *spec.eval), **fold_days(spec), "steps": spec.steps,
              "checkpoint": str(checkpoint), "fold_dir": str(out), "host": socket.gethostname(),
              "backend": rt.backend, "device": getattr(rt, "device_name", rt.backend),
              "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "train_seconds": t1 - t0,
              "eval_seconds": t2 - t1, "metrics": ev.metrics, "sim": ev.sim,
              # [[ts_ns, equity], ...] at up to CURVE_POINTS evenly spaced snapshots (first and last included)
              "equity_curve": [[int(eval_records["ts_ns"][i]), int(ev.equity[i])] for i in at]}
    if yardstick is not None:
        record["yardstick"] = yardstick
    if (out / "summary.json").is_file():  # a trainer's run summary (the RL trainer writes one)
        summary = read_json(out / "summary.json")
        record["train_summary"] = {k: summary.get(k) for k in TRAIN_SUMMARY_KEYS}
    if (out / "train.json").is_file():
        record["train_fit"] = read_json(out / "train.json")
    (out / "eval.json").write_text(json.dumps({k: v for k, v in record.items() if k != "equity_curve"}, indent=2)
                                   + "\n")
    return record


def _yardstick(window, evaluator, out: Path, config: dict) -> dict:
    """The logistic-imbalance baseline trained on the same window and evaluated on the same rows, the yardstick an
    agent must beat on real data (the figures say when it could not be fitted)."""
    try:
        ckpt = BASELINE.train(window, 50, out / "yardstick", config)
        m = evaluator.run(BASELINE.load_policy(ckpt, config)).metrics
    except (NotFitted, DataError) as e:  # too few mid moves, or out of memory fitting it: the fold keeps its figures
        return {"error": str(e), "net_pnl": None}
    except MemoryError:
        return {"error": str(no_room_evaluating(len(evaluator.records), window.source, config)), "net_pnl": None}
    return {k: m[k] for k in ("net_pnl", "trades", "win_rate", "pnl_ticks", "trade_t_stat", "exposure")}


@contextmanager
def third_party_memory(spec: FoldSpec, window: MarketData, config: dict, doing: str):
    """A third-party trainer (not in TRAINERS, whose own say what they hold) out of host or device memory `doing`
    something: one line naming it, with a shorter training window as the remedy; any other error keeps its
    traceback."""
    try:
        yield
    except MemoryError as e:
        if spec.trainer in TRAINERS:
            raise
        raise no_room_in_fold(f"--trainer {spec.trainer}: {doing}", "each fold trains on its training window whole",
                              f"{records_need(window.n_rows)}, and what the trainer makes of them ({one_line(e)})",
                              window.source, config, "--train-days") from None


def no_room_evaluating(n: int, source: str, config: dict) -> DataError:  # no_room_in_fold
    return no_room_in_fold("evaluating its evaluation window", "each fold evaluates its evaluation window whole",
                           f"{records_need(n)}, and arrays of each as they are evaluated", source, config, "--eval-days")


def run_fold_safely(spec: FoldSpec, train_records=None, eval_records=None) -> dict:
    """run_fold, a failure turned into a record that names it (a report still comes out); the windows are read
    here unless given."""
    try:
        if train_records is None:
            train_records, eval_records = records_of(spec)
        return run_fold(spec, train_records, eval_records)
    except DataError as e:  # the data refused (a tampered shard, out of memory holding a window): the user's to fix
        return spec.failed(f"{type(e).__name__}: {e}", str(e))
    except JsonFileError as e:  # a damaged summary.json or train.json: the file and why, not a traceback
        return spec.failed(f"{type(e).__name__}: {e}")
    except Exception:
        return spec.failed(traceback.format_exc(limit=8))


def records_of(spec: FoldSpec) -> tuple[np.ndarray, np.ndarray]:
    """The fold's two windows, from the cache (only their shards) or the memory-mapped data_npy."""
    if not spec.cache:
        return windows_of(spec, np.load(spec.data_npy, mmap_mode="r"))
    windows = []
    for (a, b), name, days in ((spec.train, "training", "--train-days"), (spec.eval, "evaluation", "--eval-days")):
        try:
            windows.append(data_cache.read_rows(spec.cache, a, b, spec.cache_sha256 or None))
        except MemoryError:
            raise no_room_in_fold(f"reading its {name} window", "each fold reads the shards that hold its windows "
                                  "whole", f"{records_need(b - a, '')}, read with the rest of the cache's shards that "
                                  "hold them", spec.source, {"cache": spec.cache}, days) from None
    return windows[0], windows[1]


def windows_of(spec: FoldSpec, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return records[slice(*spec.train)], records[slice(*spec.eval)]


def ray_windows(records: np.ndarray):
    """run_ray's `inputs` for folds: a fold's two windows, each put in the object store once (a window is one fold's
    evaluation and the next one's training)."""
    def inputs(spec: FoldSpec, put):
        return tuple(put(b, lambda b=b: np.ascontiguousarray(records[b[0]:b[1]])) for b in (spec.train, spec.eval))
    return inputs
