"""`python -m foxc.sweep`: train and evaluate every point of a grid of settings (or random draws), several seeds
each, and rank the points by their held-out result.

    python -m foxc.sweep --grid lr_q=1e-4,3e-4 --grid gamma=0.99,0.995 --seeds 3 [training flags]
    python -m foxc.sweep --random 8 --range lr_q=1e-5:1e-3:log --range tau=0.001:0.02 --seeds 2

Every configuration is built (and so checked) before anything runs; a run that fails is a failed row, and the
sweep goes on. Runs go as `--parallel` says (foxc.jobs).
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .. import jobs
from ..cli import (ArgumentParser, UserError, add_run_dir_arguments, backend_name, check_run_dir, default_run_dir,
                   int_at_least, nonnegative_int, open_run_dir, positive_int, run as run_cli)
from ..driver import BACKENDS, open_runtime
from ..trainer.config import (DEFAULTS, INT64_MAX, ConfigError, ConfigFile, TrainConfig, add_config_arguments,
                              check_needs_data, check_synthetic_beside_data, config_settings)
from .axes import Axis, parse_axes, points as sweep_points, settings_of, show
from .point import RunSpec, run_point_safely
from .report import TARGETS, error_line, rank, ranking_table, sweep_plot, target_of, write_report, write_tables
from ..plots import PlotsUnavailable
from ..train import describe_evaluation, load_data_logged

PROG = "foxc.sweep"
# settings the sweep gives every run itself (setting -> its flag here): training flags and a --config
# file may not set them
OWNED = {"seed": "--seeds", "n_steps": "--steps"}
POINTS_DIR = "points"
MAX_RUNS = 100_000  # runs of one sweep: each a run directory and a checkpoint; planning them takes seconds
# what a sweep writes into its directory: --overwrite removes these (and nothing else) first
OUTPUTS = (POINTS_DIR, "sweep.csv", "sweep.parquet", "sweep.json", "report.md", "sweep.png")


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m foxc.sweep", allow_abbrev=False,
                        description="Train and evaluate every point of a hyperparameter grid (or of random draws), "
                                    "several seeds each, and rank the points by their held-out result.")
    sw = ap.add_argument_group("sweep")
    sw.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                    help="an axis: a training setting (n_backtests, actor, ...) or an ISV slot (lr_q, gamma, ...; "
                         "isv.NAME for the slot of a setting's name) and its values; repeatable: every combination")
    sw.add_argument("--random", type=positive_int, metavar="N", help="N points drawn from the --range axes")
    sw.add_argument("--range", dest="ranges", action="append", default=[], metavar="NAME=LO:HI[:log]",
                    help="an axis drawn uniformly (log-uniformly with :log) for --random; repeatable")
    sw.add_argument("--sweep-seed", type=nonnegative_int, default=0, metavar="SEED",
                    help="seed of the --random draws (default 0)")
    sw.add_argument("--seeds", type=positive_int, default=3, metavar="S",
                    help="runs per point, with seeds 0..S-1 (default 3)")
    sw.add_argument("--steps", type=int_at_least(1, INT64_MAX), default=None, metavar="N",
                    help="training steps of each run (default 5,000 with CUDA, 150 on the reference backend)")
    sw.add_argument("--backend", choices=BACKENDS, default=None)
    jobs.add_runner_arguments(sw, "run")
    add_run_dir_arguments(sw, "sweep")
    sw.add_argument("--no-plots", action="store_true", help="skip sweep.png")
    add_config_arguments(ap.add_argument_group(
        "training flags", "as python -m foxc.train takes them, for every run (an axis sets its own setting); "
                          "--seed and --n-steps are the sweep's (--seeds, --steps); --eval-every defaults to the "
                          "run's length (one evaluation, at its end) and --checkpoint-every to 0 (the final one)"))
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(PROG, lambda: sweep(args))


@dataclass
class Plan:
    """A sweep, every setting checked and every run's configuration built; nothing written yet."""
    axes: list[Axis]
    specs: list[RunSpec]
    given: dict           # the training flags' settings (over a --config file's)
    backend: str
    steps: int
    out: Path

    @property
    def first(self) -> TrainConfig:
        return self.specs[0].train_config()

    def describe_runs(self, seeds: int) -> str:
        steps = ("as many steps as the n_steps axis says" if any(a.target.setting == "n_steps" for a in self.axes)
                 else f"{self.steps} steps")
        return f"{len(self.specs) // seeds} points × {seeds} seeds = {len(self.specs)} runs of {steps}"


