"""Evaluation throughput: the baseline and the agent over a synthetic window with learning off, snapshots per second.

Each run walks every snapshot of the window once, B chunks side by side (foxc.evaluate.Evaluator), host
included: the rate of a walk-forward's evaluation. Policies: the logistic baseline (features on the host) and
the agent (`AgentPolicy`, untrained weights: the kernels and shapes of a trained one).
"""
from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from ..cli import int_at_least, positive_int, text_table as table
from ..data.features import FEATURES
from ..data.synthetic import synthetic_data
from ..evaluate.agent import AgentPolicy
from ..evaluate.baseline import TRAINER
from ..evaluate.runner import EvalConfig, Evaluator
from ..isv import IsvBus
from ..nn.model import HIDDEN_DIM, Parameters
from . import harness
from .report import write_json

CHUNKS, ROWS = (16, 256, 4096), 400_000
MIN_ROWS = 1_000  # the baseline fitted on as many rows needs enough mid moves


def main(argv=None) -> int:
    ap = harness.parser("evaluate", __doc__)
    ap.add_argument("--rows", type=int_at_least(MIN_ROWS), default=ROWS,
                    help=f"snapshots in the evaluated window, at least {MIN_ROWS:,} (default {ROWS:,})")
    ap.add_argument("--chunks", type=positive_int, action="append",
                    help=f"backtests side by side (repeatable; default {', '.join(map(str, CHUNKS))})")
    return harness.run(ap, argv, _main)


def _main(args, rt) -> int:
    rows_n, chunks = args.rows, args.chunks or list(CHUNKS)
    if rt.backend != "cuda":  # keep the reference smoke run small
        rows_n, chunks = min(rows_n, 4_000), sorted({min(c, 64) for c in chunks})
    data = synthetic_data(2 * rows_n, seed=0)
    train = dataclasses.replace(data, records=data.records[:rows_n])
    window = data.records[rows_n:]
    with tempfile.TemporaryDirectory() as tmp:
        baseline = TRAINER.load_policy(TRAINER.train(train, 20, Path(tmp), {}), {})
    params = Parameters(rt, FEATURES, HIDDEN_DIM)
    params.init(np.random.default_rng(0))
    agent = AgentPolicy(rt, params, IsvBus(rt), seq_len=32 if rt.backend == "cuda" else 8)
    print(f"backend {rt.backend}: {rt.device_name}")
    out = []
    for b in chunks:
        with Evaluator(window, EvalConfig(n_backtests=b, fee_per_lot=0), tick=data.tick, rt=rt) as evaluator:
            evaluator.run(agent)  # builds the agent's device parts for this window: not part of the timing
            for name, policy in (("baseline", baseline), ("agent", agent)):
                t0 = time.perf_counter()
                ev = evaluator.run(policy)
                wall = time.perf_counter() - t0
                steps = int((ev.chunks[:, 1] - ev.chunks[:, 0]).max())
                out.append({"policy": name, "chunks": b, "snapshots": len(window), "steps": steps,
                            "seconds": round(wall, 3), "ms_per_step": round(wall / steps * 1e3, 3),
                            "snapshots_per_s": f"{len(window) / wall:.3e}", "trades": ev.metrics["trades"]})
            agent.close()
    print(table(out, ["policy", "chunks", "snapshots", "steps", "seconds", "ms_per_step", "snapshots_per_s", "trades"]))
    write_json(args.json, "evaluate", rt, out, {"window_rows": rows_n})
    best = {p: max((r for r in out if r["policy"] == p), key=lambda r: float(r["snapshots_per_s"]))
            for p in ("baseline", "agent")}
    print("summary: evaluation at " + ", ".join(f"{p} {r['snapshots_per_s']} snapshots/s ({r['chunks']} chunks)"
                                                 for p, r in best.items())
          + f" ({rt.backend}, {len(window)} snapshots)")
    return 0
