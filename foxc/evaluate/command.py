"""`python -m foxc.evaluate CKPT (--data PATH | --synthetic MARKET)`: an agent beside flat and the yardstick.

The checkpoint's policy acts greedily, learning off, over every snapshot evaluated, and so do flat (always HOLD)
and the logistic-imbalance yardstick, fitted on rows not evaluated: the first `--fit-frac` of `--data`'s rows, or
another draw (`--seed` + 1) of the `--synthetic` market, whose exact optimum is the ceiling. `--seed` defaults to
the draw the checkpoint's training held out; `--fee`, `--lots` and (on files) `--tick` to the checkpoint's where it
was trained on the same kind of data.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..checkpoint import CheckpointError, read_checkpoint
from ..cli import (ArgumentParser, PathArg, UserError, backend_name, int_at_least, nonnegative_float, open_runtime,
                   output_file, run, text_table)
from ..data.market import add_tick_flag, tick_units
from ..data.markets import MARKETS
from ..data.record import PRICE_SCALE
from ..data.select import add_instrument_flag
from ..data.validate import DataError
from ..driver import BACKENDS
from ..lobsim.passive import PassiveConfig
from ..lobsim.sim import MAX_LOTS_PER_ENTRY, LobSimConfig
from .agent import AgentPolicy, FlatPolicy
from .runner import EvalConfig, Evaluator
from ..data.cache import is_cache
from ..data.features import FEATURES
from ..data.source import load
from ..data.synthetic import synthetic_data as draw
from ..isv import N_SLOTS
from ..nn.model import HIDDEN_DIM, layout
from .baseline import NotFitted, fit_baseline
from .optimum import market_optimum

PROG = "foxc.evaluate"
# what runs when --rows or --n-backtests is not given, per backend (a CPU evaluates 100,000 snapshots in seconds)
DEFAULTS = {"cuda": dict(rows=1_000_000, n_backtests=1024), "reference": dict(rows=100_000, n_backtests=64)}
FIT_FRAC = 0.3
HELD_OUT_SEED = 7919  # a training run's held-out draw is seeded --seed + 7919 (foxc.trainer.heldout.holdout_market)
YARDSTICK_STEPS = 50  # the baseline's Newton iterations at most, as a walk-forward's yardstick
MAX_FEE = LobSimConfig.max_price / PRICE_SCALE  # price units: the simulator's largest price
SYNTHETIC_ONLY = {"rows": "--rows", "seed": "--seed"}
FILES_ONLY = {"fit_frac": ("--fit-frac", "the yardstick is fitted on another draw of the market (--seed + 1), not on "
                                         "a part of its rows"),
              "tick": ("--tick", "a synthetic market has its own tick"),
              "instrument": ("--instrument", "a synthetic market has one instrument")}


def fraction(text: str) -> float:
    """An argparse type: a number from 0 up to (not including) 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not 0 <= value < 1:  # NaN too
        raise argparse.ArgumentTypeError(f"must be from 0 up to 1 (a fraction of the rows), got {text}")
    return value


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m foxc.evaluate", allow_abbrev=False,
                        description="Evaluate a checkpoint's agent, greedy, on any data, beside flat (a policy that "
                                    "always HOLDs) and the logistic-imbalance yardstick.")
    ap.add_argument("checkpoint", metavar="CKPT", type=PathArg("a checkpoint file"),
                    help="a checkpoint of python -m foxc.train (RUN_DIR/checkpoint-<step>.foxc)")
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", metavar="PATH", type=PathArg("a file, directory or glob of market data"),
                        help="market data: a file, directory or glob (Parquet, DBN, LOBSTER)")
    source.add_argument("--synthetic", metavar="MARKET", choices=list(MARKETS),
                        help=f"a named synthetic market: {', '.join(MARKETS)}")
    add_instrument_flag(ap.add_argument)
    add_tick_flag(ap.add_argument).help = (
        "--data: the tick features and PnL are counted in, in price (default: the checkpoint's --tick where it was "
        "trained on files with one, else each instrument's, inferred from its prices)")
    ap.add_argument("--fit-frac", type=fraction, default=None, metavar="F",
                    help=f"--data: the first F of the rows fit the yardstick, the rest are evaluated (default "
                         f"{FIT_FRAC}; 0: no yardstick)")
    ap.add_argument("--rows", type=int_at_least(2), default=None, metavar="N",
                    help="--synthetic: snapshots evaluated (default 1,000,000 with CUDA, 100,000 on the reference "
                         "backend); the yardstick is fitted on as many of another draw")
    ap.add_argument("--seed", type=int_at_least(0, 2**63 - 2), default=None,
                    help=f"--synthetic: the draw evaluated (default the checkpoint's seed + {HELD_OUT_SEED}, the "
                         "draw its training held out); the yardstick's is seeded --seed + 1")
    ap.add_argument("--fee", type=nonnegative_float, default=None,
                    help="fee per lot per side, in price units (default: the checkpoint's, where it was trained on "
                         "the same kind of data; else the synthetic market's own, or 0 on files)")
    ap.add_argument("--lots", type=int_at_least(1, MAX_LOTS_PER_ENTRY), default=None,
                    help="lots per entry (default the checkpoint's)")
    ap.add_argument("--n-backtests", type=int_at_least(1, 65536), default=None, metavar="C",
                    help="the evaluated rows are cut into at most C chunks walked side by side, each ending flat "
                         "(default 1024 with CUDA, 64 on the reference backend)")
    ap.add_argument("--backend", choices=BACKENDS, default=None,
                    help="auto (default; $FOXC_BACKEND overrides): CUDA when a usable GPU is present, else the numpy "
                         "reference")
    ap.add_argument("--json", metavar="FILE", type=PathArg("a file name"), default=None,
                    help="also write every figure to FILE")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return run(PROG, lambda: _main(args))


