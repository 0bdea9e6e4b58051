"""Plots of a run directory: `python -m foxc.report RUN_DIR [--out DIR]`.

- RUN_DIR/metrics.jsonl (a training run; one JSON record per line with at least `step` and the
  trainer's figures: sps, l_q, l_pi, l_v, l_bce, wr, pnl, hold_frac, entropy, lr_q) ->
  training.png, one panel per field against the step;
- RUN_DIR/report.json (a walk-forward) -> equity.png and net_pnl.png, and training.png in each
  fold directory that has a metrics.jsonl.
Needs matplotlib (`pip install 'foxc[plots]'`); without it, it says so and exits 1.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .evaluate.plots import PlotsUnavailable, training_curves, walkforward_plots


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
        report = json.loads(report_path.read_text())
        written += walkforward_plots(report, out)
        for fold in report["folds"]:
            metrics = Path(fold.get("fold_dir", "")) / "metrics.jsonl"
            if metrics.is_file():
                written += training_curves(metrics, Path(fold["fold_dir"]) / "training.png",
                                           f"fold {fold['fold']} training curves")
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m foxc.report", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default: RUN_DIR)")
    args = ap.parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"{args.run_dir}: no such directory", file=sys.stderr)
        return 2
    if not ((args.run_dir / "metrics.jsonl").is_file() or (args.run_dir / "report.json").is_file()):
        print(f"{args.run_dir}: neither metrics.jsonl nor report.json to plot", file=sys.stderr)
        return 2
    try:
        written = plot_run(args.run_dir, args.out)
    except PlotsUnavailable as e:
        print(e, file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
