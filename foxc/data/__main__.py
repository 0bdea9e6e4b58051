"""`python -m foxc.data inspect PATH|CACHE`, `synth --out FILE.parquet` and `prepare DATA --out CACHE`
(`--instrument ID`, `--tick T`: a cache records both). A mistake is one line and exit 2 (foxc.cli.run); nothing is
overwritten without --overwrite, and a refused `prepare` leaves no cache."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from ..cli import ArgumentParser, PathArg, UserError, finite_float, nonnegative_float, nonnegative_int, \
    output_dir, output_file, positive_int, positive_ints, run, text_table
from .labels import N_HORIZONS, LabelConfig, balance, balance_counts, compute_labels
from .market import add_tick_flag, tick_units
from .markets import MARKETS, market
from .record import FLAG_NO_TRADES, LEVELS, PRICE_SCALE, PRICE_UNDEF, SNAPSHOT_BYTES
from .select import add_instrument_flag
from .validate import VALIDATION_JSON, ValidationConfig
from .cache import CacheRows, SELECTION, check_selection, is_cache
from .parquet import write_parquet
from .prepare import prepare
from .source import load
from .synthetic import generate


FILE_ONLY = {"min_price": ValidationConfig.min_price, "max_price": ValidationConfig.max_price, "tick": None,
             "horizons": list(LabelConfig.horizons), "dead_band": 0.0, "fee": 0.0}  # inspect's data-file-only flags


def cmd_inspect(args) -> int:
    if is_cache(args.path):
        return inspect_cache(args)
    for name, default in FILE_ONLY.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.verify:
        if not Path(args.path).exists():  # a mistyped cache: not there at all, rather than not a cache
            raise UserError(f"{args.path}: no such file or directory (--verify reads a prepared cache)")
        raise UserError(f"--verify: {args.path} is not a prepared cache (the data files are read and validated whole "
                         "anyway)")
    horizons = three_horizons(args.horizons)
    if args.min_price < 0 or args.max_price <= args.min_price:
        raise UserError(f"--min-price {args.min_price:g} and --max-price {args.max_price:g}: need 0 <= min < max")
    report_out = validation_out(args)
    cfg = ValidationConfig(args.min_price, args.max_price)
    data = load(args.path, cfg, tick=tick_units(args.tick), instrument=args.instrument)
    rec = data.records
    print(f"source      {data.source}: {len(data.files)} file(s), {data.n_segments} segment(s)")
    print(f"instrument  {data.instrument or '?'} (id {data.instrument_id})" + selected(args.instrument))
    print(f"rows        {len(rec)}")
    print(f"time        {data.describe_time()}")
    print(f"tick        {data.tick / PRICE_SCALE:g}")
    bid_set = (rec["bid_px"] != PRICE_UNDEF).mean(0)
    ask_set = (rec["ask_px"] != PRICE_UNDEF).mean(0)
    print("levels      " + " ".join(f"{l}:{min(b, a):.0%}" for l, (b, a) in enumerate(zip(bid_set, ask_set))))
    print(f"            (share of rows with both sides present, levels 0..{LEVELS - 1})")
    print("trades      " + trades_line(rec))
    print(data.report.summary())
    planes = compute_labels(rec, data.tick, LabelConfig(horizons, args.dead_band, args.fee))
    print_balance(balance_counts(planes), horizons)
    if report_out:
        print(f"validation summary written to {data.report.write_json(report_out.parent, report_out.name)}")
    return 0


def trades_line(rec) -> str:
    """What the rows say of trades, for resting orders: how many rows have some, each side's volume, the feed delay."""
    if len(rec) and ((rec["flags"] & FLAG_NO_TRADES) != 0).all():
        return "none known (FLAG_NO_TRADES): resting orders fill only when the opposite touch moves through them"
    traded = (rec["sell_vol"] > 0) | (rec["buy_vol"] > 0)
    delay = rec["feed_delay_ns"] / 1e3
    return (f"{traded.mean() if len(rec) else 0:.1%} of rows; seller-initiated {int(rec['sell_vol'].sum()):,}, "
            f"buyer-initiated {int(rec['buy_vol'].sum()):,} lots; feed delay median "
            f"{np.median(delay) if len(rec) else 0:.1f} µs, max {delay.max(initial=0):.1f} µs")


def three_horizons(horizons: list[int]) -> tuple[int, ...]:
    """--horizons, checked before any file is read (as positive_ints left them: each >= 1)."""
    if len(horizons) != N_HORIZONS:
        raise UserError(f"--horizons {','.join(map(str, horizons))}: give three horizons")
    return tuple(horizons)


def selected(instrument: str | None) -> str:
    return f", the rows of --instrument {instrument}" if instrument is not None else ""


