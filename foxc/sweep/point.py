"""One run of a sweep (`run_point_safely(spec)`: in this process, a worker or a Ray task: foxc.jobs): a point's settings with one
seed, trained as `python -m foxc.train` trains and evaluated on held-out rows; its row of the sweep's table. Its
directory holds a training run's files and `train.log`. As a worker: `python -m foxc.sweep.point RUN.json`.
"""
from __future__ import annotations

import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..jobs import Job, serve
from ..trainer.config import TrainConfig
from .report import EVAL_FIELDS, EVALUATED, FIGURES, ROW, ROW_FIELDS
from ..driver import open_runtime
from ..train import run as train_run


@dataclass
class RunSpec(Job):
    point: str
    seed: int
    axes: dict            # axis name -> the point's value
    config: dict          # TrainConfig.as_dict(): every setting of the run, resolved for `backend`
    backend: str
    out_dir: str

    SPEC_FILE: ClassVar[str] = "run.json"
    WORKER: ClassVar[str] = "foxc.sweep.point"
    CONFIGS: ClassVar[dict] = {"config": TrainConfig}

    @property
    def key(self) -> str:
        return f"{self.point}-seed{self.seed}"

    def train_config(self) -> TrainConfig:
        return TrainConfig.for_backend(self.backend, **self.config)

    def row(self, **fields) -> dict:
        """The run's row: point, seed, the axes, then ROW_FIELDS (None where not given)."""
        return {"point": self.point, "seed": self.seed, **self.axes,
                **{k: fields.get(k) for k in ROW_FIELDS}, "run_dir": self.out_dir, "host": socket.gethostname()}

    def record_shape(self, record: dict) -> dict:
        """What the sweep reads of the run's row (report.ROW), its axes each of the type of its value here."""
        evaluated = EVALUATED if record.get("status") == "ok" and record.get("eval_pnl") is not None else {}
        return {**ROW, **{a: list if isinstance(v, tuple) else type(v) for a, v in self.axes.items()}, **evaluated}

    def restored(self, record: dict) -> dict:
        """The axes as this run's values: a tuple (horizons) came back a list, which sweep.csv would write otherwise
        and the plot cannot group by; a figure as a float (a JSON integer of 2**63 or more there broke the parquet)."""
        return {**record, **{k: float(record[k]) for k in FIGURES if record[k] is not None}, **self.axes}

    def failed(self, error: str) -> dict:
        return self.row(status="failed", error=error)


def run_point(spec: RunSpec, rt=None) -> dict:
    """Train and evaluate one run on `rt` (default: a runtime of its own); raises on failure."""
    t0 = time.perf_counter()
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rt = rt or open_runtime(spec.backend)
    with (out / "train.log").open("w") as log:
        summary = train_run(rt, spec.train_config(), out, lambda msg: print(msg, file=log, flush=True))
    evaluation = summary["evaluation"] or {}
    return spec.row(status="ok", **{k: evaluation.get(k) for k in EVAL_FIELDS}, train_sps=summary["sps"],
                    train_seconds=summary["seconds"], eval_seconds=summary["eval_seconds"],
                    seconds=round(time.perf_counter() - t0, 3), steps=summary["steps"])


def run_point_safely(spec: RunSpec, rt=None) -> dict:
    """run_point, a failure turned into a failed row that holds its traceback (the sweep goes on)."""
    try:
        return run_point(spec, rt)
    except Exception:
        return spec.failed(traceback.format_exc(limit=8))


def main(argv=None) -> int:
    return serve(sys.argv[1:] if argv is None else argv, RunSpec, run_point_safely)


if __name__ == "__main__":
    sys.exit(main())
