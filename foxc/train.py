"""`python -m foxc.train`: train foxc's trading agent.

With no arguments: the embedded synthetic data, the backend picked automatically, defaults
sized for that backend (a minute or so on a CPU), and a run directory under runs/.
"""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from . import __version__
from .driver import BACKENDS, CudaError, open_runtime
from .profile import KernelProfiler, add_profile_args, profile_window


def isv_setting(text: str) -> tuple[str, float]:
    """NAME=VALUE of --set (the name and the value's range are checked with the configuration)."""
    name, sep, value = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with a number, got '{text}'") from None


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m foxc.train", description="Train foxc's trading agent on one GPU.")
    add = ap.add_argument
    add("--data", help="MBP-10 data: a file, directory or glob (Databento Parquet/DBN, LOBSTER CSV); "
                       "default: the synthetic market named by --synthetic")
    add("--synthetic", default=None, metavar="MARKET",
        help="the named synthetic market to train on without --data: easy, default (the default), null, noisy")
    add("--backend", choices=BACKENDS, default=None,
        help="auto (default; $FOXC_BACKEND overrides): CUDA when a usable GPU is present, else the numpy reference")
    add("--n-backtests", type=int, help="parallel backtests B, also the learning batch (default 1024 on CUDA, 32 on the reference)")
    add("--n-steps", type=int, help="training steps (default 5000 on CUDA, 150 on the reference)")
    add("--seq-len", type=int, help="window K of snapshots per observation (default 32 on CUDA, 8 on the reference)")
    add("--per-capacity", type=int, help="replay capacity, a power of two (default 65536 on CUDA, 1024 on the reference)")
    add("--n-step", type=int, default=None, help="n of the n-step return, 1 to 8 (default 3)")
    add("--seed", type=int, default=None, help="seed of everything: data, weights, sampling (default 0)")
    add("--precision", choices=("f32", "tf32"), default=None, help="matrix products in FP32 (default) or TF32 tensor cores")
    add("--actor", choices=("q", "policy"), default=None,
        help="who acts: the C51 head's means (q, default) or the policy head distilled from it")
    add("--lots", dest="lots_per_entry", type=int, default=None, help="lots per entry (default 1)")
    add("--fee", dest="fee_per_lot", type=float, default=None,
        help="fee per lot per side, in price units (default: the synthetic market's own, else 0)")
    add("--episode-steps", type=int, default=None, help="steps per episode before a flat exit; 0: to the segment's end (default 2000)")
    add("--horizons", type=lambda s: tuple(int(x) for x in s.split(",")), default=None,
        help="label horizons in snapshots, three comma-separated (default 10,50,100)")
    add("--synthetic-rows", type=int, default=None, help="snapshots of synthetic data when --data is not given")
    add("--graph", choices=("auto", "on", "off"), default=None,
        help="capture the whole step as one CUDA graph after warm-up: auto (default) = on with CUDA")
    add("--log-every", type=int, default=None, help="steps between metrics records (default 50)")
    add("--checkpoint-every", type=int, default=None, help="steps between checkpoints; 0: only the final one (default 5000)")
    add("--eval-every", type=int, default=None,
        help="steps between greedy evaluations on held-out rows (default 1000 on CUDA, 0 on the reference: "
             "only the final one)")
    add("--eval-rows", type=int, default=None, help="held-out snapshots each evaluation walks")
    add("--holdout", dest="holdout_frac", type=float, default=None,
        help="with --data: the last fraction of the rows, held out of training for the evaluations (default 0.1)")
    add("--set", dest="isv", action="append", type=isv_setting, default=None, metavar="NAME=VALUE",
        help="set an ISV slot (hyperparameter) at the start, e.g. --set lr_q=3e-4; repeatable")
    add("--resume-from", metavar="PATH", help="continue from a checkpoint (same configuration)")
    add("--out", help="run directory (default runs/<UTC time>)")
    add_profile_args(ap)
    return ap.parse_args(argv)


def describe_evaluation(e: dict) -> str:
    wr = "-" if e["eval_wr"] is None else f"{e['eval_wr']:.3f}"
    text = (f"{e['eval_pnl']:+.4f} ticks per snapshot over {e['eval_rows']:,} snapshots, {e['eval_trades']} trades, "
            f"win rate {wr}, in the market {e['eval_time_in_market']:.2f}")
    if e.get("eval_opt_frac") is not None:
        text += f"; {e['eval_opt_frac']:.2f} of the market's optimum"
    return text


def main(argv=None) -> int:
    args = parse_args(argv)
    from .checkpoint import CheckpointError, CheckpointSaveError
    from .data import DataError
    from .trainer.config import ConfigError, TrainConfig
    from .trainer.metrics import MetricsLog
    from .trainer.run import ResumeError, Trainer, write_json
    from .trainer.session import run_data
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    try:
        rt = open_runtime(args.backend)
        settings = {k: v for k, v in vars(args).items()
                    if k not in ("backend", "resume_from", "out", "profile", "profile_steps")}
        cfg = TrainConfig.for_backend(rt.backend, **settings)
        log(f"foxc {__version__}: backend {rt.backend} — {rt.reason}")
        out = Path(args.out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S"))
        out.mkdir(parents=True, exist_ok=True)
        data = run_data(cfg, log)
        data.market.report.write_json(out)
        source = data.source
        trainer = Trainer(rt, cfg, data.market, data.labels, out, data_meta=source, held=data.held,
                          optimum=data.optimum)
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
        if summary["evaluation"]:
            log("held-out (greedy): " + describe_evaluation(summary["evaluation"]))
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
