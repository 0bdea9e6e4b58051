"""Plots of a run directory: `python -m foxc.report RUN_DIR [--out DIR]`.

RUN_DIR/metrics.jsonl (a training run) -> training.png, one panel per numeric field against the step; RUN_DIR/
report.json (a walk-forward) -> equity.png and net_pnl.png, and training.png of each fold-<i> with a metrics.jsonl.
Lines of a metrics.jsonl that are not JSON (a killed run's torn record) are skipped, and records of steps logged
again later (a run resumed by an earlier foxc) left out for the last of each step; a `note:` counts both.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

from .cli import ArgumentParser, PathArg, UserError, output_dir, run
from .jsonfile import JsonFileError, drawable, is_number, parse_json, read_json, shape_problem, shown
from .plots import PlotsUnavailable, pyplot, save
from .walkforward.report import PLOTTED, walkforward_plots

PROG = "foxc.report"
# panels in this order when present; any other numeric field of metrics.jsonl follows
CURVE_FIELDS = ("l_q", "l_pi", "l_v", "l_bce", "wr", "pnl", "hold_frac", "entropy", "lr_q", "sps")
LOG_SCALE = ("lr_q", "lr_encoder", "lr_policy", "lr_value", "lr_perception")
FEW_POINTS = 20  # a series of at most this many points is drawn with a marker at each (one point is no line)


class Metrics(NamedTuple):
    records: list[dict]     # the records drawn, in the order logged
    skipped: list[int]      # the numbers of the lines that are not JSON
    superseded: list[int]   # the numbers of the lines of records logged again later


def read_metrics(path: Path) -> Metrics:
    """The records of a metrics.jsonl and the lines left out. A line that is not JSON is skipped (a killed run's torn
    record). A record whose step is not after the one before begins the history again there: the last record of
    each step is drawn. A file that is not text, a line that is JSON but no record the plots can draw, or no record
    at all is a UserError naming the file and line."""
    try:
        lines = Path(path).read_text().splitlines()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file of JSON records") from None
    records, skipped = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except json.JSONDecodeError:
            skipped.append(number)
            continue
        except ValueError as e:  # parse_json's absurd JSON (too deep, a number too long)
            raise UserError(f"{path}, line {number}: {e}") from None
        if not isinstance(record, dict):
            raise UserError(f"{path}, line {number}: not a JSON object")
        records.append((number, record))
    curves = {k for _, r in records for k, v in r.items() if is_number(v)}  # a field drawn wherever it is a number
    for number, record in records:
        if "step" not in record:
            raise UserError(f"{path}, line {number}: no 'step'")
        for key in ("step", *sorted(curves & set(record) - {"step"})):
            value = record[key]
            if not (drawable(value) or (value is None and key != "step")):
                why = "too large to draw" if is_number(value) else "not a number" + " or null" * (key != "step")
                raise UserError(f"{path}, line {number}: {key!r} is {shown(value)}, {why}")
    if not records:
        raise UserError(f"{path}: no records with a 'step' to plot")
    kept, superseded = [], []  # kept: steps increasing
    for number, record in records:
        while kept and kept[-1][1]["step"] >= record["step"]:
            superseded.append(kept.pop()[0])
        kept.append((number, record))
    return Metrics([r for _, r in kept], skipped, sorted(superseded))


def training_curves(metrics_path: Path, out_png: Path, title: str = "") -> list[Path]:
    """One panel per numeric field of metrics.jsonl against `step`: a short series with a marker at each point (one
    point shows); NaN and infinite values are not drawn, and their panel counts them."""
    records = read_metrics(metrics_path).records
    numeric = {k for r in records for k, v in r.items() if is_number(v)}
    names = [k for k in CURVE_FIELDS if k in numeric] + sorted(numeric - set(CURVE_FIELDS) - {"step"})
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator
    cols, rows = 4, max(1, math.ceil(len(names) / 4))
    # constrained: the figure's title and each panel's title and tick labels get their own room
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.8 * rows), squeeze=False, layout="constrained")
    for ax, name in zip(axes.flat, names):
        pts = [(r["step"], float(r[name])) for r in records if is_number(r.get(name))]
        drawn = [p for p in pts if math.isfinite(p[1])]
        ax.plot([p[0] for p in drawn], [p[1] for p in drawn], lw=1,
                **({"marker": "o", "ms": 4} if len(drawn) <= FEW_POINTS else {}))
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps: no 9.6, 9.8 around a single step's point
        if len(drawn) < len(pts):  # said under the panel, clear of its curve
            n = len(pts) - len(drawn)
            ax.set_xlabel(f"{n} non-finite value{'s' * (n != 1)} not drawn", fontsize=7, color="tab:red")
        if name in LOG_SCALE and drawn and all(p[1] > 0 for p in drawn):
            ax.set_yscale("log")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(title or f"training curves: {metrics_path}", fontsize=10)
    return [save(plt, fig, out_png)]


def plot_run(run_dir: Path, out: Path | None = None) -> list[Path]:
    """Every plot RUN_DIR supports; returns the files written (raises PlotsUnavailable without matplotlib)."""
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if (run_dir / "metrics.jsonl").is_file():
        written += training_curves(run_dir / "metrics.jsonl", out / "training.png", f"training curves: {run_dir}")
    if (run_dir / "report.json").is_file():
        report = read_report(run_dir / "report.json")
        written += walkforward_plots(report, out)
        for fold, metrics in fold_metrics(run_dir, report)[0]:
            (out / metrics.parent.name).mkdir(exist_ok=True)
            written += training_curves(metrics, out / metrics.parent.name / "training.png",
                                       f"fold {fold['fold']} training curves")
    return written


def fold_metrics(run_dir: Path, report: dict) -> tuple[list[tuple[dict, Path]], list[str]]:
    """([(fold record, its metrics.jsonl)] of the folds with curves to draw, notes on failed folds without any).

    A fold's directory is RUN_DIR/fold-<i>, not the record's fold_dir (the path as the walk-forward was given it,
    relative to where it ran). A damaged metrics.jsonl of a fold that finished is refused; of one that failed, noted."""
    drawn, notes = [], []
    for fold in report["folds"]:
        metrics = Path(run_dir) / f"fold-{fold['fold']}" / "metrics.jsonl"
        if not metrics.is_file():
            continue
        try:
            notes += metrics_notes(metrics)
        except UserError as e:
            if "error" not in fold:
                raise
            notes.append(f"note: {e} (fold {fold['fold']} failed): no training.png for it")
            continue
        drawn.append((fold, metrics))
    return drawn, notes


def metrics_notes(path: Path) -> list[str]:
    """The notes on the lines of a metrics.jsonl left out of the plots: not JSON, or logged again by a resume."""
    metrics = read_metrics(path)
    notes = []
    for numbers, one, many, why in (
            (metrics.skipped, "line is", "lines are", "not JSON, skipped ({}; a killed run leaves a torn record)"),
            (metrics.superseded, "record is", "records are", "of steps logged again later, not drawn ({}; a run "
             "resumed by an earlier foxc logged them again: the last record of each step is drawn)")):
        if numbers:
            lines = f"line{'s' * (len(numbers) > 1)} " + ", ".join(map(str, numbers[:5])) + ", ..." * (len(numbers) > 5)
            count = f"a {one}" if len(numbers) == 1 else f"{len(numbers)} {many}"
            notes.append(f"note: {path}: {count} {why.format(lines)}")
    return notes


def read_report(path: Path) -> dict:
    """A walk-forward's report.json; one that is not JSON or lacks what the plots read is refused naming it."""
    try:
        report = read_json(path)
    except JsonFileError as e:
        raise UserError(f"{path}: not a walk-forward report ({e.problem})") from None
    if not isinstance(report.get("folds"), list):
        raise UserError(f"{path}: not a walk-forward report (no 'folds' list)")
    for i, fold in enumerate(report["folds"]):
        bad = shape_problem(fold, {"fold": PLOTTED["fold"]} if "error" in fold else PLOTTED) \
            if isinstance(fold, dict) else f"{shown(fold)}, not an object"
        if bad:
            raise UserError(f"{path}: fold record {i}: {bad} (the file was altered or damaged: run the walk-forward "
                            "again)")
    return report


def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m foxc.report", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", metavar="RUN_DIR", type=PathArg("a run directory", Path))
    ap.add_argument("--out", type=PathArg("a directory", Path), default=None,
                    help="where to write the PNGs (default: RUN_DIR)")
    args = ap.parse_args(argv)
    return run(PROG, lambda: _main(args))


def _main(args) -> int:
    if not args.run_dir.exists():
        raise UserError(f"{args.run_dir}: no such directory")
    if not args.run_dir.is_dir():
        raise UserError(f"{args.run_dir}: not a directory (give a run directory)")
    metrics, report = args.run_dir / "metrics.jsonl", args.run_dir / "report.json"
    if not (metrics.is_file() or report.is_file()):
        raise UserError(f"{args.run_dir}: neither metrics.jsonl nor report.json to plot")
    notes = metrics_notes(metrics) if metrics.is_file() else []
    notes += fold_metrics(args.run_dir, read_report(report))[1] if report.is_file() else []
    if args.out is not None:
        output_dir("--out", args.out)
    try:
        written = plot_run(args.run_dir, args.out)
    except PlotsUnavailable as e:
        print(e, file=sys.stderr)
        return 1
    for line in [*map(str, written), *notes]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
