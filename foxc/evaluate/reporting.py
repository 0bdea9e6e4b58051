"""The walk-forward report: success criteria per fold, `report.json` and `report.md`.

Criteria (configurable; defaults are the Rust team's bar), each judged on a fold's evaluation
window (out of sample):
- win_rate: win rate > min_win_rate (0.55);
- hold_frac: hold_min ≤ hold fraction ≤ hold_max (0.30–0.70);
- entropy_stable: no collapse and no drift: the entropy (the policy's distribution where the
  policy gives one, else of the actions taken) is ≥ entropy_min (0.05 nats) in every quarter of
  the evaluation, and the lowest quarter is ≥ entropy_stability (0.5) × the highest.
A fold passes when every criterion does; the walk-forward passes when every fold does.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..data.record import PRICE_SCALE


@dataclass(frozen=True)
class Criteria:
    min_win_rate: float = 0.55
    hold_min: float = 0.30
    hold_max: float = 0.70
    entropy_min: float = 0.05
    entropy_stability: float = 0.5

    def judge(self, m: dict) -> dict:
        """{criterion: {"value", "rule", "pass"}} for one fold's figures."""
        wr, hold, quarters = m.get("win_rate"), m.get("hold_frac"), m.get("entropy_quarters") or []
        lo, hi = (min(quarters), max(quarters)) if quarters else (None, None)
        return {
            "win_rate": {"value": wr, "rule": f"> {self.min_win_rate}",
                         "pass": wr is not None and wr > self.min_win_rate},
            "hold_frac": {"value": hold, "rule": f"{self.hold_min}..{self.hold_max}",
                          "pass": hold is not None and self.hold_min <= hold <= self.hold_max},
            "entropy_stable": {"value": quarters,
                               "rule": f"every quarter >= {self.entropy_min} nats, lowest >= "
                                       f"{self.entropy_stability} x highest",
                               "pass": bool(quarters) and lo >= self.entropy_min
                               and lo >= self.entropy_stability * hi},
        }


def assemble(results: list[dict], criteria: Criteria, run: dict) -> dict:
    """The report: `run` (trainer, data, windows, settings) plus a `folds` list with verdicts."""
    folds = []
    for r in sorted(results, key=lambda r: r["fold"]):
        r = dict(r)
        if "error" in r:
            r["criteria"], r["passed"] = {}, False
        else:
            r["criteria"] = criteria.judge(r["metrics"])
            r["passed"] = all(c["pass"] for c in r["criteria"].values())
        folds.append(r)
    baseline = any(r.get("is_baseline", True) for r in folds if "error" not in r)
    return {**run, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "is_baseline": baseline, "criteria": asdict(criteria), "folds": folds,
            "all_passed": bool(folds) and all(f["passed"] for f in folds)}


def _fmt(value, digits=3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _money(value) -> str:
    return "–" if value is None else f"{value / PRICE_SCALE:.4f}"


def _mark(verdict: dict) -> str:
    return "✓" if verdict.get("pass") else "✗"


def markdown(report: dict) -> str:
    lines = [f"# Walk-forward report: {report.get('trainer', '?')}", ""]
    if report.get("is_baseline"):
        lines += ["**These folds were trained by a baseline, not by the RL agent.**", ""]
    lines += [f"- data: {report.get('data', {}).get('source', '?')} ({report.get('data', {}).get('rows', '?')} rows, "
              f"tick {report.get('data', {}).get('tick', '?')}), split at {str(report.get('split', '?')).rstrip('s')} boundaries "
              f"into {len(report.get('windows', []))} windows",
              f"- steps per fold: {report.get('steps_per_fold', '?')}; runner: {report.get('parallel', '?')}",
              f"- criteria: win rate > {report['criteria']['min_win_rate']}, hold fraction "
              f"{report['criteria']['hold_min']}–{report['criteria']['hold_max']}, entropy stable "
              f"(every quarter ≥ {report['criteria']['entropy_min']} nats, lowest ≥ "
              f"{report['criteria']['entropy_stability']} × highest)",
              f"- money in price units per lot (prices ×1e9 shown /1e9); result: "
              f"**{'all folds pass' if report['all_passed'] else 'not every fold passes'}**", ""]
    head = ["fold", "train rows", "eval rows", "trades", "win rate", "gross PnL", "fees", "net PnL",
            "Sharpe/trade", "Sharpe/day", "max DD", "hold", "action H", "policy H", "hold time (s)",
            "wr ✓", "hold ✓", "H ✓", "pass"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for f in report["folds"]:
        if "error" in f:
            lines.append(f"| {f['fold']} | failed: {f['error'].strip().splitlines()[-1]} |" + " |" * (len(head) - 2))
            continue
        m, c = f["metrics"], f["criteria"]
        row = [f["fold"], f["train_window"]["rows"], f["eval_window"]["rows"], m["trades"], _fmt(m["win_rate"]),
               _money(m["gross_pnl"]), _money(m["fees"]), _money(m["net_pnl"]), _fmt(m["sharpe_per_trade"]),
               _fmt(m["sharpe_per_day"]), _money(m["max_drawdown"]), _fmt(m["hold_frac"]),
               _fmt(m["action_entropy"]), _fmt(m["policy_entropy"]), _fmt(m["mean_holding_s"], 4),
               _mark(c["win_rate"]), _mark(c["hold_frac"]), _mark(c["entropy_stable"]),
               "**pass**" if f["passed"] else "fail"]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    lines += ["", "Sharpe/trade: mean/std of per-trade net PnL; Sharpe/day: mean/std of daily net PnL ('–' with "
              "fewer than 2 days); max DD: largest fall of the evaluation's equity curve; H: entropy in nats.", ""]
    if report.get("plots"):
        lines += [f"![{Path(p).stem}]({Path(p).name})" for p in report["plots"]] + [""]
    return "\n".join(lines)


def write(report: dict, run_dir: Path) -> tuple[Path, Path]:
    run_dir = Path(run_dir)
    json_path, md_path = run_dir / "report.json", run_dir / "report.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    md_path.write_text(markdown(report))
    return json_path, md_path
