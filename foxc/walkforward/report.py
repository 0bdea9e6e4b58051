"""The walk-forward's report: both rules judged on every fold's evaluation window, report.json, report.md, plots.

- "edge" (the default): on a named synthetic market, net PnL per snapshot >= `min_opt_frac` of the market's exact
  optimum in every fold; on real data, net PnL > 0 after fees and above the logistic-imbalance yardstick in every
  fold, and a pooled per-trade t-statistic over all folds' trades > `min_t_stat`.
- "seed" (the Rust team's bar): win rate > 0.55, hold fraction 0.30-0.70, entropy stable (every quarter of the
  evaluation >= 0.05 nats, the lowest >= 0.5 x the highest). The optimum itself fails it (it wins 53-54 % of its
  trades and holds most of the time).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..data.record import PRICE_SCALE
from ..plots import markdown_table, pyplot, save

RULES = ("edge", "seed")
# what the report reads of a failed and of a finished fold's record (here, plots, foxc.report): a worker's result.json
# without it is refused (jsonfile.shape_problem: a key ending in "?" may be missing; a range: an int in it)
_DAYS = {"train_days?": tuple[str, str], "eval_days?": tuple[str, str]}
FAILED_RECORD = {"fold": range(2**31), "error": str, **_DAYS}
RECORD = {"fold": range(2**31), **_DAYS, "train_window": {"rows": int}, "eval_window": {"rows": int},
          "equity_curve?": list[tuple[range(2**63), float]], "yardstick?": {"net_pnl": float | None},
          "metrics": {"trades": int, "net_pnl": float, "mean_trade_pnl": float | None, "trade_pnl_std?": float | None,
                      "win_rate": float | None, "trade_t_stat": float | None, "max_drawdown": float | None,
                      "hold_frac": float | None, "pnl_ticks": float, "exposure": float,
                      "entropy_quarters?": list[float] | None}}
# what walkforward_plots reads of a finished fold's record (foxc.report checks it)
PLOTTED = {"fold": range(2**31), "metrics": {"net_pnl": float}, "passed_by": {"edge": bool},
           "equity_curve?": list[tuple[range(2**63), float]] | None, "yardstick?": {"net_pnl": float | None}}
EDGE_COLORS = {True: "tab:green", False: "tab:red"}  # net_pnl.png: a fold's bar, by its edge rule's verdict


@dataclass(frozen=True)
class Criteria:
    rule: str = "edge"
    min_opt_frac: float = 0.5
    min_t_stat: float = 2.0
    min_win_rate: float = 0.55
    hold_min: float = 0.30
    hold_max: float = 0.70
    entropy_min: float = 0.05
    entropy_stability: float = 0.5

    def __post_init__(self):
        assert self.rule in RULES, self.rule

    def judge(self, m: dict) -> dict:
        """The seed rule's verdicts for one fold's figures: {criterion: {"value", "rule", "pass"}}."""
        wr, hold, quarters = m.get("win_rate"), m.get("hold_frac"), m.get("entropy_quarters") or []
        lo, hi = (min(quarters), max(quarters)) if quarters else (None, None)
        return {
            "win_rate": verdict(wr, f"> {self.min_win_rate}", wr is not None and wr > self.min_win_rate),
            "hold_frac": verdict(hold, f"{self.hold_min}..{self.hold_max}",
                                 hold is not None and self.hold_min <= hold <= self.hold_max),
            "entropy_stable": verdict(quarters, f"every quarter >= {self.entropy_min} nats, lowest >= "
                                                f"{self.entropy_stability} x highest",
                                      bool(quarters) and lo >= self.entropy_min and lo >= self.entropy_stability * hi),
        }

    def judge_edge(self, m: dict, fold: dict, optimum: float | None) -> dict:
        """The edge rule's per-fold verdicts (the pooled t-statistic is judged over the run)."""
        if optimum is not None:
            frac = m["pnl_ticks"] / optimum if optimum > 0 else None
            return {"opt_frac": verdict(frac, f">= {self.min_opt_frac} of the optimum {optimum:.5f}",
                                        frac is not None and frac >= self.min_opt_frac)}
        yard = (fold.get("yardstick") or {}).get("net_pnl")
        return {
            "net_pnl": verdict(m["net_pnl"], "> 0 after fees", m["net_pnl"] > 0),
            "beats_yardstick": verdict(yard, "net PnL > the logistic-imbalance yardstick's",
                                       yard is not None and m["net_pnl"] > yard),
        }