def validation_out(args) -> Path | None:
    """--run-dir's data_validation.json, checked before any work: new, or replaced with --overwrite."""
    if args.overwrite and not args.run_dir:
        raise UserError("--overwrite: only with --run-dir (it replaces the data_validation.json there)")
    if not args.run_dir:
        return None
    out = output_dir("--run-dir", args.run_dir) / VALIDATION_JSON
    if (out.exists() or out.is_symlink()) and not args.overwrite:
        raise UserError(f"--run-dir {args.run_dir}: holds a {VALIDATION_JSON} already (give another directory, or "
                         "--overwrite to replace it)")
    return output_file("--run-dir", out)


def print_balance(counts, horizons):
    print("labels      horizon  labelled  mid_up  long_win  short_win")
    pct = lambda v, w: f"{'–':>{w}}" if v != v else f"{v:>{w}.1%}"  # noqa: E731  (NaN: nothing labelled)
    for row in balance(counts, horizons):
        print(f"            {row['horizon']:>7}  {pct(row['mid_labelled'], 8)}  {pct(row['mid_up'], 6)}  "
              f"{pct(row['long_win'], 8)}  {pct(row['short_win'], 9)}")


def inspect_cache(args) -> int:
    """A prepared cache from its manifest; with --verify every shard read and hashed, and its label balance."""
    from datetime import datetime, timezone

    given = [name for name in FILE_ONLY if getattr(args, name) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UserError(f"{flag}: {args.path} is a prepared cache, validated and labelled when it was prepared "
                         "(its settings are printed here; prepare it again to change them)")
    report_out = validation_out(args)
    rows = CacheRows(args.path, None)  # with the label settings it was prepared with
    manifest, shards = rows.manifest, rows.manifest["shards"]
    if args.instrument is not None:  # its selection was fixed when it was prepared: the same, or refused
        check_selection(rows.path, manifest, args.instrument)
    utc = lambda ns: datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="seconds")  # noqa: E731
    print(f"cache       {rows.path}: {len(shards)} shard(s), prepared from {manifest['data']}")
    print(f"identity    sha256 {rows.sha256}")
    print(f"instrument  {rows.instrument or '?'} (id {rows.instrument_id})" + selected(manifest.get(SELECTION)))
    print(f"rows        {rows.n_rows}")
    print(f"time        {utc(shards[0]['first_ts_ns'])} .. {utc(shards[-1]['last_ts_ns'])}")
    print(f"tick        {rows.tick / PRICE_SCALE:g}")
    labels = manifest["labels"]
    print(f"labels      horizons {','.join(map(str, labels['horizons']))}, " +
          ", ".join(f"{k} {v}" for k, v in labels.items() if k != "horizons"))
    print(rows.report.summary())
    print(text_table([{"shard": k, "first": utc(s["first_ts_ns"]), "last": utc(s["last_ts_ns"]), "rows": s["rows"],
                       **({} if k and s["read"]["input"] == shards[k - 1]["read"]["input"] else  # its file's, once
                          {"read": s["read"]["rows_read"], "source": s["sources"][0]["path"]})}
                      for k, s in enumerate(shards)], ["shard", "first", "last", "rows", "read", "source"]))
    if args.verify:
        counts = sum(rows.verify(visit=lambda k, records, planes: balance_counts(planes)))
        print("verified    every shard's records.npy and labels.npy: size, sha256, dtype and shape as the manifest says")
        print_balance(counts, rows.horizons)
    if report_out:
        print(f"validation summary written to {rows.report.write_json(report_out.parent, report_out.name)}")
    return 0


def cmd_synth(args) -> int:
    out = output_file("--out", args.out, suffixes=(".parquet",), overwrite=args.overwrite,
                      overwrite_flag="--overwrite")
    try:  # a --rows past memory names the flag (tests/test_bad_inputs.py), not numpy's array
        rec = generate(args.rows, args.seed, market(args.market).params)
    except MemoryError:
        gb = args.rows * SNAPSHOT_BYTES / 1e9
        raise UserError(f"--rows {args.rows:,}: not enough memory to generate them ({gb:,.1f} GB of snapshots, and "
                        "the generator's temporaries); give fewer rows") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    part = out.with_name(f".{out.name}.{os.getpid()}.part")  # written whole, then renamed over --out
    try:
        write_parquet(part, rec, symbol="SYNTH")
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)
    print(f"wrote {args.rows} snapshots of the synthetic market {args.market} (seed {args.seed}) to {out}")
    return 0


def cmd_prepare(args) -> int:
    out = cache_out("--out", args.out, args.overwrite)
    horizons = three_horizons(args.horizons)
    t0 = time.perf_counter()
    manifest = prepare(args.data, out, LabelConfig(horizons), workers=args.workers, overwrite=args.overwrite,
                       instrument=args.instrument, tick=tick_units(args.tick), log=print)
    seconds = time.perf_counter() - t0
    shards, rows = manifest["shards"], manifest["rows"]
    files = {s["read"]["input"]: s["read"] for s in shards}  # a file of several segments once
    read = sum(f["rows_read"] for f in files.values())
    more = len(shards) - len(files)
    split = f", {more} more where a file's instrument_id changes" if more > 0 else ""
    other = sum(n for f in files.values() for n in f.get("other_instruments", {}).values())
    chosen = f" (--instrument {args.instrument}; {other:,} rows of other instruments left out)" \
        if args.instrument is not None else ""
    print(f"prepared {out}: {len(shards)} shard(s), one per file{split}; {rows:,} snapshots kept of {read:,} read"
          f"{chosen}; tick {manifest['tick'] / PRICE_SCALE:g}; label horizons {','.join(map(str, horizons))}")
    print(f"  {seconds:.2f} s, {read / seconds / 1e6:.2f} M snapshots/s read, {min(args.workers, len(files))} "
          f"worker(s); identity sha256 {manifest['sha256']}")
    return 0


