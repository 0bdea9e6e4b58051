"""A sweep's outputs: a row per run (sweep.csv, sweep.parquet), the points ranked by the target's mean over their
seeds ± its standard error (report.md, sweep.json, the table printed), sweep.png. The target is the held-out fraction
of the optimum on a synthetic market (exact: runs of one market compare on one scale), else held-out net PnL."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from ..jsonfile import int64
from ..plots import markdown_table, pyplot, save
from .axes import show

# A run's row (RunSpec.row): its point, seed and axes, then these columns, each of its type (a parquet column holds
# one); a worker's result.json without them is that run's failure (RunSpec.record_shape). A figure is a float.
_FIGURE = float | None
EVAL_FIELDS = {"eval_opt_frac": _FIGURE, "eval_pnl": _FIGURE, "eval_pnl_se": _FIGURE, "eval_trades": int64 | None,
               "eval_wr": _FIGURE, "eval_time_in_market": _FIGURE, "eval_rows": int64 | None}
ROW_FIELDS = {"status": str, **EVAL_FIELDS, "train_sps": _FIGURE, "train_seconds": _FIGURE, "eval_seconds": _FIGURE,
              "seconds": _FIGURE, "steps": int64 | None, "error": str | None, "run_dir": str, "host": str}
ROW = {"point": str, "seed": int64, **ROW_FIELDS}
FIGURES = [k for k, hint in ROW_FIELDS.items() if hint == _FIGURE]
# and of a run that finished with an evaluation, what its line formats (foxc.train.describe_evaluation)
EVALUATED = {"eval_pnl": float, "eval_rows": int64, "eval_trades": int64, "eval_time_in_market": float,
             "seconds": float}

TARGETS = {"eval_opt_frac": "held-out fraction of the optimum", "eval_pnl": "held-out net PnL (ticks per snapshot)"}


def target_of(rows: list[dict], synthetic: bool) -> str:
    """eval_opt_frac on a synthetic market whose optimum is above 0 (a run then reports a fraction), else eval_pnl."""
    fractions = synthetic and any(r.get("eval_opt_frac") is not None for r in rows)
    return "eval_opt_frac" if fractions else "eval_pnl"


def mean_se(values: list[float]) -> tuple[float | None, float | None]:
    """The mean and its standard error (sample standard deviation / √n); se None below 2 values."""
    n = len(values)
    if n == 0:
        return None, None
    mean = sum(values) / n
    if n == 1:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n)


def rank(rows: list[dict], axes: list[str], target: str) -> list[dict]:
    """One entry per point, best mean of the target first (points with no result last, in order):
    its axes, runs, the target's mean, se and n (the runs that gave one), other figures' means."""
    by_point: dict[str, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    points = []
    for point, runs in by_point.items():
        ok = [r for r in runs if r["status"] == "ok"]
        mean, se = mean_se([r[target] for r in ok if r.get(target) is not None])
        points.append({"point": point, "axes": {a: runs[0][a] for a in axes}, "runs": len(runs),
                       "n": sum(r.get(target) is not None for r in ok), "mean": mean, "se": se,
                       "failed": [f"{r['point']}-seed{r['seed']}" for r in runs if r["status"] != "ok"],
                       **{f: mean_se([r[f] for r in ok if r.get(f) is not None])[0]
                          for f in ("eval_pnl", "eval_trades", "train_sps", "seconds")}})
    points.sort(key=lambda p: (p["mean"] is None, -(p["mean"] or 0.0)))
    for i, p in enumerate(points):
        p["rank"] = i + 1 if p["mean"] is not None else None
    return points


def write_tables(rows: list[dict], axes: list[str], out: Path) -> list[Path]:
    """sweep.csv and sweep.parquet: one row per run, in the sweep's order."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    cols = ["point", "seed", *axes, *ROW_FIELDS]
    csv_path, parquet_path = out / "sweep.csv", out / "sweep.parquet"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, cols, extrasaction="ignore")  # a key of no column: left out, as from parquet
        writer.writeheader()
        writer.writerows(rows)
    pq.write_table(pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows]), parquet_path)
    return [csv_path, parquet_path]


