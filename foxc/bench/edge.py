"""Learning: the agent trained on each named synthetic market, as a fraction of that market's exact optimum.

Per market and seed: train from scratch (the backend's trainer defaults, the market's fee and window), walk
held-out rows drawn with another seed greedily with the run's policy (what its validation kept, or flat) and
report net PnL in ticks per snapshot against the market's exact optimum, trades, win rate and time in the market.
Goals (GPU, B=1,024, K=32, every seed): GOALS of the optimum (easy within 2,000 steps, the others 20,000); null
and wide at most QUIET_TRADES_PER_2000 trades per 2,000 snapshots, null's PnL within 3 SE of 0, wide's >= -1 SE;
regime PnL >= 0; short PnL >= 0. The market-making markets train the agent with resting orders (--orders passive):
maker GOALS of its optimum with quotes, maker_null as null. The reference backend runs a smoke run at the CPU
sizes, not the goals'.
"""
from __future__ import annotations

import argparse
import time

from ..cli import UserError, nonnegative_int, positive_int, text_table as table
from ..isv.registry import isv_setting
from ..trainer.config import TrainConfig
from ..trainer.run import Trainer
from ..trainer.session import run_data
from . import harness
from .report import write_json

MARKETS = ("easy", "default", "null", "noisy", "wide", "regime", "short", "maker", "maker_null")
PASSIVE = ("maker", "maker_null")  # trained with --orders passive
STEPS = {"cuda": {"easy": 2000, **dict.fromkeys(MARKETS[1:], 20000)},
         "reference": {"easy": 3000, "default": 3000, **dict.fromkeys(MARKETS[2:], 1000)}}
EVAL_ROWS = {"cuda": 524_288, "reference": 32_768}
GOALS = {"easy": 0.96, "default": 0.86, "noisy": 0.68, "short": 0.5, "maker": 0.7}  # of the optimum, at least
QUIET_TRADES_PER_2000 = 1.0  # null and wide: at most this many round trips per 2,000 snapshots per backtest


def parse_markets(text: str) -> list[str]:
    markets = [m for m in text.split(",") if m]
    unknown = [m for m in markets if m not in MARKETS]
    if unknown or not markets:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown) or 'none given'} (known: {', '.join(MARKETS)})")
    twice = next((m for i, m in enumerate(markets) if m in markets[:i]), None)
    if twice:
        raise argparse.ArgumentTypeError(f"{twice} given twice in '{text}'")
    return markets