def _main(args) -> int:
    check_args(args)
    json_out = output_file("--json", args.json) if args.json is not None else None
    backend = backend_name(args.backend)
    args.rows = args.rows or DEFAULTS[backend]["rows"]
    args.n_backtests = args.n_backtests or DEFAULTS[backend]["n_backtests"]
    path = Path(args.checkpoint)
    ckpt = read_checkpoint(path)
    config = agent_config(ckpt, path)
    settings = money_settings(args, config)
    data = (synthetic_data(args, config, settings) if args.data is None else
            file_data(args, config, ckpt.meta.get("data") or {}))
    rt = open_runtime(args.backend)
    agent = AgentPolicy.from_checkpoint(rt, ckpt)
    try:
        yardstick = fit_yardstick(data) if data["fit"] is not None else None
        passive = PassiveConfig.of_settings({**config, "lots_per_entry": settings["lots_per_entry"]}, data["tick"])
        results = evaluate_all(rt, args, data, settings, agent, yardstick, passive)
    finally:
        agent.release()  # what the policy holds on the runtime, its weights too
    record = {"checkpoint": str(path), "step": ckpt.step, "trained_on": ckpt.meta.get("data"),
              "backend": rt.backend, "device": rt.device_name, "data": data["describe"],
              "settings": {**settings, "n_backtests": args.n_backtests, "chunks": results["chunks"]},
              "optimum_ticks_per_snapshot": data["optimum"], "policies": results["policies"],
              "yardstick_fit": None if yardstick is None else yardstick["fit"]}
    print_report(record, data)
    if json_out is not None:
        json_out.write_text(json.dumps(record, indent=1, allow_nan=False) + "\n")
        print(f"wrote {json_out}")
    return 0


def check_args(args) -> None:  # a flag of the other kind of data would be ignored
    if args.data is not None:
        for name, flag in SYNTHETIC_ONLY.items():
            if getattr(args, name) is not None:
                raise UserError(f"{flag} {getattr(args, name)} is a setting of synthetic data: beside --data "
                                 f"{args.data} it would be ignored (give one of them)")
    else:
        for name, (flag, why) in FILES_ONLY.items():
            if getattr(args, name) is not None:
                raise UserError(f"{flag}: only with --data ({why})")
    if args.fee is not None and args.fee > MAX_FEE:
        raise UserError(f"--fee must be 0 to {MAX_FEE:,.0f}, the simulator's largest price (got {args.fee:g})")


def agent_config(ckpt, path: Path) -> dict:
    """The training configuration of the agent `ckpt` holds; a checkpoint that holds no agent of this foxc (a
    walk-forward's baseline, a file without foxc's meta, another version's shapes) is refused naming the file."""
    try:
        config = ckpt.config
    except CheckpointError as e:
        raise e.with_path(path) from None
    orders = config.get("orders", "market") if isinstance(config, dict) else "market"
    need = {t.name: t.size for t in layout(FEATURES, HIDDEN_DIM, orders=orders)[0]} | {"isv": N_SLOTS}
    missing = [name for name in need if name not in ckpt.sections]
    if not isinstance(config, dict) or "seq_len" not in config or missing:
        lacks = f"sections {', '.join(missing[:4])}{', …' * (len(missing) > 4)}" if missing else "its settings"
        raise CheckpointError(f"not a checkpoint of a trained agent (python -m foxc.train writes them): it lacks "
                              f"{lacks}", path=path)
    for name, size in need.items():
        held = np.asarray(ckpt[name]).size
        if held != size:
            raise CheckpointError(f"section '{name}' holds {held:,} values, and this foxc's agent {size:,} (a "
                                  "checkpoint of another version of foxc?)", path=path)
    return config


