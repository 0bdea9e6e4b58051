"""Walk-forward validation: `python -m foxc.walkforward --data … --folds F --steps-per-fold N [training flags]`.

The data (in time order) is cut into F+1 consecutive windows, disjoint and covering every row;
fold i trains on window i and evaluates on window i+1 with learning off (foxc.evaluate). Or, by
dates (`--train-days N --eval-days M [--step-days S]`), fold i trains on the days [i·S, i·S+N)
that hold data and evaluates on the next M (foxc.evaluate.windows). `--data CACHE` (a prepared
cache) is read here as its manifest alone: each fold reads only its own shards. Each
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

import itertools
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from .cli import (UNRECOGNIZED, ArgumentParser, PathArg, UserError, add_run_dir_arguments, backend_name,
                  check_run_dir, default_run_dir, finite_float, glob_hint, int_at_least, nonnegative_float,
                  nonnegative_int, open_run_dir, positive_int, run as run_cli)
from .data.markets import MARKETS, market as named_market
from .data.select import add_instrument_flag
from .data.record import PRICE_SCALE
from .data.market import MarketData, add_tick_flag, tick_units
from .data.validate import DataError
from .driver import BACKENDS
from .evaluate import scaleout
from .evaluate.folds import FoldSpec, describe_window, fold_days, ray_windows, run_fold_safely, windows_of
from .evaluate.optimum import optimal_pnl
from .evaluate.windows import MIN_WINDOW_ROWS, SPLITS, FoldWindows, Segments, day_folds, split_bounds, split_windows
from .evaluate.plots import PlotsUnavailable, walkforward_plots
from .evaluate.reporting import RULES, Criteria, assemble, policy_of, write
from .evaluate.runner import EvalConfig
from .evaluate.trainers import TRAINERS, register, resolve_trainer
from .lobsim.sim import MAX_LOTS_PER_ENTRY
from .trainer.config import (INT64_MAX, MAX_FEE, TrainConfig, check_needs_data, check_synthetic_beside_data,
                             inline_config_file, parse_settings, setting_actions)
from .data.cache import SELECTION, check_selection, is_cache, read_manifest
from .data.source import load
from .trainer.heldout import synthetic_rows

__all__ = ["CachedData", "main", "plan_folds", "split_windows", "walk_forward"]

# The integrated trainer, a floor above foxc.evaluate: named from here, and passed to each fold's worker process
# (FoldSpec.trainers).
register("rl", "foxc.trainer.fold:TRAINER")


@dataclass
class CachedData:
    """A prepared cache as the walk-forward's own process sees it: its manifest, never its shards
    (each fold reads its own)."""
    path: Path
    manifest: dict

    @property
    def tick(self) -> int:
        return int(self.manifest["tick"])

    @property
    def source(self) -> str:  # as open_cache's MarketData names it: the files' formats
        return "+".join(sorted({s["read"]["kind"] for s in self.manifest["shards"]}))

    def describe(self) -> dict:
        shards = self.manifest["shards"]
        return {"source": str(self.path), "cache": True, "sha256": self.manifest["sha256"],
                **({SELECTION: self.manifest[SELECTION]} if SELECTION in self.manifest else {}),
                "files": list(dict.fromkeys(s["sources"][0]["path"] for s in shards)),  # as MarketData's: each once
                "instrument": ",".join(sorted({s["read"]["instrument"] for s in shards} - {""})),
                "rows": int(self.manifest["rows"]), "tick": self.tick}


def load_data(spec: str, rows: int, seed: int, segments: int, market: str = "default", instrument: str | None = None,
              tick: int | None = None):
    """`spec` 'synthetic': `rows` of the named synthetic market; a prepared cache: its manifest
    (CachedData), refused unless prepared with `instrument` (--instrument) and in `tick` (--tick, price units) when
    given; else a file, directory or glob (MarketData), of each file `instrument`'s rows when given, in `tick`."""
    if is_cache(spec):
        manifest = read_manifest(Path(spec))
        check_selection(Path(spec), manifest, instrument, tick)
        return CachedData(Path(spec), manifest)
    if spec == "synthetic":
        return synthetic_rows(rows, "--synthetic-rows", seed=seed, params=named_market(market).params,
                              n_segments=segments)
    return load(spec, tick=tick, instrument=instrument)


def segments_of(data) -> Segments:
    return Segments.of_manifest(data.manifest) if isinstance(data, CachedData) else \
        Segments.of_records(data.records, data.files)


