"""Evaluation throughput: the baseline policy over a synthetic window with learning off, snapshots evaluated per second.

    python -m foxc.bench evaluate [--backend auto|cuda|reference] [--rows N] [--chunks B ...] [--json FILE]

Each run walks every snapshot of the window once, B chunks side by side (foxc.evaluate.evaluate:
a host policy, one simulator step and its downloads per step), so it measures the evaluation
loop end to end, host included: the figure a walk-forward's evaluation phase runs at.
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from ..data.synthetic import synthetic_data
from ..driver import BACKENDS, open_runtime
from ..evaluate.baseline import TRAINER
from ..evaluate.runner import EvalConfig, evaluate
from .report import table, write_json

CHUNKS = (16, 256, 4096)
ROWS = 400_000


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m foxc.bench evaluate", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=BACKENDS, default=None)
    ap.add_argument("--rows", type=int, default=ROWS, help=f"snapshots in the evaluated window (default {ROWS})")
    ap.add_argument("--chunks", type=int, action="append",
                    help=f"backtests side by side (repeatable; default {', '.join(map(str, CHUNKS))})")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    rt = open_runtime(args.backend)
    rows_n, chunks = args.rows, args.chunks or list(CHUNKS)
    if rt.backend != "cuda":  # keep the reference smoke run small
        rows_n, chunks = min(rows_n, 4_000), sorted({min(c, 64) for c in chunks})
    data = synthetic_data(2 * rows_n, seed=0)
    train = dataclasses.replace(data, records=data.records[:rows_n])
    window = data.records[rows_n:]
    with tempfile.TemporaryDirectory() as tmp:
        policy = TRAINER.load_policy(TRAINER.train(train, 20, Path(tmp), {}), {})
    print(f"backend {rt.backend}: {rt.device_name}")
    out = []
    for b in chunks:
        t0 = time.perf_counter()
        ev = evaluate(policy, window, EvalConfig(n_backtests=b, fee_per_lot=0), tick=data.tick, rt=rt)
        wall = time.perf_counter() - t0
        steps = int((ev.chunks[:, 1] - ev.chunks[:, 0]).max())
        out.append({"chunks": b, "snapshots": len(window), "steps": steps, "seconds": round(wall, 3),
                    "ms_per_step": round(wall / steps * 1e3, 3), "snapshots_per_s": f"{len(window) / wall:.3e}",
                    "trades": ev.metrics["trades"]})
    print(table(out, ["chunks", "snapshots", "steps", "seconds", "ms_per_step", "snapshots_per_s", "trades"]))
    write_json(args.json, "evaluate", rt, out, {"window_rows": rows_n})
    best = max(out, key=lambda r: float(r["snapshots_per_s"]))
    print(f"summary: evaluation at {best['snapshots_per_s']} snapshots/s with {best['chunks']} chunks "
          f"({rt.backend}, baseline policy on the host, {len(window)} snapshots)")
    return 0