def money_settings(args, config: dict) -> dict:  # fee (price units per lot per side), lots per entry, and whence
    trained_on_files, on_files = bool(config.get("data")), args.data is not None
    if args.fee is not None:
        fee, fee_from = args.fee, "--fee"
    elif config.get("fee_per_lot") is not None and trained_on_files == on_files:
        fee, fee_from = float(config["fee_per_lot"]), "the checkpoint's"
    elif on_files:
        fee, fee_from = 0.0, "none on files"
    else:
        fee, fee_from = MARKETS[args.synthetic].fee_per_lot, f"the market {args.synthetic}'s own"
    lots, lots_from = (args.lots, "--lots") if args.lots is not None else \
        (int(config.get("lots_per_entry", 1)), "the checkpoint's")
    return {"fee_per_lot": fee, "fee_from": fee_from, "lots_per_entry": lots, "lots_from": lots_from}


def synthetic_data(args, config: dict, settings: dict) -> dict:
    named = MARKETS[args.synthetic]
    seed = args.seed if args.seed is not None else int(config.get("seed", 0)) + HELD_OUT_SEED
    market, fit = draw(args.rows, seed=seed, params=named.params), draw(args.rows, seed=seed + 1, params=named.params)
    optimum = market_optimum(named, fee_per_lot=settings["fee_per_lot"], orders=config.get("orders", "market"),
                             maker_fee_per_lot=config.get("maker_fee", 0.0))
    notes = []
    if not config.get("data") and config.get("synthetic") == args.synthetic and int(config.get("seed", -1)) == seed:
        notes.append(f"note: --seed {seed} drew the checkpoint's training data (its first "
                     f"{int(config.get('synthetic_rows', 0)):,} snapshots): the agent is evaluated on rows it trained "
                     "on")
    describe = {"source": "synthetic", "market": args.synthetic, "seed": seed, "rows": args.rows,
                "evaluated_rows": args.rows, "fit_seed": seed + 1, "fit_rows": args.rows,
                "tick": market.tick / PRICE_SCALE}
    text = (f"{args.rows:,} snapshots of the synthetic market {args.synthetic} (seed {seed}); the yardstick fitted on "
            f"{args.rows:,} of another draw (seed {seed + 1})")
    return {"records": market.records, "fit": fit.records, "tick": market.tick, "source": "synthetic",
            "optimum": optimum, "describe": describe, "text": text, "notes": notes, "summary": None}


def file_data(args, config: dict, trained_on: dict) -> dict:
    if is_cache(args.data):
        raise UserError(f"--data {args.data}: a prepared cache; give the files it was prepared from "
                         "(foxc.evaluate reads market data files)")
    tick, tick_from = args.tick, "--tick"
    if tick is None and config.get("data") and config.get("tick") is not None:
        tick, tick_from = float(config["tick"]), "the checkpoint's --tick"
    try:
        market = load(args.data, tick=tick_units(tick), instrument=args.instrument)
    except DataError as e:
        given = f" ({tick_from} {tick:g}, which the agent was trained in; give --tick T to count this data in " \
                "another)" if tick_from != "--tick" and "--tick" in str(e) else ""
        raise UserError(f"--data {e}{given}") from None
    n = len(market.records)
    frac = FIT_FRAC if args.fit_frac is None else args.fit_frac
    cut = int(n * frac)
    if n - cut < 2:
        cause = market.report.most_skipped()
        raise UserError(f"--data {args.data}: {cause + ': ' if cause else ''}--fit-frac {frac:g} of {n:,} rows "
                         "leaves too few to evaluate on (2 at least)")
    records = np.ascontiguousarray(market.records[cut:])
    fit = np.ascontiguousarray(market.records[:cut]) if cut else None
    describe = {"source": args.data, "files": market.files, "instrument": market.instrument,
                "instrument_selection": args.instrument, "rows": n, "fit_rows": cut, "fit_frac": frac,
                "evaluated_rows": n - cut, "first_evaluated_row": cut, "tick": market.tick / PRICE_SCALE,
                "tick_from": tick_from if tick is not None else "inferred",
                "validation": market.report.to_dict()}
    text = (f"rows {cut:,}..{n:,} of the {n:,} of {args.data} (tick {market.tick / PRICE_SCALE:g}"
            + (f", {tick_from}" if tick is not None else ", inferred") + ")"
            + (f"; the yardstick fitted on the first {cut:,} (--fit-frac {frac:g})" if cut else
               "; no yardstick (--fit-frac 0)"))
    trained = {Path(f).resolve() for f in trained_on.get("files") or []}
    seen = [f for f in market.files if Path(f).resolve() in trained]
    notes = [f"note: {', '.join(map(str, seen[:3]))}{', …' * (len(seen) > 3)}: the checkpoint trained on "
             f"{'this file' if len(seen) == 1 else 'these files'} (all but the rows its run held out): the agent is "
             "evaluated on rows it trained on"] if seen else []
    return {"records": records, "fit": fit, "tick": market.tick, "source": market.source, "optimum": None,
            "describe": describe, "text": text, "notes": notes, "summary": market.report.summary()}


