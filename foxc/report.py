"""Plots of a run directory: `python -m foxc.report RUN_DIR [--out DIR]`.

- RUN_DIR/metrics.jsonl (a training run; one JSON record per line with at least `step` and the
  trainer's figures: sps, l_q, l_pi, l_v, l_bce, wr, pnl, hold_frac, entropy, lr_q) ->
  training.png, one panel per field against the step (a marker at each point of a short series, so that an
  `eval_*` field evaluated once shows; NaN and infinite values are not drawn, and their panel counts them);
- RUN_DIR/report.json (a walk-forward) -> equity.png and net_pnl.png, and training.png in each
  fold directory RUN_DIR/fold-<i> that has a metrics.jsonl (in OUT/fold-<i> with --out).
Draws with matplotlib, a dependency of foxc (an install without it says so and exits 1). A missing or
empty RUN_DIR, an unreadable or damaged metrics.jsonl (naming its line) or report.json, or a bad --out is
one line, `foxc.report: error: ...`, exit status 2 (foxc.cli). Lines of a metrics.jsonl that are not JSON (a
killed run's torn record) are skipped, and records of steps logged again later (a run resumed by an earlier foxc)
left out for the last record of each step; a `note:` counts both.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .cli import ArgumentParser, PathArg, UserError, output_dir, run
from .evaluate.plots import PLOTTED, PlotsUnavailable, read_metrics, training_curves, walkforward_plots
from .jsonfile import JsonFileError, read_json, shape_problem, shown

PROG = "foxc.report"


def plot_run(run_dir: Path, out: Path | None = None) -> list[Path]:
    """Every plot RUN_DIR supports; returns the files written (raises PlotsUnavailable without matplotlib)."""
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if (run_dir / "metrics.jsonl").is_file():
        written += training_curves(run_dir / "metrics.jsonl", out / "training.png", f"training curves: {run_dir}")
    report_path = run_dir / "report.json"
    if report_path.is_file():
        report = read_report(report_path)
        written += walkforward_plots(report, out)
        for fold, metrics in fold_metrics(run_dir, report)[0]:
            name = metrics.parent.name
            (out / name).mkdir(exist_ok=True)
            written += training_curves(metrics, out / name / "training.png", f"fold {fold['fold']} training curves")
    return written


def fold_metrics(run_dir: Path, report: dict) -> tuple[list[tuple[dict, Path]], list[str]]:
    """([(fold record, its metrics.jsonl)] of the folds with curves to draw, notes on failed folds without any).

    A fold's directory is RUN_DIR/fold-<i> (foxc.walkforward's name), not the record's fold_dir: that is the
    path as the walk-forward was given it, relative to where it ran, and names another directory from
    elsewhere or in a copy of the run. A damaged metrics.jsonl of a fold that finished is refused naming it;
    one of a fold that failed (before its first record) is noted."""
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
    """The notes on the lines of a metrics.jsonl left out of the plots ([] when none): lines that are not JSON, and
    records logged again by a resumed run; a metrics.jsonl the plots cannot draw is a UserError naming it and the
    line."""
    try:
        metrics = read_metrics(path)
    except ValueError as e:
        raise UserError(str(e)) from None
    notes = []
    if metrics.skipped:
        notes.append(f"note: {path}: {_lines(metrics.skipped, 'line is', 'lines are')} not JSON, skipped "
                     f"({_numbers(metrics.skipped)}; a killed run leaves a torn record)")
    if metrics.superseded:
        notes.append(f"note: {path}: {_lines(metrics.superseded, 'record is', 'records are')} of steps logged again "
                     f"later, not drawn ({_numbers(metrics.superseded)}; a run resumed by an earlier foxc logged "
                     "them again: the last record of each step is drawn)")
    return notes


def _lines(numbers: list[int], one: str, many: str) -> str:
    return f"a {one}" if len(numbers) == 1 else f"{len(numbers)} {many}"


def _numbers(numbers: list[int]) -> str:
    """'line 3' or 'lines 3, 5, ...' (the first five)."""
    where = ", ".join(map(str, numbers[:5])) + (", ..." if len(numbers) > 5 else "")
    return f"line{'s' * (len(numbers) > 1)} {where}"


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