def cache_out(flag: str, path, overwrite: bool) -> Path:
    """--out of prepare: a new or empty directory, or (with --overwrite) a prepared cache to replace."""
    out = output_dir(flag, path)
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise UserError(f"{flag} {out}: the directory holds files (give a new or empty directory, or "
                             "--overwrite to replace a prepared cache)")
        if not is_cache(out):
            raise UserError(f"{flag} {out}: the directory holds files but no prepared cache (no manifest.json); "
                             "--overwrite replaces only a cache")
    return out


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parse_args(argv):
    ap = ArgumentParser(prog="python -m foxc.data", description="Inspect, generate or prepare MBP-10 market data.")
    sub = ap.add_subparsers(dest="command", required=True)
    ins = sub.add_parser("inspect", help="rows, time range, instrument, levels, validation counts, label balance; "
                                         "of a prepared cache, its manifest and shards")
    ins.add_argument("path", type=PathArg("a file, a directory, a glob or a prepared cache"),
                     help="a file, a directory or a glob: .parquet, .dbn, .dbn.zst, *_orderbook_N.csv; or a "
                          "prepared cache")
    ins.add_argument("--min-price", type=finite_float, default=None,
                     help=f"smallest reasonable price (default {ValidationConfig.min_price:g})")
    ins.add_argument("--max-price", type=finite_float, default=None,
                     help=f"largest reasonable price (default {ValidationConfig.max_price:g})")
    add_tick_flag(ins.add_argument)
    ins.add_argument("--horizons", type=positive_ints, default=None,
                     help="label horizons in snapshots, comma-separated (default 10,50,100)")
    ins.add_argument("--dead-band", type=nonnegative_float, default=None,
                     help="mid moves at or below this many ticks are masked (default 0)")
    ins.add_argument("--fee", type=nonnegative_float, default=None, help="fee per lot per side, in price (default 0)")
    add_instrument_flag(ins.add_argument)
    ins.add_argument("--verify", action="store_true",
                     help="a cache only: read and hash every shard (one at a time) and print the label balance")
    ins.add_argument("--run-dir", type=PathArg("a directory"),
                     help=f"also write the validation summary here, as {VALIDATION_JSON} (a new file, unless "
                          "--overwrite)")
    ins.add_argument("--overwrite", action="store_true", help=f"replace the {VALIDATION_JSON} --run-dir holds")
    syn = sub.add_parser("synth", help="write synthetic data in the Databento MBP-10 Parquet layout")
    syn.add_argument("--out", required=True, type=PathArg("a .parquet file name"),
                     help="the .parquet file to write (a new file, unless --overwrite)")
    syn.add_argument("--overwrite", action="store_true", help="replace --out when it exists")
    syn.add_argument("--rows", type=positive_int, default=1_000_000, help="snapshots (default 1,000,000)")
    syn.add_argument("--seed", type=nonnegative_int, default=0)
    syn.add_argument("--market", choices=tuple(MARKETS), default="default",
                     help="the named synthetic market (foxc.data.markets; default: default); e.g. wide, a stock's "
                          "microstructure, to try the real-data path on a market with no edge")
    pre = sub.add_parser("prepare", help="validate and label data once into a cache that --data CACHE trains from")
    pre.add_argument("data", type=PathArg("a file, a directory or a glob"),
                     help="a file, a directory or a glob: .parquet, .dbn, .dbn.zst, *_orderbook_N.csv")
    pre.add_argument("--out", required=True, type=PathArg("a directory"),
                     help="the cache directory to write (new or empty, unless --overwrite)")
    pre.add_argument("--horizons", type=positive_ints, default=list(LabelConfig.horizons),
                     help="label horizons in snapshots, three comma-separated (default 10,50,100): a run "
                          "training from the cache must use the same")
    add_instrument_flag(pre.add_argument)
    add_tick_flag(pre.add_argument)
    pre.add_argument("--workers", type=positive_int, default=default_workers(),
                     help="files read side by side, one process each (default: the CPU count, %(default)s)")
    pre.add_argument("--overwrite", action="store_true", help="replace the cache --out holds")
    return ap.parse_args(argv)


COMMANDS = {"inspect": cmd_inspect, "synth": cmd_synth, "prepare": cmd_prepare}


def main(argv=None) -> int:
    args = parse_args(argv)
    command = COMMANDS[args.command]
    return run(f"foxc.data {args.command}", lambda: command(args))


if __name__ == "__main__":
    sys.exit(main())
