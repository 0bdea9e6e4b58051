"""Walk-forward validation: `python -m foxc.walkforward --data … --folds F --steps-per-fold N [training flags]`.

The data (in time order) is cut into F+1 consecutive windows, disjoint and covering every row;
fold i trains on window i and evaluates on window i+1 with learning off (foxc.evaluate). Each
fold gets a directory `OUT/fold-<i>/` (checkpoints, figures, equity curve); the run gets
`report.json` (a `folds` list, one record per fold with its figures and the verdict on each
success criterion), `report.md` (the same as a table) and plots (equity.png, net_pnl.png).

Training is pluggable (`--trainer`, see foxc.evaluate.trainers): flags this command does not
know are passed to the trainer verbatim (config["train_args"]): by default the integrated RL trainer
(`--trainer rl`, its flags as for `python -m foxc.train`); `--trainer baseline` is a logistic-imbalance
yardstick, and every output says so.

Folds run one after another (`--parallel none`), one process per visible GPU of this machine
(`--parallel local`, or per worker on the reference backend) or one Ray task per fold with one
GPU each across a Ray cluster (`--parallel ray`, `--ray-address`, optional extra `foxc[ray]`).
"""
from __future__ import annotations

import secrets
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from .cli import (ArgumentParser, UsageError, finite_float, nonnegative_float, nonnegative_int, output_dir,
                  positive_int, run as run_cli)
from .data.record import PRICE_SCALE
from .data.source import MarketData
from .evaluate import scaleout
from .evaluate.folds import FoldSpec, describe_window, ray_windows, run_fold_safely, windows_of
from .evaluate.plots import PlotsUnavailable, walkforward_plots
from .evaluate.reporting import RULES, Criteria, assemble, write
from .evaluate.runner import EvalConfig
from .evaluate.trainers import resolve_trainer

SPLITS = ("auto", "segments", "rows")
MIN_WINDOW_ROWS = 2


def split_windows(records: np.ndarray, k: int, how: str = "auto") -> tuple[list[tuple[int, int]], str]:
    """k consecutive [start, stop) windows covering the records, and whether cut at 'segments' or 'rows'.

    'segments' cuts only where a segment begins (the cut nearest each i·n/k that leaves every
    window non-empty; needs at least k segments); 'rows' cuts at round(i·n/k) wherever it falls;
    'auto' takes segments when there are at least k of them, else rows."""
    n = len(records)
    if k < 2:
        raise ValueError(f"need at least 2 windows (1 fold), got {k}")
    if how not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got '{how}'")
    seg = records["segment"]
    seg_starts = np.flatnonzero(seg[1:] != seg[:-1]) + 1  # where a new segment begins (row 0 excluded)
    if how == "auto":
        how = "segments" if len(seg_starts) + 1 >= k else "rows"
    if how == "segments":
        if len(seg_starts) + 1 < k:
            raise ValueError(f"{len(seg_starts) + 1} segments cannot make {k} windows at segment boundaries")
        cuts, lo = [], 0
        for i in range(1, k):
            # keep k-1-i boundaries after this cut for the later windows
            options = seg_starts[lo:len(seg_starts) - (k - 1 - i)]
            j = lo + int(np.abs(options - i * n / k).argmin())
            cuts.append(int(seg_starts[j]))
            lo = j + 1
    else:
        cuts = [int(round(i * n / k)) for i in range(1, k)]
    bounds = list(zip([0] + cuts, cuts + [n]))
    small = [b for b in bounds if b[1] - b[0] < MIN_WINDOW_ROWS]
    if small:
        raise ValueError(f"{n} rows cannot make {k} windows of at least {MIN_WINDOW_ROWS} rows")
    return bounds, how


def load_data(spec: str, rows: int, seed: int, segments: int, market: str = "default") -> MarketData:
    """`spec` 'synthetic': `rows` of the named synthetic market; else a file, directory or glob."""
    if spec == "synthetic":
        from .data.markets import market as named
        from .data.synthetic import synthetic_data
        return synthetic_data(rows, seed=seed, params=named(market).params, n_segments=segments)
    from .data.source import load
    return load(spec)


def fold_specs(data: MarketData, windows, steps: int, out: Path, trainer: str, config: dict,
               eval_config: EvalConfig) -> list[FoldSpec]:
    return [FoldSpec(fold=i, train=windows[i], eval=windows[i + 1], steps=steps, out_dir=str(out / f"fold-{i}"),
                     trainer=trainer, config=config, eval_config=eval_config.to_dict(), tick=int(data.tick),
                     source=data.source)
            for i in range(len(windows) - 1)]