def plan_folds(segs: Segments, *, folds: int | None = None, split: str = "auto", train_days: int | None = None,
               eval_days: int | None = None, step_days: int | None = None,
               cached: bool = False) -> tuple[list[FoldWindows], dict]:
    """Each fold's windows, and what the report says of the cut: F+1 consecutive windows (`folds`),
    or rolling folds by dates (`train_days`, `eval_days`, `step_days`). A cache is cut only where a
    shard begins. Raises ValueError saying why the data cannot be cut so."""
    if train_days is not None:
        days, plan = day_folds(segs, train_days, eval_days, step_days)
        return plan, {"split": "days", "days": {"train": train_days, "eval": eval_days,
                                                "step": step_days or eval_days, "dates": days}}
    if folds is None:
        raise ValueError("give folds (F+1 windows) or train_days and eval_days (by dates)")
    if cached and split == "rows":
        raise ValueError("a cache is cut where its shards begin (--split segments) or by dates (--train-days), "
                         "not at rows")
    bounds, how = split_bounds(segs, folds + 1, "segments" if cached else split)
    return [FoldWindows(bounds[i], bounds[i + 1]) for i in range(folds)], {"split": how}


def walk_forward(data: MarketData | CachedData, *, folds: int | None = None, steps: int, out: Path,
                 trainer: str = "rl", train_args: list[str] | None = None, split: str = "auto",
                 train_days: int | None = None, eval_days: int | None = None, step_days: int | None = None,
                 eval_config: EvalConfig = EvalConfig(), criteria: Criteria = Criteria(), parallel: str = "none",
                 workers: int | None = None, ray_address: str | None = None, gpus_per_fold: float = 1, seed: int = 0,
                 plots: bool = True, keep_data: bool = False, market: str | None = None,
                 instrument: str | None = None, log=print) -> dict:
    """Run every fold and write the report; returns it. `data`: the records (MarketData), or a cache
    (CachedData) whose folds each read their own shards. The folds: `folds` (F+1 windows cut at
    `split`) or `train_days` and `eval_days` (by dates, see plan_folds). `market`: the named synthetic
    market the data was drawn from (its exact optimum is the edge rule's yardstick), None for real data;
    `instrument`: the --instrument the files were read with (the report records it)."""
    out = Path(out)
    named = resolve_trainer(trainer)  # fail before any work when the trainer does not resolve
    cached = isinstance(data, CachedData)
    segs = segments_of(data)
    plan, cut = plan_folds(segs, folds=folds, split=split, train_days=train_days, eval_days=eval_days,
                           step_days=step_days, cached=cached)
    out.mkdir(parents=True, exist_ok=True)
    config = {"train_args": list(train_args or []), "backend": eval_config.backend, "seed": seed}
    # an absolute path: a worker may run in another directory (Ray)
    cache = {"cache": str(data.path.absolute()), "cache_sha256": data.manifest["sha256"]} if cached else {}
    # worker processes read the records from a file (a cache's, its shards)
    data_npy = out / "data.npy" if parallel == "local" and not cached else None
    specs = [FoldSpec(fold=i, **asdict(w), steps=steps, out_dir=str(out / f"fold-{i}"), trainer=trainer, config=config,
                      trainers=dict(TRAINERS), eval_config=asdict(eval_config), tick=int(data.tick), source=data.source,
                      data_npy=str(data_npy or ""), **cache) for i, w in enumerate(plan)]
    describe = segs.describe if cached else lambda a, b: describe_window(data.records[a:b], a, b)
    if train_days is not None:
        cut["day_folds"] = [{"fold": i, **fold_days(w), "train": describe(*w.train), "eval": describe(*w.eval)}
                            for i, w in enumerate(plan)]
        log(f"walk-forward: {named.name}; {segs.rows} rows on {len(cut['days']['dates'])} days "
            f"({cut['days']['dates'][0]} .. {cut['days']['dates'][-1]}), {len(plan)} folds of {train_days} training "
            f"and {eval_days} evaluation day(s) every {step_days or eval_days}, {steps} steps each, runner {parallel}")
    else:
        cut["windows"] = [describe(*w.train) for w in plan] + [describe(*plan[-1].eval)]
        log(f"walk-forward: {named.name}; {segs.rows} rows in {len(plan) + 1} windows (split at {cut['split']}), "
            f"{len(plan)} folds of {steps} steps, runner {parallel}")
    t0 = time.perf_counter()
    if data_npy is not None:
        np.save(data_npy, data.records)
    try:
        # with Ray, a cache's folds read their shards where they run: every node needs it at the same path
        results = scaleout.run_jobs(specs, parallel, here=run_fold_safely if cached else
                                    lambda s: run_fold_safely(s, *windows_of(s, data.records)),
                                    remote=run_fold_safely, backend=eval_config.backend, noun="fold", workers=workers,
                                    ray_address=ray_address, gpus=gpus_per_fold,
                                    inputs=None if cached else ray_windows(data.records), log=log)
    finally:
        if data_npy is not None and not keep_data:
            data_npy.unlink(missing_ok=True)
    optimum = None
    if market is not None:
        params = named_market(market).params
        optimum = optimal_pnl(params, eval_config.fee_per_lot / PRICE_SCALE / params.tick).pnl_per_snapshot
    described = data.describe() if cached else {"source": data.source, "files": data.files,
                                                "instrument": data.instrument, "rows": int(len(data.records)),
                                                "tick": int(data.tick),
                                                **({"instrument_selection": instrument} if instrument else {})}
    run = {"trainer": named.name, "trainer_spec": trainer, "train_args": config["train_args"],
           "data": {**described, "market": market}, "optimum": optimum, **cut,
           "steps_per_fold": steps, "parallel": parallel, "eval_config": asdict(eval_config),
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
            yard = f.get("yardstick")
            yard_net = None if yard is None or yard.get("net_pnl") is None else f"{yard['net_pnl'] / PRICE_SCALE:.4f}"
            beside = "" if yard is None else (f"; flat 0, yardstick {yard_net or 'n/a'} "
                                              f"(t {t_text(yard.get('trade_t_stat'))})")
            log(f"fold {f['fold']}: policy {policy_of(f)}: {m['trades']} trades, win rate {wr}, net PnL "
                f"{m['net_pnl'] / PRICE_SCALE:.4f} (t {t_text(m['trade_t_stat'])}; {m['pnl_ticks']:+.5f} ticks per "
                "snapshot" + (f", {frac:.2f} of the optimum" if frac is not None else "") + f"){beside}, in the market "
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


def t_text(t) -> str:
    return "n/a" if t is None else f"{t:.2f}"


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m foxc.walkforward", allow_abbrev=False, description=__doc__.split("\n")[0],
                        epilog="Flags not listed here are passed to the trainer.")
    ap.add_argument("--data", default="synthetic", type=PathArg("a file, directory, glob or cache, or 'synthetic'"),
                    help="a file, directory or glob of market data, a prepared cache, or 'synthetic'")
    add_instrument_flag(ap.add_argument)
    add_tick_flag(ap.add_argument)
    ap.add_argument("--synthetic", default=None, metavar="MARKET",  # None: not given (refused beside real data)
                    help="the named synthetic market of --data synthetic: easy, default (the default), null, noisy")
    ap.add_argument("--synthetic-rows", type=positive_int, default=None,
                    help="rows of synthetic data (default 2,000,000 with CUDA, 200,000 on the reference backend)")
    ap.add_argument("--synthetic-segments", type=positive_int, default=None,
                    help="segments of the synthetic data (default 1)")
    ap.add_argument("--folds", type=positive_int, default=None, help="F+1 consecutive windows (default 3)")
    ap.add_argument("--train-days", type=positive_int, default=None, help="folds by dates: days each fold trains on")
    ap.add_argument("--eval-days", type=positive_int, default=None, help="folds by dates: days each fold evaluates on")
    ap.add_argument("--step-days", type=positive_int, default=None,
                    help="folds by dates: days from one fold's start to the next (default --eval-days)")
    ap.add_argument("--steps-per-fold", type=int_at_least(1, INT64_MAX), default=None,
                    help="training steps per fold (default 25,000 with CUDA, 1,500 on the reference backend)")
    add_run_dir_arguments(ap, "walkforward")
    ap.add_argument("--trainer", default="rl",
                    help="rl (the integrated trainer, default), baseline (a logistic imbalance yardstick, "
                         "not the RL agent) or package.module:attribute")
    ap.add_argument("--split", choices=SPLITS, default=None, help="where --folds may cut (default auto)")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    ap.add_argument("--backend", choices=BACKENDS, default=None)
    scaleout.add_runner_arguments(ap, "fold")
    ev = ap.add_argument_group("evaluation")
    ev.add_argument("--eval-backtests", type=positive_int, default=None,
                    help="chunks of the window evaluated side by side (default 1,024 with CUDA, 64 on the reference)")
    ev.add_argument("--fee", type=nonnegative_float, default=None,
                    help="fee per lot per side, in price units (e.g. 0.005; default: the synthetic market's own, "
                         "else 0)")
    ev.add_argument("--lots", type=int_at_least(1, MAX_LOTS_PER_ENTRY), default=1, help="lots per entry")
    ev.add_argument("--sampled", action="store_true", help="sample actions from the policy (default: greedy)")
    cr = ap.add_argument_group("success criteria")
    cr.add_argument("--criteria", dest="rule", choices=RULES, default="edge",
                    help="which rule decides: edge (default: a fraction of the optimum on synthetic markets; net PnL, "
                         "the yardstick and a pooled t-statistic on real data) or seed (the Rust team's rule); "
                         "both are reported")
    for bar in fields(Criteria)[1:]:  # --min-opt-frac, --hold-min, ...: a flag per bar, of its name
        cr.add_argument(f"--{bar.name.replace('_', '-')}", type=finite_float, default=bar.default)
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--keep-data", action="store_true", help="local: keep OUT/data.npy the workers read")
    return ap


# What a walk-forward runs when a setting is not given, per backend (a CPU finishes in minutes).
DEFAULTS = {"cuda": dict(synthetic_rows=2_000_000, steps_per_fold=25_000, eval_backtests=1024),
            "reference": dict(synthetic_rows=200_000, steps_per_fold=1_500, eval_backtests=64)}


# training settings the walk-forward gives every fold itself: a --config file may not set them
FOLD_SETTINGS = {"data": "--data", "instrument": "--instrument", "tick": "--tick", "synthetic": "--synthetic",
                 "synthetic_rows": "--synthetic-rows", "seed": "--seed", "fee_per_lot": "--fee",
                 "lots_per_entry": "--lots", "n_steps": "--steps-per-fold"}


def check_args(args, train_args: list[str]) -> None:
    """Refuse a bad setting before any data is loaded or written, naming the flag; sets the defaults
    of --folds and --split when the folds are not by dates."""
    real = None if args.data == "synthetic" else args.data
    check_synthetic_beside_data({**vars(args), "data": real})
    check_needs_data({"instrument": args.instrument, "tick": args.tick, "data": real})
    args.synthetic, args.synthetic_segments = args.synthetic or "default", args.synthetic_segments or 1
    by_days = [f"--{n.replace('_', '-')}" for n in ("train_days", "eval_days", "step_days")
               if getattr(args, n) is not None]
    if by_days:
        for flag, value in (("--folds", args.folds), ("--split", args.split)):
            if value is not None:
                raise UserError(f"{flag} and {by_days[0]} are two ways to cut the data: give --folds (and --split) "
                                 "or --train-days and --eval-days (and --step-days)")
        if args.train_days is None or args.eval_days is None:
            raise UserError(f"{by_days[0]}: folds by dates need both --train-days and --eval-days")
    else:
        args.folds = 3 if args.folds is None else args.folds
        args.split = args.split or "auto"
    if args.data == "synthetic" and not by_days:
        if args.synthetic not in MARKETS:
            raise UserError(f"--synthetic must be one of {', '.join(MARKETS)} (got '{args.synthetic}')")
        windows = args.folds + 1
        if args.synthetic_rows is not None and args.synthetic_rows < windows * MIN_WINDOW_ROWS:
            raise UserError(f"--synthetic-rows {args.synthetic_rows}: too few for --folds {args.folds} "
                             f"({windows} windows of at least {MIN_WINDOW_ROWS} rows)")
        if args.split == "segments" and args.synthetic_segments < windows:
            raise UserError(f"--split segments: --synthetic-segments {args.synthetic_segments} cannot make "
                             f"{windows} windows (--folds {args.folds})")
    if args.fee is not None and args.fee > MAX_FEE:  # the simulator's money (x1e9) is an int64
        raise UserError(f"--fee must be 0 to {MAX_FEE:,.0f}, the simulator's largest price (got {args.fee:g})")
    scaleout.check_runner_arguments(args, "fold")
    if args.hold_min > args.hold_max:
        raise UserError(f"--hold-min {args.hold_min:g} is above --hold-max {args.hold_max:g}")
    try:
        resolve_trainer(args.trainer)
    except (ValueError, TypeError, ImportError, AttributeError) as e:
        raise UserError(f"--trainer {args.trainer}: {e}") from None
    strays = list(itertools.takewhile(lambda a: not a.startswith("-"), train_args))  # no flag takes them
    if glob_hint(strays):
        raise UserError(f"{UNRECOGNIZED}{' '.join(strays)}{glob_hint(strays)}")
    if args.trainer == "baseline" and train_args:
        raise UserError(f"unrecognized arguments: {' '.join(train_args)} (--trainer {args.trainer} takes no "
                         "training flags)")
    check_run_dir(args.out, args.overwrite)


# what a walk-forward writes into its directory: --overwrite removes these (and nothing else) first
OUTPUTS = ("fold-*", "report.json", "report.md", "equity.png", "net_pnl.png", "data.npy", "data_validation.json")


def main(argv=None) -> int:
    args, train_args = build_parser().parse_known_args(argv)
    return run_cli("foxc.walkforward", lambda: _main(args, train_args))


def _main(args, train_args: list[str]) -> int:
    check_args(args, train_args)
    backend = backend_name(args.backend)
    for name, value in DEFAULTS[backend].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    synthetic = args.data == "synthetic"
    fee = args.fee if args.fee is not None else (MARKETS[args.synthetic].fee_per_lot if synthetic else 0.0)
    if args.trainer == "rl":  # a bad training flag or setting fails here, before any fold
        train_args = inline_config_file(train_args, FOLD_SETTINGS)  # a fold on another machine has no file
        given = parse_settings(train_args, "training flags")
        for name in FOLD_SETTINGS.keys() & given.keys():  # the fold would set it over the flag without a word
            raise UserError(f"{setting_actions()[name].option_strings[0]}: set by the walk-forward for every fold "
                             f"(give {FOLD_SETTINGS[name]})")
        TrainConfig.for_backend(backend, **{**given, "n_steps": args.steps_per_fold})
    try:
        data = load_data(args.data, args.synthetic_rows, args.seed, args.synthetic_segments, args.synthetic,
                         args.instrument, tick_units(args.tick))
    except DataError as e:
        raise UserError(f"--data {e}") from None
    cached = isinstance(data, CachedData)
    if cached:
        if args.keep_data:
            raise UserError(f"--keep-data: the folds of a cache read its shards ({args.data}); there is no data.npy "
                             "to keep")
        print(f"cache {args.data}: {len(data.manifest['shards'])} shard(s), {int(data.manifest['rows']):,} rows, "
              f"prepared from {data.manifest['data']}", flush=True)
    else:
        print(data.report.summary(), flush=True)
    try:
        plan_folds(segments_of(data), folds=args.folds, split=args.split, train_days=args.train_days,
                   eval_days=args.eval_days, step_days=args.step_days, cached=cached)
    except ValueError as e:  # named by the flags that cut the data, as given
        flags = (f"--folds {args.folds} (--split {args.split})" if args.train_days is None else
                 f"--train-days {args.train_days} --eval-days {args.eval_days}"
                 + (f" --step-days {args.step_days}" if args.step_days is not None else ""))
        raise UserError(f"--data {args.data}: {flags}: {e}") from None
    if synthetic and args.trainer == "rl":  # the agent trains on the same market, at the same fee
        train_args = ["--synthetic", args.synthetic, "--fee", repr(fee), *train_args]
    out = open_run_dir(args.out or default_run_dir("walkforward"), args.overwrite, OUTPUTS)
    eval_config = EvalConfig(n_backtests=args.eval_backtests, fee_per_lot=int(round(fee * PRICE_SCALE)),
                             lots_per_entry=args.lots, greedy=not args.sampled, seed=args.seed,
                             backend=args.backend)
    criteria = Criteria(**{f.name: getattr(args, f.name) for f in fields(Criteria)})
    report = walk_forward(data, folds=args.folds, steps=args.steps_per_fold, out=out, trainer=args.trainer,
                          train_args=train_args, split=args.split, train_days=args.train_days,
                          eval_days=args.eval_days, step_days=args.step_days, eval_config=eval_config,
                          criteria=criteria, parallel=args.parallel, workers=args.workers, ray_address=args.ray_address,
                          gpus_per_fold=args.gpus_per_fold, seed=args.seed, plots=not args.no_plots,
                          keep_data=args.keep_data, market=args.synthetic if synthetic else None,
                          instrument=args.instrument)
    refused = [f for f in report["folds"] if f.get("data_error")]
    if refused:  # the data, not the code: a user's error, as when the whole data is refused up front
        raise UserError(f"--data {args.data}: fold {refused[0]['fold']}: {refused[0]['data_error']} (the report of "
                         f"every fold is in {out})")
    return 0 if all("error" not in f for f in report["folds"]) else 1


if __name__ == "__main__":
    sys.exit(main())
