"""`python -m foxc.walkforward`: every fold run (foxc.jobs), judged and reported (foxc.walkforward.report)."""
from __future__ import annotations

import itertools
import time
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np

from .. import jobs
from ..cli import (UNRECOGNIZED, ArgumentParser, PathArg, UserError, add_run_dir_arguments, backend_name,
                   check_run_dir, default_run_dir, finite_float, glob_hint, int_at_least, nonnegative_float,
                   nonnegative_int, open_run_dir, positive_int, run as run_cli)
from ..data.market import MarketData, add_tick_flag, tick_units
from ..data.markets import MARKETS, market as named_market
from ..data.record import PRICE_SCALE
from ..data.select import add_instrument_flag
from ..data.validate import DataError
from ..driver import BACKENDS
from ..evaluate.optimum import market_optimum, optimal_pnl
from ..evaluate.runner import EvalConfig
from ..lobsim.sim import MAX_LOTS_PER_ENTRY
from ..plots import PlotsUnavailable
from ..trainer.config import (INT64_MAX, MAX_FEE, TrainConfig, check_needs_data, check_synthetic_beside_data,
                              inline_config_file, parse_settings, setting_actions)
from .folds import FoldSpec, describe_window, fold_days, ray_windows, resolve_trainer, run_fold_safely, windows_of
from .report import RULES, Criteria, assemble, compare_orders, policy_of, walkforward_plots, write
from .windows import MIN_WINDOW_ROWS, SPLITS, CachedData, CutError, Segments, load_data, plan_folds

# What a walk-forward runs when a setting is not given, per backend (a CPU finishes in minutes).
DEFAULTS = {"cuda": dict(synthetic_rows=2_000_000, steps_per_fold=25_000, eval_backtests=1024),
            "reference": dict(synthetic_rows=200_000, steps_per_fold=1_500, eval_backtests=64)}
# training settings the walk-forward gives every fold itself: a --config file may not set them
FOLD_SETTINGS = {"data": "--data", "instrument": "--instrument", "tick": "--tick", "synthetic": "--synthetic",
                 "synthetic_rows": "--synthetic-rows", "seed": "--seed", "fee_per_lot": "--fee",
                 "lots_per_entry": "--lots", "n_steps": "--steps-per-fold"}
# what a walk-forward writes into its directory: --overwrite removes these (and nothing else) first
OUTPUTS = ("fold-*", "report.json", "report.md", "equity.png", "net_pnl.png", "data.npy", "data_validation.json",
           "market", "passive", "orders.json", "orders.md")
ORDERS = ("market", "passive")  # --compare-orders: a walk-forward of each, in OUT/market and OUT/passive