def walk_forward(data: MarketData, *, folds: int, steps: int, out: Path, trainer: str = "rl",
                 train_args: list[str] | None = None, split: str = "auto", eval_config: EvalConfig = EvalConfig(),
                 criteria: Criteria = Criteria(), parallel: str = "none", workers: int | None = None,
                 ray_address: str | None = None, ray_init: dict | None = None, gpus_per_fold: float = 1,
                 seed: int = 0, plots: bool = True, keep_data: bool = False, market: str | None = None,
                 log=print) -> dict:
    """Run every fold and write the report; returns it. `market`: the named synthetic market the data
    was drawn from (its exact optimum is the edge rule's yardstick), None for real data."""
    out = Path(out)
    named = resolve_trainer(trainer)  # fail before any work when the trainer does not resolve
    windows, how = split_windows(data.records, folds + 1, split)
    out.mkdir(parents=True, exist_ok=True)
    config = {"train_args": list(train_args or []), "backend": eval_config.backend, "seed": seed}
    specs = fold_specs(data, windows, steps, out, trainer, config, eval_config)
    log(f"walk-forward: {named.name}; {len(data.records)} rows in {folds + 1} windows (split at {how}), "
        f"{folds} folds of {steps} steps, runner {parallel}")
    t0 = time.perf_counter()
    if parallel == "none":
        results = scaleout.run_sequential(specs, lambda s: run_fold_safely(s, *windows_of(s, data.records)))
    elif parallel == "local":
        slots = scaleout.local_slots(eval_config.backend, workers, folds)
        data_npy = out / "data.npy"
        np.save(data_npy, data.records)
        try:
            specs = [FoldSpec(**{**asdict(s), "data_npy": str(data_npy)}) for s in specs]
            env = {"FOXC_BACKEND": eval_config.backend} if eval_config.backend else {}
            log(f"local workers: {len(slots)} ({'GPUs ' + ','.join(slots) if slots[0] is not None else 'CPU'})")
            results = scaleout.run_local(specs, slots, env)
        finally:
            if not keep_data:
                data_npy.unlink(missing_ok=True)
    elif parallel == "ray":
        results = scaleout.run_ray(specs, run_fold_safely, inputs=ray_windows(data.records), address=ray_address,
                                   num_gpus=gpus_per_fold, init_kwargs=ray_init, noun="fold",
                                   gpus_flag="--gpus-per-fold")
    else:
        raise ValueError(f"parallel must be none, local or ray, got '{parallel}'")
    optimum = None
    if market is not None:
        from .data.markets import market as named_market
        from .evaluate.optimum import optimal_pnl
        params = named_market(market).params
        optimum = optimal_pnl(params, eval_config.fee_per_lot / PRICE_SCALE / params.tick).pnl_per_snapshot
    run = {"trainer": named.name, "trainer_spec": trainer, "train_args": config["train_args"],
           "data": {"source": data.source, "files": data.files, "instrument": data.instrument, "market": market,
                    "rows": int(len(data.records)), "tick": int(data.tick)}, "optimum": optimum,
           "split": how, "windows": [describe_window(data.records[a:b], a, b) for a, b in windows],
           "steps_per_fold": steps, "parallel": parallel, "eval_config": eval_config.to_dict(),
           "seconds": time.perf_counter() - t0}
    report = assemble(results, criteria, run)
    if plots:
        try:
            report["plots"] = [str(p) for p in walkforward_plots(report, out)]
        except PlotsUnavailable as e:
            log(str(e))
    json_path, md_path = write(report, out)
    for f in report["folds"]:
        if "error" in f:
            log(f"fold {f['fold']}: FAILED\n{f['error']}")
        else:
            m = f["metrics"]
            wr = "n/a" if m["win_rate"] is None else f"{m['win_rate']:.3f}"
            frac = f["criteria"]["edge"].get("opt_frac", {}).get("value")
            log(f"fold {f['fold']}: {m['trades']} trades, win rate {wr}, net PnL {m['net_pnl'] / PRICE_SCALE:.4f} "
                f"({m['pnl_ticks']:+.5f} ticks per snapshot" + (f", {frac:.2f} of the optimum" if frac is not None
                                                                  else "") + f"), in the market "
                f"{m['exposure']:.2f}: edge rule {'pass' if f['passed_by']['edge'] else 'fail'}, seed rule "
                f"{'pass' if f['passed_by']['seed'] else 'fail'}")
    pooled = report["run_criteria"].get("pooled_t_stat")
    if pooled:
        t = "n/a" if pooled["value"] is None else f"{pooled['value']:.2f}"
        log(f"pooled per-trade t-statistic {t} over {pooled['trades']} trades: "
            f"{'an edge' if pooled['pass'] else 'no edge shown'} (needs > {criteria.min_t_stat})")
    log(f"{'all folds pass' if report['all_passed'] else 'not every fold passes'} ({criteria.rule} rule); "
        f"wrote {json_path}, {md_path}")
    return report


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m foxc.walkforward", allow_abbrev=False, description=__doc__.split("\n")[0],
                        epilog="Flags not listed here are passed to the trainer.")
    ap.add_argument("--data", default="synthetic", help="a file, directory or glob of market data, or 'synthetic'")
    ap.add_argument("--synthetic", default="default", metavar="MARKET",
                    help="the named synthetic market of --data synthetic: easy, default, null, noisy")
    ap.add_argument("--synthetic-rows", type=positive_int, default=None,
                    help="rows of synthetic data (default 2,000,000 with CUDA, 200,000 on the reference backend)")
    ap.add_argument("--synthetic-segments", type=positive_int, default=1)
    ap.add_argument("--folds", type=positive_int, default=3)
    ap.add_argument("--steps-per-fold", type=positive_int, default=None,
                    help="training steps per fold (default 25,000 with CUDA, 1,500 on the reference backend)")
    ap.add_argument("--out", type=Path, default=None,
                    help="run directory: new or empty, unless --overwrite (default runs/walkforward-<time>)")
    ap.add_argument("--overwrite", action="store_true", help="allow --out to name a directory that holds files")
    ap.add_argument("--trainer", default="rl",
                    help="rl (the integrated trainer, default), baseline (a logistic imbalance yardstick, "
                         "not the RL agent) or package.module:attribute")
    ap.add_argument("--split", choices=SPLITS, default="auto")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    ap.add_argument("--backend", choices=("auto", "cuda", "reference"), default=None)
    ap.add_argument("--parallel", choices=("none", "local", "ray"), default="none")
    ap.add_argument("--workers", type=positive_int, default=None, help="local: at most this many processes (GPUs)")
    ap.add_argument("--ray-address", default=None, help="ray: the cluster to join (default: start a local one)")
    ap.add_argument("--gpus-per-fold", type=nonnegative_float, default=1.0, help="ray: GPUs each fold's task asks for")
    ev = ap.add_argument_group("evaluation")
    ev.add_argument("--eval-backtests", type=positive_int, default=None,
                    help="chunks of the window evaluated side by side (default 1,024 with CUDA, 64 on the reference)")
    ev.add_argument("--fee", type=nonnegative_float, default=None,
                    help="fee per lot per side, in price units (e.g. 0.005; default: the synthetic market's own, else 0)")
    ev.add_argument("--lots", type=positive_int, default=1, help="lots per entry")
    ev.add_argument("--sampled", action="store_true", help="sample actions from the policy (default: greedy)")
    cr = ap.add_argument_group("success criteria")
    cr.add_argument("--criteria", choices=RULES, default="edge",
                    help="which rule decides: edge (default: a fraction of the optimum on synthetic markets; net PnL, "
                         "the yardstick and a pooled t-statistic on real data) or seed (the Rust team's rule); "
                         "both are reported")
    cr.add_argument("--min-opt-frac", type=finite_float, default=Criteria.min_opt_frac)
    cr.add_argument("--min-t-stat", type=finite_float, default=Criteria.min_t_stat)
    cr.add_argument("--min-win-rate", type=finite_float, default=Criteria.min_win_rate)
    cr.add_argument("--hold-min", type=finite_float, default=Criteria.hold_min)
    cr.add_argument("--hold-max", type=finite_float, default=Criteria.hold_max)
    cr.add_argument("--entropy-min", type=finite_float, default=Criteria.entropy_min)
    cr.add_argument("--entropy-stability", type=finite_float, default=Criteria.entropy_stability)
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--keep-data", action="store_true", help="local: keep OUT/data.npy the workers read")
    return ap


