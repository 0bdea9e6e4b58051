"""PNG plots with matplotlib (a dependency of foxc): training curves, walk-forward folds, sweeps.

Every function returns the paths it wrote, or raises PlotsUnavailable (with the install hint)
when matplotlib is missing all the same (an install without its dependencies); callers print that and carry on.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from ..data.record import PRICE_SCALE
from ..jsonfile import drawable, is_number, parse_json, shown

# Panels in this order when present; any other numeric field of metrics.jsonl follows.
CURVE_FIELDS = ("l_q", "l_pi", "l_v", "l_bce", "wr", "pnl", "hold_frac", "entropy", "lr_q", "sps")
LOG_SCALE = ("lr_q", "lr_encoder", "lr_policy", "lr_value", "lr_perception")
EDGE_COLORS = {True: "tab:green", False: "tab:red"}  # net_pnl.png: a fold's bar, by its edge rule's verdict
FEW_POINTS = 20  # a series of at most this many points is drawn with a marker at each (one point is no line)
# what walkforward_plots reads of a finished fold's record (jsonfile.shape_problem's shape; foxc.report checks it)
PLOTTED = {"fold": range(2**31), "metrics": {"net_pnl": float}, "passed_by": {"edge": bool},
           "equity_curve?": list[tuple[range(2**63), float]] | None, "yardstick?": {"net_pnl": float | None}}


class PlotsUnavailable(RuntimeError):
    pass


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotsUnavailable("plots skipped: matplotlib is not installed, though foxc depends on it (pip install "
                               "matplotlib, or pip install 'foxc[plots]')") from None
    return plt


def _save(plt, fig, path) -> Path:
    if fig.get_layout_engine() is None:  # a figure made with layout="constrained" is laid out as it is drawn
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


class Metrics(NamedTuple):
    records: list[dict]     # the records drawn, in the order logged
    skipped: list[int]      # the numbers of the lines that are not JSON
    superseded: list[int]   # the numbers of the lines of records logged again later


def read_metrics(path: Path) -> Metrics:
    """The records of a metrics.jsonl and the lines left out, which the caller names. A line that is not JSON is
    skipped (a killed run leaves a torn record, and its resume goes on after it). A record whose step is not after
    the one before it begins the history again there: the records before it of that step and later are superseded
    (a run resumed by a foxc that did not move them aside logged those steps again), so the last record of each step
    is drawn. A file that is not text, a line that is JSON but not a record the plots can draw (not an object,
    nested too deeply or a number too long to read, a `step` that is not a number, a field drawn as a curve that is
    neither a number nor null there, a number too large to draw) or no record at all is a ValueError naming the file
    and line."""
    try:
        lines = Path(path).read_text().splitlines()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text file of JSON records") from None
    records, skipped = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except json.JSONDecodeError:
            skipped.append(number)
            continue
        except ValueError as e:
            raise ValueError(f"{path}, line {number}: {e}") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}, line {number}: not a JSON object")
        records.append((number, record))
    curves = {k for _, r in records for k, v in r.items() if is_number(v)}  # a field drawn wherever it is a number
    for number, record in records:
        if "step" not in record:
            raise ValueError(f"{path}, line {number}: no 'step'")
        for key in ("step", *sorted(curves & set(record) - {"step"})):
            value = record[key]
            if not (drawable(value) or (value is None and key != "step")):
                why = "too large to draw" if is_number(value) else "not a number" + " or null" * (key != "step")
                raise ValueError(f"{path}, line {number}: {key!r} is {shown(value)}, {why}")
    if not records:
        raise ValueError(f"{path}: no records with a 'step' to plot")
    kept, superseded = [], []  # kept: steps increasing
    for number, record in records:
        while kept and kept[-1][1]["step"] >= record["step"]:
            superseded.append(kept.pop()[0])
        kept.append((number, record))
    return Metrics([r for _, r in kept], skipped, sorted(superseded))


def training_curves(metrics_path: Path, out_png: Path, title: str = "") -> list[Path]:
    """One panel per numeric field of metrics.jsonl against `step`. A short series (an `eval_*` field of a run
    evaluated once or a few times) is drawn with a marker at each point, so that one point shows; NaN and infinite
    values are not drawn, and their panel says how many there were."""
    records = read_metrics(metrics_path).records
    numeric = {k for r in records for k, v in r.items() if is_number(v)}
    names = [k for k in CURVE_FIELDS if k in numeric] + sorted(numeric - set(CURVE_FIELDS) - {"step"})
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator
    cols = 4
    rows = max(1, math.ceil(len(names) / cols))
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
        if len(drawn) < len(pts):  # said under the panel, clear of its curve (the layout makes room for it)
            ax.set_xlabel(f"{_count(len(pts) - len(drawn), 'non-finite value')} not drawn", fontsize=7,
                          color="tab:red")
        if name in LOG_SCALE and drawn and all(p[1] > 0 for p in drawn):
            ax.set_yscale("log")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(title or f"training curves: {metrics_path}", fontsize=10)
    return [_save(plt, fig, out_png)]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def walkforward_plots(report: dict, run_dir: Path) -> list[Path]:
    """equity.png (each fold's out-of-sample equity curve over time) and net_pnl.png (per fold, beside the
    yardstick)."""
    plt = _pyplot()
    run_dir = Path(run_dir)
    folds = [f for f in report["folds"] if "error" not in f]
    label = report.get("trainer", "")
    fig, ax = plt.subplots(figsize=(10, 4))
    for f in folds:
        pts = f.get("equity_curve") or []
        ax.plot([datetime.fromtimestamp(t / 1e9, timezone.utc) for t, _ in pts], [e / PRICE_SCALE for _, e in pts],
                lw=1, label=f"fold {f['fold']}")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_ylabel("equity (price units per lot)")
    ax.set_title(f"out-of-sample equity per fold: {label}", fontsize=10)
    if folds:
        ax.legend(fontsize=8)
    fig.autofmt_xdate()
    equity_png = _save(plt, fig, run_dir / "equity.png")

    from matplotlib.patches import Patch
    fig, ax = plt.subplots(figsize=(6, 3.5))
    idx = [f["fold"] for f in folds]
    pnl = [f["metrics"]["net_pnl"] / PRICE_SCALE for f in folds]
    colors = [EDGE_COLORS[f["passed_by"]["edge"]] for f in folds]
    bars = ax.bar([str(i) for i in idx], pnl, color=colors)
    ax.bar_label(bars, [f"{v:,.2f}" for v in pnl], fontsize=7, padding=2)  # a fold of 0 shows no bar: its figure
    # the legend: a patch per colour the bars have (the first bar's colour stood for all of them)
    handles = [Patch(color=EDGE_COLORS[passed], label=f"agent, edge rule {'passed' if passed else 'failed'}")
               for passed in (True, False) if EDGE_COLORS[passed] in colors]
    yard = [(f.get("yardstick") or {}).get("net_pnl") for f in folds]
    if any(y is not None for y in yard):
        handles.append(ax.scatter([str(i) for i, y in zip(idx, yard) if y is not None],
                                  [y / PRICE_SCALE for y in yard if y is not None], color="black", marker="_", s=400,
                                  label="logistic yardstick"))
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("fold")
    ax.set_ylabel("net PnL (price units per lot)")
    ax.set_title(f"net PnL per fold (green: edge rule passed): {label}", fontsize=10)
    if handles:
        ax.legend(handles=handles, fontsize=8)
    return [equity_png, _save(plt, fig, run_dir / "net_pnl.png")]


def sweep_plot(points: list[dict], axes: list[str], label: str, out_png: Path) -> list[Path]:
    """A sweep's target (each point's `mean` ± `se` over seeds) against its first axis, one line per
    combination of the other axes; a log x-axis where the first axis spans a factor of 3 or more
    above 0, evenly spaced categories where it is not a number."""
    plt = _pyplot()
    first, others = axes[0], axes[1:]
    xs = [p["axes"][first] for p in points]
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    categories = list(dict.fromkeys(map(str, xs)))
    position = (lambda v: v) if numeric else (lambda v: categories.index(str(v)))  # noqa: E731
    lines: dict[tuple, list[dict]] = {}
    for p in points:
        if p["mean"] is not None:
            lines.setdefault(tuple(p["axes"][a] for a in others), []).append(p)
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, members in sorted(lines.items(), key=lambda kv: [_order(v) for v in kv[0]]):
        members.sort(key=lambda p: position(p["axes"][first]))
        ax.errorbar([position(p["axes"][first]) for p in members], [p["mean"] for p in members],
                    yerr=[p["se"] or 0.0 for p in members], marker="o", capsize=3, lw=1,
                    label=", ".join(f"{a}={v:g}" if isinstance(v, float) else f"{a}={v}" for a, v in zip(others, key)))
    if numeric and min(xs) > 0 and max(xs) >= 3 * min(xs):
        ax.set_xscale("log")
    if not numeric:
        ax.set_xticks(range(len(categories)), categories)
    ax.set_xlabel(first)
    ax.set_ylabel(label)
    ax.set_title(f"{label}: mean ± standard error over seeds", fontsize=10)
    if others and 0 < len(lines) <= 12:
        ax.legend(fontsize=8)
    return [_save(plt, fig, out_png)]


def _order(value) -> tuple:
    """Numbers by value, then anything else by its text (a legend in the axes' order)."""
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))