def fit_yardstick(data: dict) -> dict:
    """The logistic-imbalance baseline fitted on data["fit"], as a walk-forward fits its yardstick: {"policy", "fit"};
    a fit that cannot be made (too few mid moves) leaves the policy None and says why."""
    try:
        policy, fit = fit_baseline(data["fit"], data["tick"], steps=YARDSTICK_STEPS)
    except NotFitted as e:  # the other figures stand
        return {"policy": None, "fit": {"error": str(e), "rows": len(data["fit"])}}
    return {"policy": policy, "fit": {**fit, "rows": len(data["fit"])}}


def evaluate_all(rt, args, data: dict, settings: dict, agent, yardstick: dict | None,
                 passive: PassiveConfig | None = None) -> dict:
    """Each policy's figures on the same rows: {"chunks", "policies": [record per policy]}."""
    config = EvalConfig(n_backtests=args.n_backtests, fee_per_lot=int(round(settings["fee_per_lot"] * PRICE_SCALE)),
                        lots_per_entry=settings["lots_per_entry"], backend=args.backend,
                        passive=passive)
    entries = [("agent", agent), ("flat", FlatPolicy("flat: always HOLD"))]
    if yardstick is not None:
        entries.append(("yardstick", yardstick["policy"]))
    out = []
    with Evaluator(data["records"], config, tick=data["tick"], rt=rt) as evaluator:
        for role, policy in entries:
            if policy is None:
                out.append({"role": role, "name": None, "error": yardstick["fit"]["error"], "metrics": None})
            else:
                out.append(figures(role, evaluator.run(policy), data["optimum"]))
        chunks = len(evaluator.chunks)
    return {"chunks": chunks, "policies": out}


def figures(role: str, ev, optimum: float | None) -> dict:
    m = ev.metrics
    return {"role": role, "name": ev.policy, "net_pnl": m["net_pnl"] / PRICE_SCALE, "pnl_ticks": m["pnl_ticks"],
            "trades": m["trades"], "win_rate": m["win_rate"], "t_stat": m["trade_t_stat"],
            "opt_frac": m["pnl_ticks"] / optimum if optimum else None,  # none without one, or of an optimum of 0
            "metrics": m, "sim": ev.sim}


COLUMNS = ["policy", "net PnL", "ticks/snapshot", "trades", "win rate", "t/trade"]


def print_report(record: dict, data: dict) -> None:
    s = record["settings"]
    if data["summary"]:
        print(data["summary"])
    print(f"checkpoint {record['checkpoint']}: step {record['step']}; backend {record['backend']}")
    print(f"evaluated: {data['text']}")
    print(f"money: fee {s['fee_per_lot']:g} per lot per side ({s['fee_from']}), {s['lots_per_entry']} lot(s) per entry "
          f"({s['lots_from']}), {s['chunks']} chunk(s) walked side by side (--n-backtests {s['n_backtests']})")
    for note in data["notes"]:
        print(note)
    synthetic = record["optimum_ticks_per_snapshot"] is not None
    if synthetic:
        print(f"optimum: {record['optimum_ticks_per_snapshot']:.5f} ticks per snapshot per lot (the market's exact "
              "optimum, foxc.evaluate.optimum)")
    rows = []
    for p in record["policies"]:
        if p["metrics"] is None:
            rows.append({"policy": f"{p['role']}: not fitted"})
            continue
        rows.append({"policy": p["name"], "net PnL": f"{p['net_pnl']:+.4f}", "ticks/snapshot": f"{p['pnl_ticks']:+.5f}",
                     "trades": p["trades"], "win rate": _num(p["win_rate"], 3), "t/trade": _num(p["t_stat"], 2),
                     "of optimum": _num(p["opt_frac"], 2)})
    print(text_table(rows, COLUMNS + ["of optimum"] * synthetic, lambda v: "-" if v in ("", None) else str(v)))
    for p in record["policies"]:
        if p["metrics"] is None:
            print(f"{p['role']}: not fitted: {p['error']}")
    print("net PnL in price units (a lot's PnL × lots); ticks per snapshot per lot, over every snapshot evaluated; "
          "t/trade: the mean trade's net PnL in standard errors")


def _num(value, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