def parse_steps(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in MARKETS or not value.isdigit() or int(value) < 1:
            raise argparse.ArgumentTypeError(f"expected MARKET=STEPS pairs over {', '.join(MARKETS)} with STEPS >= 1, "
                                             f"got '{part}'")
        if name in out:
            raise argparse.ArgumentTypeError(f"{name} given twice in '{text}'")
        out[name] = int(value)
    return out


def verdict(market: str, row: dict) -> str:
    se = row["pnl_se"] or 0.0
    quiet = row["trades_per_2000"] <= QUIET_TRADES_PER_2000
    ok = {"null": lambda: quiet and abs(row["pnl_ticks"]) <= 3 * se + 1e-12,
          "maker_null": lambda: quiet and abs(row["pnl_ticks"]) <= 3 * se + 1e-12,
          "wide": lambda: quiet and row["pnl_ticks"] >= -se,
          "regime": lambda: row["pnl_ticks"] >= 0,
          "short": lambda: row["pnl_ticks"] >= 0 and (row["opt_frac"] or 0.0) >= GOALS["short"]}.get(
        market, lambda: (row["opt_frac"] or 0.0) >= GOALS[market])
    return "pass" if ok() else "fail"


def run_one(rt, market: str, seed: int, steps: int, **settings) -> dict:
    """Train on `market` with `seed` for `steps` (other TrainConfig settings as given, None: the
    backend's default), evaluate greedily on held-out rows; one table row."""
    given = dict(log_every=max(1, steps // 10), checkpoint_every=0, **settings)
    given.update(synthetic=market, seed=seed, n_steps=steps, orders="passive" if market in PASSIVE else "market")
    cfg = TrainConfig.for_backend(rt.backend, **given)
    data = run_data(cfg)
    t0 = time.perf_counter()
    trainer = Trainer(rt, cfg, data.market, data.labels, held=data.held, optimum=data.optimum, val=data.val)
    try:
        summary = trainer.train(cfg.n_steps)
        history = [(r, v) for r, v in trainer.eval_history]
    finally:
        trainer.close()
    e, kept = summary["evaluation"], summary["selection"]
    row = {"market": market, "orders": cfg.orders, "seed": seed, "steps": steps, "opt_frac": e.get("eval_opt_frac"),
           "policy": "final" if kept is None else kept["kept"], "val_seconds": summary["eval_seconds"],
           "pnl_ticks": e["eval_pnl"], "pnl_se": e["eval_pnl_se"], "optimum": data.optimum,
           "trades": e["eval_trades"], "trades_per_2000": e["eval_trades"] * 2000 / e["eval_rows"],
           "win_rate": e["eval_wr"], "in_market": e["eval_time_in_market"], "eval_rows": e["eval_rows"],
           "train_sps": summary["sps"], "seconds": round(time.perf_counter() - t0, 1),
           "l_v_first": history[0][1].get("l_v") if history else None,
           "l_v_last": history[-1][1].get("l_v") if history else None,
           "curve": [[s, v.get("eval_opt_frac"), v.get("l_v")] for s, v in history]}  # step, of optimum, l_v
    row["goal"] = verdict(market, row)
    return row


def fmt(row: dict) -> dict:
    r = dict(row)
    for k, digits in (("opt_frac", 3), ("pnl_ticks", 5), ("pnl_se", 5), ("optimum", 5), ("trades_per_2000", 3),
                      ("win_rate", 3), ("in_market", 3)):
        if isinstance(r.get(k), float):
            r[k] = round(r[k], digits)
    return r


def main(argv=None) -> int:
    ap = harness.parser("edge", __doc__)
    ap.add_argument("--markets", type=parse_markets, default=",".join(MARKETS), help="comma-separated named markets")
    ap.add_argument("--seeds", type=positive_int, default=3, help="seeds per market (0, 1, ...)")
    ap.add_argument("--steps", type=parse_steps, default={}, help="MARKET=STEPS,... (default: the goals' budgets)")
    ap.add_argument("--n-backtests", type=positive_int, default=None)
    ap.add_argument("--seq-len", type=positive_int, default=None)
    ap.add_argument("--eval-rows", type=positive_int, default=None, help="held-out snapshots of the final evaluation")
    ap.add_argument("--eval-every", type=nonnegative_int, default=0,
                    help="also evaluate every N steps (the learning curve)")
    ap.add_argument("--val-frac", type=float, default=None,
                    help="the training rows' end the run's policy is chosen on (the trainer's --val-frac; 0: the "
                         "final weights)")
    ap.add_argument("--actor", choices=("q", "policy"), default=None)
    ap.add_argument("--precision", choices=("f32", "tf32"), default=None,
                    help="matrix products in FP32 or on TF32 tensor cores (default: the trainer's, tf32 on CUDA)")
    ap.add_argument("--set", dest="isv", action="append", type=isv_setting, default=None, metavar="NAME=VALUE")
    return harness.run(ap, argv, _main, check=_check_steps)


def _check_steps(args):
    """--steps names only markets of --markets: the steps of another would be ignored."""
    unused = [m for m in args.steps if m not in args.markets]
    if unused:
        given = ",".join(f"{m}={args.steps[m]}" for m in unused)
        raise UserError(f"--steps {given}: not among --markets {','.join(args.markets)} (add it there, or give "
                         "steps of the markets run)")


def _main(args, rt) -> int:
    markets, steps = args.markets, {**STEPS[rt.backend], **args.steps}
    settings = dict(n_backtests=args.n_backtests, seq_len=args.seq_len, eval_rows=args.eval_rows or EVAL_ROWS[
        rt.backend], eval_every=args.eval_every, actor=args.actor, isv=args.isv, precision=args.precision,
                    val_frac=args.val_frac)
    precision = TrainConfig.for_backend(rt.backend, **settings).precision  # a bad setting fails here, before any run
    rows = []
    for market in markets:
        for seed in range(args.seeds):
            rows.append(run_one(rt, market, seed, steps[market], **settings))
            print(f"  {market} seed {seed}: {fmt(rows[-1])['opt_frac']} of the optimum, goal {rows[-1]['goal']}",
                  flush=True)
    print(f"backend {rt.backend}: {rt.device_name}; settings {args.isv or 'defaults'}; "
          f"precision {precision}")
    print(table([fmt(r) for r in rows], ["market", "orders", "seed", "steps", "policy", "opt_frac", "pnl_ticks", "pnl_se",
                                         "optimum", "trades_per_2000", "win_rate", "in_market", "train_sps",
                                         "val_seconds", "seconds", "goal"]))
    write_json(args.json, "edge", rt, rows,
               {"settings": args.isv, "steps": steps, "precision": precision})
    met = [r for r in rows if r["goal"] != "-"]
    print(f"summary: {sum(r['goal'] == 'pass' for r in met)}/{len(met)} runs meet their goal; "
          + ", ".join(f"{m} " + "/".join(f"{r['opt_frac']:.2f}" if r["opt_frac"] is not None
                                          else f"{r['trades_per_2000']:.2f}t" for r in rows if r["market"] == m)
                      for m in markets) + f" ({rt.backend})")
    return 0