def sweep(args) -> int:
    plan = plan_sweep(args)
    open_run_dir(plan.out, args.overwrite, OUTPUTS)
    print(f"sweep: {plan.describe_runs(args.seeds)}; backend {plan.backend}, runner {args.parallel}; {plan.out}",
          flush=True)
    t0 = time.perf_counter()
    rows = run_all(plan.specs, args, plan.backend)
    meta = {"axis_names": [a.name for a in plan.axes], "axes": [a.describe() for a in plan.axes],
            "random": f"{args.random} random draws, --sweep-seed {args.sweep_seed}" if args.random else None,
            "target": target_of(rows, plan.first.data is None), "runs": plan.describe_runs(args.seeds),
            "seeds": args.seeds, "backend": plan.backend, "parallel": args.parallel, "data": describe_data(plan.first),
            "settings": describe_settings(plan.given), "seconds": time.perf_counter() - t0}
    write_outputs(meta, rows, plan.out, plots=not args.no_plots)
    failed = sum(r["status"] != "ok" for r in rows)
    print(f"{len(rows) - failed} runs finished, {failed} failed; wrote {plan.out / 'report.md'}, sweep.csv, "
          "sweep.parquet", flush=True)
    return 1 if failed else 0


def plan_sweep(args) -> Plan:
    """Every flag, axis and run checked, in that order; a mistake is a UserError naming it."""
    given, config_file = training_settings(args)
    check_run_dir(args.out, args.overwrite)
    jobs.check_runner_arguments(args, "run")
    if args.parallel == "ray":
        jobs.require_ray()
    backend = backend_name(args.backend)
    axes = parse_axes(args.grid, args.ranges, args.random)
    check_size(axes, args.random, args.seeds)
    steps = args.steps or DEFAULTS[backend]["n_steps"]
    out = args.out or default_run_dir("sweep")
    base = {**given, "n_steps": steps}
    try:  # the training flags by themselves: an error names the flag, or the --config file that set it
        TrainConfig.for_backend(backend, **run_defaults(base))
    except ConfigError as e:
        raise config_file.blame(e, config_settings(args)) if config_file else e
    specs = run_specs(sweep_points(axes, args.random, args.sweep_seed), axes, base, backend, args.seeds, out)
    plan = Plan(axes, specs, given, backend, steps, out)
    if plan.first.data:  # read once here: a file that cannot be read, or too few rows to hold out, fails before any run
        load_data_logged(plan.first, lambda msg: print(msg, flush=True),
                         config_file.sources(config_settings(args)).get("data") if config_file else None)
    return plan


def check_size(axes: list[Axis], draws: int | None, seeds: int) -> None:
    """A sweep of more than MAX_RUNS runs (a few zeros too many) is refused before its points are drawn."""
    grid = math.prod(len(a.values) for a in axes if a.values)
    n_points = grid * (draws if any(a.bounds for a in axes) else 1)
    if n_points * seeds > MAX_RUNS:
        made = (f"{grid:,} grid point(s) × --random {draws:,}" if any(a.bounds for a in axes) else
                f"{n_points:,} point(s) of --grid")
        raise UserError(f"{made} × --seeds {seeds:,} = {n_points * seeds:,} runs, more than a sweep takes "
                         f"({MAX_RUNS:,}): fewer values, draws or seeds")


def training_settings(args) -> tuple[dict, ConfigFile | None]:
    """The training flags' settings over the --config file's, and the file; the sweep's own are refused."""
    given = config_settings(args)
    for name, flag in OWNED.items():
        if name in given:
            raise UserError(f"--{name.replace('_', '-')}: the sweep sets it for every run (give {flag})")
    if not args.config_file:
        check_synthetic_beside_data(given)
        check_needs_data(given)
        return given, None
    config_file = ConfigFile.read(args.config_file).refuse(OWNED)
    check_synthetic_beside_data(config_file.under(given), config_file.sources(given))
    check_needs_data(config_file.under(given), config_file.sources(given))
    return config_file.under(given), config_file


def run_defaults(settings: dict) -> dict:
    """A run evaluates once, at its end, on held-out rows, and saves only its final checkpoint, unless told."""
    return {"eval_every": max(1, settings["n_steps"]), "checkpoint_every": 0, **settings}