def with_error(p: dict, digits: int) -> str:
    if p["mean"] is None:
        return "no result"
    return f"{p['mean']:.{digits}f} " + ("(n=1, no error bar)" if p["se"] is None else f"± {p['se']:.{digits}f}")


def _num(value, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def ranking_table(points: list[dict], axes: list[str], target: str) -> list[str]:
    """The ranking as markdown table lines (report.md, and printed at the end)."""
    digits = 3 if target == "eval_opt_frac" else 5
    head = ["rank", "point", *axes, f"{TARGETS[target]}: mean ± se", "seeds with a result"]
    head += (["net PnL ticks/snapshot"] if target != "eval_pnl" else []) + ["trades", "train steps/s", "s per run"]
    rows = []
    for p in points:
        row = [p["rank"] or "–", p["point"], *(show(p["axes"][a]) for a in axes), with_error(p, digits),
               f"{p['n']}/{p['runs']}"]
        row += ([_num(p["eval_pnl"], "+.5f")] if target != "eval_pnl" else [])
        row += [_num(p["eval_trades"], ".0f"), _num(p["train_sps"], ".1f"), _num(p["seconds"], ".1f")]
        rows.append(row)
    return markdown_table(head, rows)


def error_line(error: str) -> str:
    """A failure's one line: a traceback's last line (the exception), else its first."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()] or ["failed"]
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def markdown(meta: dict, points: list[dict], rows: list[dict]) -> str:
    axes, target = meta["axis_names"], meta["target"]
    failed = [r for r in rows if r["status"] != "ok"]
    lines = [f"# Sweep: {TARGETS[target]}", "",
             f"- data: {meta['data']}",
             "- axes: " + "; ".join(meta["axes"]) + (f" ({meta['random']})" if meta.get("random") else ""),
             f"- {meta['runs']} (seeds 0..{meta['seeds'] - 1}); backend {meta['backend']}; runner {meta['parallel']}; "
             f"{len(rows) - len(failed)} finished, {len(failed)} failed; {meta['seconds']:.0f} s",
             f"- every run's other training settings: {meta['settings'] or 'the defaults'}",
             f"- ranked by the mean over seeds of the {TARGETS[target]}, ± its standard error (sample standard "
             "deviation / √n over the seeds that gave a result)", ""]
    lines += ranking_table(points, axes, target) + [""]
    if failed:
        lines += ["## Failed runs", ""]
        lines += markdown_table(["run", "error"], [[f"{r['point']}-seed{r['seed']}", error_line(r["error"] or "")]
                                                   for r in failed])
        lines += ["", "The whole error of each is in sweep.csv and sweep.json (`error`); a worker process's output "
                  "is in its run directory's `worker.log`.", ""]
    lines += [f"![sweep]({meta['plot']})" if meta.get("plot") else f"({meta['plot_note']})",
              "", "Each run's directory: `points/<point>-seed<k>/` (config.json, metrics.jsonl, summary.json, "
              "train.log, the final checkpoint).", ""]
    return "\n".join(lines)


def write_report(meta: dict, points: list[dict], rows: list[dict], out: Path) -> list[Path]:
    """report.md and sweep.json (the settings, the ranked points and every row)."""
    md, js = out / "report.md", out / "sweep.json"
    md.write_text(markdown(meta, points, rows))
    js.write_text(json.dumps({"sweep": meta, "points": points, "runs": rows}, indent=1, default=str) + "\n")
    return [md, js]


def sweep_plot(points: list[dict], axes: list[str], label: str, out_png: Path) -> list[Path]:
    """The target (each point's `mean` ± `se` over seeds) against the first axis, a line per combination of the
    others; a log x-axis where the first spans a factor of 3 or more above 0, categories where it is no number."""
    plt = pyplot()
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
    # numbers by value, then anything else by its text: a legend in the axes' order
    for key, members in sorted(lines.items(), key=lambda kv: [(0, v, "") if isinstance(v, (int, float)) else
                                                             (1, 0, str(v)) for v in kv[0]]):
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
    return [save(plt, fig, out_png)]