# What a walk-forward runs when a setting is not given, per backend (a CPU finishes in minutes).
DEFAULTS = {"cuda": dict(synthetic_rows=2_000_000, steps_per_fold=25_000, eval_backtests=1024),
            "reference": dict(synthetic_rows=200_000, steps_per_fold=1_500, eval_backtests=64)}


# training settings the walk-forward gives every fold itself: a --config file may not set them
FOLD_SETTINGS = {"data": "--data", "synthetic": "--synthetic", "synthetic_rows": "--synthetic-rows", "seed": "--seed",
                 "fee_per_lot": "--fee", "lots_per_entry": "--lots", "n_steps": "--steps-per-fold"}


def check_args(args, train_args: list[str]) -> None:
    """Refuse a bad setting before any data is loaded or written, naming the flag."""
    from .data.markets import MARKETS
    if args.data == "synthetic":
        if args.synthetic not in MARKETS:
            raise UsageError(f"--synthetic must be one of {', '.join(MARKETS)} (got '{args.synthetic}')")
        windows = args.folds + 1
        if args.synthetic_rows is not None and args.synthetic_rows < windows * MIN_WINDOW_ROWS:
            raise UsageError(f"--synthetic-rows {args.synthetic_rows}: too few for --folds {args.folds} "
                             f"({windows} windows of at least {MIN_WINDOW_ROWS} rows)")
        if args.split == "segments" and args.synthetic_segments < windows:
            raise UsageError(f"--split segments: --synthetic-segments {args.synthetic_segments} cannot make "
                             f"{windows} windows (--folds {args.folds})")
    if args.hold_min > args.hold_max:
        raise UsageError(f"--hold-min {args.hold_min:g} is above --hold-max {args.hold_max:g}")
    try:
        resolve_trainer(args.trainer)
    except (ValueError, TypeError, ImportError, AttributeError) as e:
        raise UsageError(f"--trainer {args.trainer}: {e}") from None
    if args.trainer == "baseline" and train_args:
        raise UsageError(f"unrecognized arguments: {' '.join(train_args)} (--trainer {args.trainer} takes no "
                         "training flags)")
    if args.out is not None:
        output_dir("--out", args.out)
        if args.out.is_dir() and any(args.out.iterdir()) and not args.overwrite:
            raise UsageError(f"--out {args.out}: the directory holds files (give a new directory, or --overwrite)")


