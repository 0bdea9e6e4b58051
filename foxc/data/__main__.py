"""`python -m foxc.data inspect PATH` and `python -m foxc.data synth --out FILE.parquet`.

Errors in a user's file print one line (file, row or column, reason) and exit 2; never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .labels import LabelConfig, balance, compute_labels
from .record import LEVELS, PRICE_SCALE, PRICE_UNDEF
from .validate import DataError, ValidationConfig


def cmd_inspect(args) -> int:
    from .source import load
    cfg = ValidationConfig(args.min_price, args.max_price)
    data = load(args.path, cfg, tick=int(round(args.tick * PRICE_SCALE)) if args.tick else None)
    rec = data.records
    print(f"source      {data.source}: {len(data.files)} file(s), {data.n_segments} segment(s)")
    print(f"instrument  {data.instrument or '?'} (id {data.instrument_id})")
    print(f"rows        {len(rec)}")
    print(f"time        {data.describe_time()}")
    print(f"tick        {data.tick / PRICE_SCALE:g}")
    bid_set = (rec["bid_px"] != PRICE_UNDEF).mean(0)
    ask_set = (rec["ask_px"] != PRICE_UNDEF).mean(0)
    print("levels      " + " ".join(f"{l}:{min(b, a):.0%}" for l, (b, a) in enumerate(zip(bid_set, ask_set))))
    print(f"            (share of rows with both sides present, levels 0..{LEVELS - 1})")
    print(data.report.summary())
    horizons = tuple(int(h) for h in args.horizons.split(","))
    labels = compute_labels(rec, data.tick, LabelConfig(horizons, args.dead_band, args.fee))
    print("labels      horizon  labelled  mid_up  long_win  short_win")
    pct = lambda v, w: f"{'–':>{w}}" if v != v else f"{v:>{w}.1%}"  # noqa: E731  (NaN: nothing labelled)
    for row in balance(labels, horizons):
        print(f"            {row['horizon']:>7}  {pct(row['mid_labelled'], 8)}  {pct(row['mid_up'], 6)}  "
              f"{pct(row['long_win'], 8)}  {pct(row['short_win'], 9)}")
    if args.run_dir:
        print(f"validation summary written to {data.report.write_json(args.run_dir)}")
    return 0


def cmd_synth(args) -> int:
    from .parquet import write_parquet
    from .synthetic import generate
    if args.rows < 1:
        raise DataError(args.out, f"--rows must be >= 1, got {args.rows}")
    rec = generate(args.rows, args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(out, rec, symbol="SYNTH")
    print(f"wrote {args.rows} synthetic MBP-10 snapshots (seed {args.seed}) to {out}")
    return 0


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m foxc.data", description="Inspect or generate MBP-10 market data.")
    sub = ap.add_subparsers(dest="command", required=True)
    ins = sub.add_parser("inspect", help="rows, time range, instrument, levels, validation counts, label balance")
    ins.add_argument("path", help="a file, a directory or a glob: .parquet, .dbn, .dbn.zst, *_orderbook_N.csv")
    ins.add_argument("--min-price", type=float, default=ValidationConfig.min_price,
                     help="smallest reasonable price (default %(default)g)")
    ins.add_argument("--max-price", type=float, default=ValidationConfig.max_price,
                     help="largest reasonable price (default %(default)g)")
    ins.add_argument("--tick", type=float, default=None, help="tick size (default: inferred from the prices)")
    ins.add_argument("--horizons", default="10,50,100", help="three label horizons in snapshots (default 10,50,100)")
    ins.add_argument("--dead-band", type=float, default=0.0, help="mid moves at or below this many ticks are masked")
    ins.add_argument("--fee", type=float, default=0.0, help="fee per lot per side, in price (default 0)")
    ins.add_argument("--run-dir", help="also write the validation summary as JSON here")
    syn = sub.add_parser("synth", help="write synthetic data in the Databento MBP-10 Parquet layout")
    syn.add_argument("--out", required=True, help="the .parquet file to write")
    syn.add_argument("--rows", type=int, default=1_000_000, help="snapshots (default 1,000,000)")
    syn.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return cmd_inspect(args) if args.command == "inspect" else cmd_synth(args)
    except (DataError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
