"""`python -m foxc.train`: train foxc's trading agent.

With no arguments: the embedded synthetic data, the backend picked automatically, defaults
sized for that backend (a minute or so on a CPU), and a run directory under runs/.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import __version__
from .driver import BACKENDS, CudaError, open_runtime
from .profile import KernelProfiler, add_profile_args, profile_window


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m foxc.train", description="Train foxc's trading agent on one GPU.")
    add = ap.add_argument
    add("--data", help="MBP-10 data: a file, directory or glob (Databento Parquet/DBN, LOBSTER CSV); "
                       "default: the embedded synthetic data")
    add("--backend", choices=BACKENDS, default=None,
        help="auto (default; $FOXC_BACKEND overrides): CUDA when a usable GPU is present, else the numpy reference")
    add("--n-backtests", type=int, help="parallel backtests B, also the learning batch (default 1024 on CUDA, 32 on the reference)")
    add("--n-steps", type=int, help="training steps (default 5000 on CUDA, 150 on the reference)")
    add("--seq-len", type=int, help="window K of snapshots per observation (default 32 on CUDA, 8 on the reference)")
    add("--per-capacity", type=int, help="replay capacity, a power of two (default 65536 on CUDA, 1024 on the reference)")
    add("--n-step", type=int, default=None, help="n of the n-step return, 1 to 8 (default 3)")
    add("--seed", type=int, default=None, help="seed of everything: data, weights, sampling (default 0)")
    add("--precision", choices=("f32", "tf32"), default=None, help="matrix products in FP32 (default) or TF32 tensor cores")
    add("--lots", dest="lots_per_entry", type=int, default=None, help="lots per entry (default 1)")
    add("--fee", dest="fee_per_lot", type=float, default=None, help="fee per lot per side, in price units (default 0)")
    add("--episode-steps", type=int, default=None, help="steps per episode before a flat exit; 0: to the segment's end (default 2000)")
    add("--horizons", type=lambda s: tuple(int(x) for x in s.split(",")), default=None,
        help="label horizons in snapshots, three comma-separated (default 10,50,100)")
    add("--synthetic-rows", type=int, default=None, help="snapshots of synthetic data when --data is not given")
    add("--graph", choices=("auto", "on", "off"), default=None,
        help="capture the whole step as one CUDA graph after warm-up: auto (default) = on with CUDA")
    add("--log-every", type=int, default=None, help="steps between metrics records (default 50)")
    add("--checkpoint-every", type=int, default=None, help="steps between checkpoints; 0: only the final one (default 5000)")
    add("--resume-from", metavar="PATH", help="continue from a checkpoint (same configuration)")
    add("--out", help="run directory (default runs/<UTC time>)")
    add_profile_args(ap)
    return ap.parse_args(argv)


def load_market(cfg, log):
    from .data.labels import LabelConfig, compute_labels
    if cfg.data:
        from .data.source import load
        market = load(cfg.data)
        source = {"source": cfg.data, "files": market.files, "sha256": files_digest(market.files)}
    else:
        from .data.synthetic import synthetic_data
        market = synthetic_data(cfg.synthetic_rows, seed=cfg.seed)
        source = {"source": "synthetic", "rows": cfg.synthetic_rows, "seed": cfg.seed,
                  "sha256": hashlib.sha256(market.records.view(np.uint8)).hexdigest()}
    t0 = time.perf_counter()
    labels = compute_labels(market.records, market.tick, LabelConfig(horizons=cfg.horizons))
    log(f"data: {len(market.records):,} snapshots from {market.source} ({market.instrument or 'unnamed'}), "
        f"tick {market.tick / 1e9:g}, {market.n_segments} segment(s); labels in {time.perf_counter() - t0:.1f} s")
    return market, labels, source


def files_digest(files) -> str:
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def main(argv=None) -> int:
    args = parse_args(argv)
    from .checkpoint import CheckpointError, CheckpointSaveError
    from .data import DataError
    from .trainer.config import ConfigError, TrainConfig
    from .trainer.metrics import MetricsLog
    from .trainer.run import ResumeError, Trainer, write_json
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    try:
        rt = open_runtime(args.backend)
        settings = {k: v for k, v in vars(args).items()
                    if k not in ("backend", "resume_from", "out", "profile", "profile_steps")}
        cfg = TrainConfig.for_backend(rt.backend, **settings)
        log(f"foxc {__version__}: backend {rt.backend} — {rt.reason}")
        out = Path(args.out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"))
        out.mkdir(parents=True, exist_ok=True)
        market, labels, source = load_market(cfg, log)
        market.report.write_json(out)
        trainer = Trainer(rt, cfg, market, labels, out, data_meta=source)
        if args.resume_from:
            step = trainer.resume(args.resume_from)
            log(f"resumed from {args.resume_from} at step {step}")
        kernels = KernelProfiler(rt, profile_window(args)) if args.profile else None
        trainer.set_profiling(args.profile_steps, kernels)
        write_json(out / "config.json", {"foxc_version": __version__, "backend": rt.backend, "reason": rt.reason,
                                         "device": rt.device_name, "config": cfg.as_dict(), "data": source,
                                         "resumed_from": args.resume_from})
        mode = (f"graph after {trainer.capture_after} eager warm-up steps" if trainer.use_graph else "eager")
        log(f"training: {cfg.n_steps} steps, B={cfg.n_backtests}, K={cfg.seq_len}, PER {cfg.per_capacity}, "
            f"n-step {cfg.n_step}, {cfg.precision}, {mode}; run directory {out}")
        metrics = MetricsLog(out / "metrics.jsonl", trainer.steps_done + cfg.n_steps)
        try:
            summary = trainer.train(cfg.n_steps, metrics, cfg.checkpoint_every)
        finally:
            metrics.close()
        final = trainer.save()
        summary["checkpoint"] = str(final)
        if kernels is not None:
            if kernels.steps:
                kernels.report(out)
            else:
                log(f"--profile: no step of the run fell in the window {profile_window(args)}")
        write_json(out / "summary.json", summary)
        wr = summary["win_rate"]
        log(f"done: {summary['steps_this_run']} steps in {summary['seconds']:.1f} s ({summary['sps']} steps/s, "
            f"{'graph' if summary['graph'] else 'eager'}); {summary['trades']} trades, win rate "
            f"{'-' if wr is None else f'{wr:.3f}'}; checkpoint {final}; metrics {out / 'metrics.jsonl'}")
        trainer.close()
        return 0
    except (CudaError, ConfigError, DataError, CheckpointError, CheckpointSaveError, ResumeError, ValueError,
            OSError) as e:
        print(f"foxc.train: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("foxc.train: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