def verdict(value, rule: str, passed: bool) -> dict:
    return {"value": value, "rule": rule, "pass": passed}


def pooled_t_stat(folds: list[dict]) -> tuple[float | None, int]:
    """The t-statistic of the mean per-trade net PnL over every fold's trades, from each fold's
    count, mean and standard deviation (exact pooling); (None, n) with fewer than 2 trades."""
    n = total = sq = 0.0
    for f in folds:
        m = f["metrics"]
        k = m["trades"]
        if not k:
            continue
        mean, sd = m["mean_trade_pnl"], m.get("trade_pnl_std") or 0.0
        n += k
        total += k * mean
        sq += (k - 1) * sd * sd + k * mean * mean
    if n < 2:
        return None, int(n)
    mean = total / n
    var = (sq - n * mean * mean) / (n - 1)
    return (mean / math.sqrt(var / n) if var > 0 else None), int(n)


def assemble(results: list[dict], criteria: Criteria, run: dict) -> dict:
    """The report: `run` (trainer, data, windows, settings, the market's optimum when synthetic) plus a
    `folds` list with both rules' verdicts; `all_passed` by the rule chosen."""
    optimum = run.get("optimum")
    folds = []
    for r in sorted(results, key=lambda r: r["fold"]):
        r = dict(r)
        if "error" in r:
            r["criteria"], r["passed"] = {"edge": {}, "seed": {}}, False
        else:
            m = r["metrics"]
            r["criteria"] = {"edge": criteria.judge_edge(m, r, optimum), "seed": criteria.judge(m)}
            r["passed_by"] = {rule: all(c["pass"] for c in v.values()) for rule, v in r["criteria"].items()}
            r["passed"] = r["passed_by"][criteria.rule]
        folds.append(r)
    ok = [f for f in folds if "error" not in f]
    t, n = pooled_t_stat(ok)
    run_level = {}
    if optimum is None:
        run_level["pooled_t_stat"] = {"value": t, "trades": n, "rule": f"> {criteria.min_t_stat} (edge rule)",
                                      "pass": t is not None and t > criteria.min_t_stat}
    all_passed = bool(folds) and all(f["passed"] for f in folds) and \
        (criteria.rule != "edge" or optimum is not None or run_level["pooled_t_stat"]["pass"])
    return {**run, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "is_baseline": any(r.get("is_baseline", True) for r in ok), "criteria": asdict(criteria),
            "run_criteria": run_level, "folds": folds, "all_passed": all_passed}


def _fmt(value, digits=3) -> str:
    return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _money(value) -> str:
    return "–" if value is None else f"{value / PRICE_SCALE:.4f}"


def _days(first_last) -> str:
    return "?" if not first_last else first_last[0] if first_last[0] == first_last[1] else " .. ".join(first_last)


def policy_of(fold: dict) -> str:
    """A fold's policy in a word: the step its validation kept, flat, or its final weights."""
    kept = ((fold.get("train_summary") or {}).get("selection") or {}).get("kept")
    return "final" if kept is None else str(kept)