def walk_forward(data: MarketData | CachedData, *, folds: int | None = None, steps: int, out: Path,
                 trainer: str = "rl", train_args: list[str] | None = None, split: str = "auto",
                 train_days: int | None = None, eval_days: int | None = None, step_days: int | None = None,
                 eval_config: EvalConfig = EvalConfig(), criteria: Criteria = Criteria(), parallel: str = "none",
                 workers: int | None = None, ray_address: str | None = None, gpus_per_fold: float = 1, seed: int = 0,
                 plots: bool = True, keep_data: bool = False, market: str | None = None,
                 instrument: str | None = None, orders: str = "market", log=print) -> dict:
    """Run every fold and write the report; returns it. `data`: the records, or a cache whose folds each read their
    own shards; the folds: `folds` (F+1 windows cut at `split`) or `train_days` and `eval_days` (plan_folds);
    `market`: the named synthetic market of the data (its exact optimum is the edge rule's yardstick), None for real
    data; `instrument`: the --instrument the files were read with; `orders`: the agent's (--orders in the training
    flags), whose optimum the edge rule takes."""
    out = Path(out)
    named = resolve_trainer(trainer)  # fail before any work when the trainer does not resolve
    cached = isinstance(data, CachedData)
    segs = Segments.of(data)
    plan, cut = plan_folds(segs, folds=folds, split=split, train_days=train_days, eval_days=eval_days,
                           step_days=step_days, cached=cached)
    out.mkdir(parents=True, exist_ok=True)
    config = {"train_args": list(train_args or []), "backend": eval_config.backend, "seed": seed}
    # an absolute path: a worker may run in another directory (Ray)
    cache = {"cache": str(data.path.absolute()), "cache_sha256": data.manifest["sha256"]} if cached else {}
    data_npy = out / "data.npy" if parallel == "local" and not cached else None  # what worker processes read
    specs = [FoldSpec(fold=i, **asdict(w), steps=steps, out_dir=str(out / f"fold-{i}"), trainer=trainer, config=config,
                      eval_config=asdict(eval_config), tick=int(data.tick), source=data.source,
                      data_npy=str(data_npy or ""), **cache) for i, w in enumerate(plan)]
    describe = segs.describe if cached else lambda a, b: describe_window(data.records[a:b], a, b)
    if train_days is not None:
        dates = cut["days"]["dates"]
        cut["day_folds"] = [{"fold": i, **fold_days(w), "train": describe(*w.train), "eval": describe(*w.eval)}
                            for i, w in enumerate(plan)]
        log(f"walk-forward: {named.name}; {segs.rows} rows on {len(dates)} days ({dates[0]} .. {dates[-1]}), "
            f"{len(plan)} folds of {train_days} training and {eval_days} evaluation day(s) every "
            f"{step_days or eval_days}, {steps} steps each, runner {parallel}")
    else:
        cut["windows"] = [describe(*w.train) for w in plan] + [describe(*plan[-1].eval)]
        log(f"walk-forward: {named.name}; {segs.rows} rows in {len(plan) + 1} windows (split at {cut['split']}), "
            f"{len(plan)} folds of {steps} steps, runner {parallel}")
    t0 = time.perf_counter()
    if data_npy is not None:
        np.save(data_npy, data.records)
    try:
        # with Ray, a cache's folds read their shards where they run: every node needs it at the same path
        results = jobs.run_jobs(specs, parallel, here=run_fold_safely if cached else
                                lambda s: run_fold_safely(s, *windows_of(s, data.records)),
                                remote=run_fold_safely, backend=eval_config.backend, noun="fold", workers=workers,
                                ray_address=ray_address, gpus=gpus_per_fold,
                                inputs=None if cached else ray_windows(data.records), log=log)
    finally:
        if data_npy is not None and not keep_data:
            data_npy.unlink(missing_ok=True)
    optimum = None
    if market is not None:
        named_one = named_market(market)
        optimum = (market_optimum(named_one, fee_per_lot=eval_config.fee_per_lot / PRICE_SCALE, orders=orders)
                   if orders == "passive" else
                   optimal_pnl(named_one.params, eval_config.fee_per_lot / PRICE_SCALE / named_one.params.tick)
                   .pnl_per_snapshot)
    described = data.describe() if cached else {"source": data.source, "files": data.files,
                                                "instrument": data.instrument, "rows": int(len(data.records)),
                                                "tick": int(data.tick),
                                                **({"instrument_selection": instrument} if instrument else {})}
    report = assemble(results, criteria, {
        "trainer": named.name, "trainer_spec": trainer, "train_args": config["train_args"], "orders": orders,
        "data": {**described, "market": market}, "optimum": optimum, **cut, "steps_per_fold": steps,
        "parallel": parallel, "eval_config": asdict(eval_config), "seconds": time.perf_counter() - t0})
    if plots:
        try:
            report["plots"] = [str(p) for p in walkforward_plots(report, out)]
        except PlotsUnavailable as e:
            log(str(e))
    json_path, md_path = write(report, out)
    for f in report["folds"]:
        log(f"fold {f['fold']}: FAILED\n{f['error']}" if "error" in f else fold_line(f))
    pooled = report["run_criteria"].get("pooled_t_stat")
    if pooled:
        log(f"pooled per-trade t-statistic {t_text(pooled['value'])} over {pooled['trades']} trades: "
            f"{'an edge' if pooled['pass'] else 'no edge shown'} (needs > {criteria.min_t_stat})")
    log(f"{'all folds pass' if report['all_passed'] else 'not every fold passes'} ({criteria.rule} rule); "
        f"wrote {json_path}, {md_path}")
    return report


def fold_line(f: dict) -> str:
    """A finished fold's figures and verdicts in one line."""
    m, yard = f["metrics"], f.get("yardstick")
    wr = "n/a" if m["win_rate"] is None else f"{m['win_rate']:.3f}"
    frac = f["criteria"]["edge"].get("opt_frac", {}).get("value")
    yard_net = None if yard is None or yard.get("net_pnl") is None else f"{yard['net_pnl'] / PRICE_SCALE:.4f}"
    beside = "" if yard is None else f"; flat 0, yardstick {yard_net or 'n/a'} (t {t_text(yard.get('trade_t_stat'))})"
    return (f"fold {f['fold']}: policy {policy_of(f)}: {m['trades']} trades, win rate {wr}, net PnL "
            f"{m['net_pnl'] / PRICE_SCALE:.4f} (t {t_text(m['trade_t_stat'])}; {m['pnl_ticks']:+.5f} ticks per "
            "snapshot" + (f", {frac:.2f} of the optimum" if frac is not None else "") + f"){beside}, in the market "
            f"{m['exposure']:.2f}: edge rule {'pass' if f['passed_by']['edge'] else 'fail'}, seed rule "
            f"{'pass' if f['passed_by']['seed'] else 'fail'}")


def t_text(t) -> str:
    return "n/a" if t is None else f"{t:.2f}"


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m foxc.walkforward", allow_abbrev=False,
                        description="Walk-forward validation: train on each window, evaluate on the next.",
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
    jobs.add_runner_arguments(ap, "fold")
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
    ap.add_argument("--compare-orders", action="store_true",
                    help="rl: walk the folds twice, the agent with market orders only (OUT/market) and with resting "
                         "orders (--orders passive, OUT/passive), and write both side by side with flat and the "
                         "yardstick (OUT/orders.md)")
    return ap