# what a walk-forward writes into its directory: --overwrite removes these (and nothing else) first
OUTPUT_FILES = ("report.json", "report.md", "equity.png", "net_pnl.png", "data.npy", "data_validation.json")


def remove_previous_outputs(out: Path):
    """Remove an earlier walk-forward's outputs from `out` (its fold directories and OUTPUT_FILES)."""
    for fold in out.glob("fold-*"):
        if fold.is_dir():
            shutil.rmtree(fold)
    for name in OUTPUT_FILES:
        (out / name).unlink(missing_ok=True)


def main(argv=None) -> int:
    args, train_args = build_parser().parse_known_args(argv)
    return run_cli("foxc.walkforward", lambda: _main(args, train_args), also=(ValueError, scaleout.ScaleoutError))


def _main(args, train_args: list[str]) -> int:
    from .data.markets import MARKETS
    from .data.validate import DataError
    from .driver import select_backend
    check_args(args, train_args)
    backend = select_backend(args.backend).name
    for name, value in DEFAULTS[backend].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    synthetic = args.data == "synthetic"
    fee = args.fee if args.fee is not None else (MARKETS[args.synthetic].fee_per_lot if synthetic else 0.0)
    if args.trainer == "rl":  # a bad training flag or setting fails here, before any fold
        from .trainer.config import TrainConfig, inline_config_file, parse_settings
        train_args = inline_config_file(train_args, FOLD_SETTINGS)  # a fold on another machine has no file
        TrainConfig.for_backend(backend, **{**parse_settings(train_args, "training flags"),
                                            "n_steps": args.steps_per_fold})
    try:
        data = load_data(args.data, args.synthetic_rows, args.seed, args.synthetic_segments, args.synthetic)
    except DataError as e:
        raise UsageError(f"--data {e}") from None
    print(data.report.summary(), flush=True)
    try:
        split_windows(data.records, args.folds + 1, args.split)
    except ValueError as e:
        raise UsageError(f"--folds {args.folds} (--split {args.split}): {e}") from None
    if synthetic and args.trainer == "rl":  # the agent trains on the same market, at the same fee
        train_args = ["--synthetic", args.synthetic, "--fee", repr(fee), *train_args]
    out = args.out or Path("runs") / f"walkforward-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    if args.overwrite and out.is_dir():
        remove_previous_outputs(out)
    eval_config = EvalConfig(n_backtests=args.eval_backtests, fee_per_lot=int(round(fee * PRICE_SCALE)),
                             lots_per_entry=args.lots, greedy=not args.sampled, seed=args.seed,
                             backend=args.backend)
    criteria = Criteria(args.criteria, args.min_opt_frac, args.min_t_stat, args.min_win_rate, args.hold_min,
                        args.hold_max, args.entropy_min, args.entropy_stability)
    report = walk_forward(data, folds=args.folds, steps=args.steps_per_fold, out=out, trainer=args.trainer,
                          train_args=train_args, split=args.split, eval_config=eval_config, criteria=criteria,
                          parallel=args.parallel, workers=args.workers, ray_address=args.ray_address,
                          gpus_per_fold=args.gpus_per_fold, seed=args.seed, plots=not args.no_plots,
                          keep_data=args.keep_data, market=args.synthetic if synthetic else None)
    return 0 if all("error" not in f for f in report["folds"]) else 1


if __name__ == "__main__":
    sys.exit(main())