def markdown(report: dict) -> str:
    c = report["criteria"]
    lines = [f"# Walk-forward report: {report.get('trainer', '?')}", ""]
    if report.get("is_baseline"):
        lines += ["**These folds were trained by a baseline, not by the RL agent.**", ""]
    data = report.get("data", {})
    optimum = report.get("optimum")
    edge_rule = (f"net PnL per snapshot ≥ {c['min_opt_frac']} of the market's optimum ({optimum:.5f} ticks)"
                 if optimum is not None else
                 f"net PnL > 0 after fees and above the logistic-imbalance yardstick in every fold, pooled per-trade "
                 f"t-statistic > {c['min_t_stat']}")
    days = report.get("days")
    cut = (f"folds by UTC day: {days['train']} training and {days['eval']} evaluation day(s), every {days['step']} "
           f"day(s), of the {len(days['dates'])} days with data ({days['dates'][0]} .. {days['dates'][-1]})"
           if days else f"split at {str(report.get('split', '?')).rstrip('s')} boundaries into "
                        f"{len(report.get('windows', []))} windows")
    lines += [f"- data: {data.get('source', '?')}" + (", a prepared cache" if data.get("cache") else "")
              + (f" (market `{data['market']}`)" if data.get("market") else "")
              + (f", --instrument {data['instrument_selection']}" if data.get("instrument_selection") else "")
              + f" ({data.get('rows', '?')} rows, tick {_money(data.get('tick'))}), {cut}",
              f"- steps per fold: {report.get('steps_per_fold', '?')}; runner: {report.get('parallel', '?')}",
              f"- edge rule: {edge_rule}",
              f"- seed rule: win rate > {c['min_win_rate']}, hold fraction {c['hold_min']}–{c['hold_max']}, entropy "
              f"stable (every quarter ≥ {c['entropy_min']} nats, lowest ≥ {c['entropy_stability']} × highest)",
              f"- money in price units per lot; the walk-forward is judged by the **{c['rule']}** rule: "
              f"**{'all folds pass' if report['all_passed'] else 'not every fold passes'}**", ""]
    pooled = report.get("run_criteria", {}).get("pooled_t_stat")
    if pooled:
        lines += [f"- pooled per-trade t-statistic over {pooled['trades']} trades: {_fmt(pooled['value'], 2)} "
                  f"({'above' if pooled['pass'] else 'not above'} {c['min_t_stat']})", ""]
    dated = ["train days", "eval days"] if days else []
    head = ["fold", *dated, "train rows", "eval rows", "policy", "trades", "win rate", "net PnL", "ticks/snapshot",
            "of optimum", "t/trade", "flat net", "yardstick net", "yardstick t", "max DD", "hold", "in market",
            "edge ✓", "seed ✓", "pass"]
    rows = []
    for f in report["folds"]:
        when = [_days(f.get("train_days")), _days(f.get("eval_days"))] if days else []
        if "error" in f:
            failed = f"failed: {(f['error'].strip().splitlines() or [''])[-1]}"
            rows.append([f["fold"], *when, failed] + [""] * (len(head) - 2 - len(when)))
            continue
        m, cr = f["metrics"], f["criteria"]
        frac = cr["edge"].get("opt_frac", {}).get("value")
        yard = f.get("yardstick") or {}
        rows.append([f["fold"], *when, f["train_window"]["rows"], f["eval_window"]["rows"], policy_of(f), m["trades"],
                     _fmt(m["win_rate"]), _money(m["net_pnl"]), _fmt(m.get("pnl_ticks"), 5), _fmt(frac),
                     _fmt(m["trade_t_stat"], 2), _money(0), _money(yard.get("net_pnl")),
                     _fmt(yard.get("trade_t_stat"), 2),
                     _money(m["max_drawdown"]), _fmt(m["hold_frac"]), _fmt(m.get("exposure")),
                     *("✓" if v and all(c["pass"] for c in v.values()) else "✗" for v in (cr["edge"], cr["seed"])), "**pass**" if f["passed"] else "fail"])
    lines += markdown_table(head, rows)
    lines += ["", "policy: the fold's policy, the weights its validation kept (the step) or flat when none beat flat "
              "on the end of its training window; ticks/snapshot: net PnL per snapshot of the evaluation window in "
              "ticks per lot; t/trade: mean/std of per-trade net PnL × √trades; flat: never trading, 0; yardstick: "
              "the logistic-imbalance baseline trained and evaluated on the same windows; max DD: largest fall of the evaluation's equity curve; hold: steps whose action "
              "is HOLD (keeps the position); in market: steps that end holding a position.", ""]
    if report.get("plots"):
        lines += [f"![{Path(p).stem}]({Path(p).name})" for p in report["plots"]] + [""]
    return "\n".join(lines)


def write(report: dict, run_dir: Path) -> tuple[Path, Path]:
    json_path, md_path = Path(run_dir) / "report.json", Path(run_dir) / "report.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path