def config(backend: str, settings: dict, where: str) -> TrainConfig:
    try:
        return TrainConfig.for_backend(backend, **run_defaults(settings))
    except ConfigError as e:
        raise UserError(f"{where}: {e}") from None


def run_specs(points: list[dict], axes: list[Axis], base: dict, backend: str, seeds: int,
              out: Path) -> list[RunSpec]:
    """A RunSpec per point and seed, every configuration built first: each axis value with the training flags (an
    error names the axis), then each point (an error names the point)."""
    for axis in axes:
        for value in axis.values or axis.bounds[:2]:
            flag = "--grid" if axis.values else "--range"
            config(backend, settings_of(base, [axis], {axis.name: value}), f"{flag} {axis.name}={show(value)}")
    width = max(2, len(str(len(points) - 1)))
    specs = []
    for i, point in enumerate(points):
        name = f"p{i:0{width}d}"
        settings = settings_of(base, axes, point)
        for seed in range(seeds):
            cfg = config(backend, {**settings, "seed": seed}, f"point {name} ({describe_point(point)})")
            run_dir = out / POINTS_DIR / f"{name}-seed{seed}"
            specs.append(RunSpec(name, seed, point, cfg.as_dict(), backend, str(run_dir)))
    return specs


def run_all(specs: list[RunSpec], args, backend: str) -> list[dict]:
    rt = None
    if args.parallel == "none":
        rt = open_runtime(backend)  # one for every run: no start-up per run
    if args.parallel == "ray":
        specs = [data_by_absolute_path(s) for s in specs]
    return jobs.run_jobs(specs, args.parallel, here=lambda s: run_point_safely(s, rt), remote=run_point_safely,
                             backend=backend, noun="run", workers=args.workers, ray_address=args.ray_address,
                             gpus=args.gpus_per_run, on_result=announce)


def data_by_absolute_path(spec: RunSpec) -> RunSpec:
    """The run with its --data as an absolute path: a Ray worker runs in its node's directory (every node needs the
    data at that path)."""
    data = spec.config.get("data")
    return replace(spec, config={**spec.config, "data": str(Path(data).absolute())}) if data else spec


def announce(spec: RunSpec, row: dict) -> None:  # a finished run's line
    if row["status"] != "ok":
        result = f"FAILED: {error_line(row['error'] or '')}"
    elif row["eval_pnl"] is None:
        result = "no held-out evaluation"
    else:
        result = f"{describe_evaluation(row)}; {row['seconds']:.1f} s"
    print(f"{spec.key} ({describe_point(spec.axes)}): {result}", flush=True)


def write_outputs(meta: dict, rows: list[dict], out: Path, plots: bool) -> None:
    """The tables, the plot (or why none), report.md and sweep.json; the ranking printed."""
    points = rank(rows, meta["axis_names"], meta["target"])
    write_tables(rows, meta["axis_names"], out)
    meta["plot"] = None
    meta["plot_note"] = "plots skipped: " + ("--no-plots" if not plots else "no point gave a result")
    if plots and any(p["mean"] is not None for p in points):
        try:
            meta["plot"] = sweep_plot(points, meta["axis_names"], TARGETS[meta["target"]], out / "sweep.png")[0].name
        except PlotsUnavailable as e:
            meta["plot_note"] = str(e)
            print(e)
    write_report(meta, points, rows, out)
    print("\n".join(ranking_table(points, meta["axis_names"], meta["target"])), flush=True)


def describe_point(point: dict) -> str:
    return ", ".join(f"{k}={show(v)}" for k, v in point.items())


def describe_data(cfg: TrainConfig) -> str:
    if cfg.data:
        chosen = f" (--instrument {cfg.instrument})" if cfg.instrument is not None else ""
        return f"{cfg.data}{chosen}, the last {cfg.holdout_frac:g} of its rows held out for the evaluation"
    return (f"synthetic market `{cfg.synthetic}`, {cfg.synthetic_rows:,} rows drawn with each run's seed; "
            f"{cfg.eval_rows:,} held-out rows drawn with another")


def describe_settings(given: dict) -> str:
    settings = [f"{k}={show(v)}" for k, v in given.items() if k != "isv"]
    return ", ".join(settings + [f"{name}={show(v)}" for name, v in given.get("isv", ())])


if __name__ == "__main__":
    sys.exit(main())