def check_args(args, train_args: list[str]) -> None:
    """Refuse a bad setting before any data is loaded or written; sets --folds' and --split's defaults."""
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
        args.folds, args.split = args.folds or 3, args.split or "auto"
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
    jobs.check_runner_arguments(args, "fold")
    if args.hold_min > args.hold_max:
        raise UserError(f"--hold-min {args.hold_min:g} is above --hold-max {args.hold_max:g}")
    resolve_trainer(args.trainer)
    strays = list(itertools.takewhile(lambda a: not a.startswith("-"), train_args))  # no flag takes them
    if glob_hint(strays):
        raise UserError(f"{UNRECOGNIZED}{' '.join(strays)}{glob_hint(strays)}")
    if args.compare_orders and args.trainer != "rl":
        raise UserError(f"--compare-orders: compares the rl agent's orders, not --trainer {args.trainer}'s")
    if args.trainer == "baseline" and train_args:
        raise UserError(f"unrecognized arguments: {' '.join(train_args)} (--trainer {args.trainer} takes no "
                        "training flags)")
    check_run_dir(args.out, args.overwrite)


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
    orders = "market"  # the agent's, for the edge rule's optimum
    if args.trainer == "rl":  # a bad training flag or setting fails here, before any fold
        train_args = inline_config_file(train_args, FOLD_SETTINGS)  # a fold on another machine has no file
        given = parse_settings(train_args, "training flags")
        for name in FOLD_SETTINGS.keys() & given.keys():  # the fold would set it over the flag without a word
            raise UserError(f"{setting_actions()[name].option_strings[0]}: set by the walk-forward for every fold "
                            f"(give {FOLD_SETTINGS[name]})")
        if args.compare_orders and "orders" in given:
            raise UserError(f"--orders {given['orders']}: --compare-orders runs both (give one of them)")
        orders = given.get("orders", orders)
        TrainConfig.for_backend(backend, **{**given, "n_steps": args.steps_per_fold})
    try:
        data = load_data(args.data, args.synthetic_rows, args.seed, args.synthetic_segments, args.synthetic,
                         args.instrument, tick_units(args.tick))
    except DataError as e:
        raise UserError(f"--data {e}") from None
    cached = isinstance(data, CachedData)
    if cached and args.keep_data:
        raise UserError(f"--keep-data: the folds of a cache read its shards ({args.data}); there is no data.npy to keep")
    print(f"cache {args.data}: {len(data.manifest['shards'])} shard(s), {int(data.manifest['rows']):,} rows, "
          f"prepared from {data.manifest['data']}" if cached else data.report.summary(), flush=True)
    try:
        plan_folds(Segments.of(data), folds=args.folds, split=args.split, train_days=args.train_days,
                   eval_days=args.eval_days, step_days=args.step_days, cached=cached)
    except CutError as e:  # named by the flags that cut the data, as given
        flags = (f"--folds {args.folds} (--split {args.split})" if args.train_days is None else
                 f"--train-days {args.train_days} --eval-days {args.eval_days}"
                 + (f" --step-days {args.step_days}" if args.step_days is not None else ""))
        raise UserError(f"--data {args.data}: {flags}: {e}") from None
    if synthetic and args.trainer == "rl":  # the agent trains on the same market, at the same fee
        train_args = ["--synthetic", args.synthetic, "--fee", repr(fee), *train_args]
    out = open_run_dir(args.out or default_run_dir("walkforward"), args.overwrite, OUTPUTS)
    eval_config = EvalConfig(n_backtests=args.eval_backtests, fee_per_lot=int(round(fee * PRICE_SCALE)),
                             lots_per_entry=args.lots, greedy=not args.sampled, seed=args.seed, backend=args.backend)
    def walk(run_out: Path, run_args: list[str], orders: str) -> dict:
        return walk_forward(data, folds=args.folds, steps=args.steps_per_fold, out=run_out, trainer=args.trainer,
                            train_args=run_args, split=args.split, train_days=args.train_days,
                            eval_days=args.eval_days, step_days=args.step_days, eval_config=eval_config,
                            criteria=Criteria(**{f.name: getattr(args, f.name) for f in fields(Criteria)}),
                            parallel=args.parallel, workers=args.workers, ray_address=args.ray_address,
                            gpus_per_fold=args.gpus_per_fold, seed=args.seed, plots=not args.no_plots,
                            keep_data=args.keep_data, market=args.synthetic if synthetic else None,
                            instrument=args.instrument, orders=orders)
    if args.compare_orders:
        reports = {orders: walk(out / orders, [*train_args, "--orders", orders], orders) for orders in ORDERS}
        comparison = compare_orders(reports, out)
        print(f"orders compared: {comparison['verdict']}; wrote {out / 'orders.md'}")
        report = {"folds": [f for r in reports.values() for f in r["folds"]]}
    else:
        report = walk(out, train_args, orders)
    refused = [f for f in report["folds"] if f.get("data_error")]
    if refused:  # the data, not the code: a user's error, as when the whole data is refused up front
        raise UserError(f"--data {args.data}: fold {refused[0]['fold']}: {refused[0]['data_error']} (the report of "
                        f"every fold is in {out})")
    return 0 if all("error" not in f for f in report["folds"]) else 1