def walkforward_plots(report: dict, run_dir: Path) -> list[Path]:
    """equity.png (each fold's out-of-sample equity curve over time) and net_pnl.png (per fold, beside the
    yardstick)."""
    plt = pyplot()
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
    equity_png = save(plt, fig, run_dir / "equity.png")

    from matplotlib.patches import Patch
    fig, ax = plt.subplots(figsize=(6, 3.5))
    idx = [str(f["fold"]) for f in folds]
    pnl = [f["metrics"]["net_pnl"] / PRICE_SCALE for f in folds]
    colors = [EDGE_COLORS[f["passed_by"]["edge"]] for f in folds]
    bars = ax.bar(idx, pnl, color=colors)
    ax.bar_label(bars, [f"{v:,.2f}" for v in pnl], fontsize=7, padding=2)  # a fold of 0 shows no bar: its figure
    handles = [Patch(color=EDGE_COLORS[passed], label=f"agent, edge rule {'passed' if passed else 'failed'}")
               for passed in (True, False) if EDGE_COLORS[passed] in colors]  # a patch per colour the bars have
    yard = [(i, (f.get("yardstick") or {}).get("net_pnl")) for i, f in zip(idx, folds)]
    if any(y is not None for _, y in yard):
        handles.append(ax.scatter([i for i, y in yard if y is not None], [y / PRICE_SCALE for _, y in yard
                                                                          if y is not None],
                                  color="black", marker="_", s=400, label="logistic yardstick"))
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("fold")
    ax.set_ylabel("net PnL (price units per lot)")
    ax.set_title(f"net PnL per fold (green: edge rule passed): {label}", fontsize=10)
    if handles:
        ax.legend(handles=handles, fontsize=8)
    return [equity_png, save(plt, fig, run_dir / "net_pnl.png")]


def policy_words(policy: str) -> str:
    """policy_of's word for a table: the kept weights' step, flat, or the final weights."""
    return f"kept at step {policy}" if policy.isdigit() else policy


def compare_orders(reports: dict[str, dict], run_dir: Path) -> dict:
    """The walk-forwards of the agent with market orders only and with resting orders (`reports` by --orders) side by
    side per fold, beside flat (0) and the yardstick (fitted on the same window: the market run's), written to
    orders.json and orders.md; returns the comparison."""
    scale = float(PRICE_SCALE)
    by_fold: dict[int, dict] = {}
    for orders, report in reports.items():
        for f in report["folds"]:
            row = by_fold.setdefault(f["fold"], {"fold": f["fold"], "flat": 0.0, "yardstick": None})
            if "error" in f:
                row[orders] = {"error": f["error"]}
                continue
            m = f["metrics"]
            row[orders] = {"net_pnl": m["net_pnl"] / scale, "pnl_ticks": m["pnl_ticks"], "trades": m["trades"],
                           "policy": policy_of(f), "edge_pass": bool(f["passed_by"]["edge"])}
            yard = f.get("yardstick") or {}
            if row["yardstick"] is None and yard.get("net_pnl") is not None:
                row["yardstick"] = yard["net_pnl"] / scale
    folds = [by_fold[k] for k in sorted(by_fold)]
    ok = lambda r, o: "error" not in r.get(o, {"error": ""})  # noqa: E731
    better = sum(1 for r in folds if ok(r, "market") and ok(r, "passive")
                 and r["passive"]["net_pnl"] > r["market"]["net_pnl"])
    verdict = (f"resting orders earned more than market orders in {better} of {len(folds)} folds; every fold passes "
               f"the edge rule: market {'yes' if reports['market'].get('all_passed') else 'no'}, passive "
               f"{'yes' if reports['passive'].get('all_passed') else 'no'}")
    out = {"folds": folds, "verdict": verdict, "optimum": {o: r.get("optimum") for o, r in reports.items()},
           "all_passed": {o: bool(r.get("all_passed")) for o, r in reports.items()}}
    run_dir = Path(run_dir)
    (run_dir / "orders.json").write_text(json.dumps(out, indent=2) + "\n")
    cell = lambda r, o: (f"error: {r[o]['error'].splitlines()[0][:60]}" if not ok(r, o) else  # noqa: E731
                         f"{r[o]['net_pnl']:+.4f} ({r[o]['pnl_ticks']:+.5f} ticks/snapshot, {r[o]['trades']} trades, "
                         f"{policy_words(r[o]['policy'])}, edge {'pass' if r[o]['edge_pass'] else 'fail'})")
    lines = ["# Walk-forward: market orders against resting orders", "",
             "Net PnL per fold in price units per lot (the evaluation window's, greedy, learning off); flat earns 0; "
             "the yardstick is the logistic imbalance baseline fitted on the fold's training window.", "",
             "| fold | market orders | resting orders (--orders passive) | flat | yardstick |", "|---|---|---|---|---|"]
    lines += [f"| {r['fold']} | {cell(r, 'market')} | {cell(r, 'passive')} | 0 | "
              + ("n/a" if r["yardstick"] is None else f"{r['yardstick']:+.4f}") + " |" for r in folds]
    lines += ["", verdict + ".", "", "Each run's whole report: market/report.md, passive/report.md.", ""]
    (run_dir / "orders.md").write_text("\n".join(lines))
    return out
