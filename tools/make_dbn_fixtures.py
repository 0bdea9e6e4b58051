#!/usr/bin/env python3
"""Write the DBN test fixtures of tests/fixtures/ with Databento's own encoder (`databento-dbn`).

    python tools/make_dbn_fixtures.py            # (re)write tests/fixtures/*.dbn, *.dbn.zst
    python tools/make_dbn_fixtures.py --check    # exit 1 naming every fixture that differs
    python tools/make_dbn_fixtures.py --out DIR  # write them elsewhere

The records are built as databento_dbn objects (MBP10Msg with ten BidAskPair levels;
SymbolMappingMsg, SystemMsg, ErrorMsg, MBP1Msg and TradeMsg in the mixed file), the
metadata by databento_dbn's Metadata encoder, and compression by its Transcoder (zstd):
nothing here uses foxc, so the fixtures are an independent oracle for foxc.data.dbn.
A seeded generator makes every run write the same bytes (for a given databento-dbn).

The books vary: several instruments (up to 2^32 - 1) and tick sizes (interleaved in
mbp10.v2.dbn, mbp10.v3.dbn and mbp10.v2.ts_out.dbn.zst, as in a parent symbol's file: the
decoder reads them, a FileStream refuses them; one a file in the others), negative prices
(a calendar spread), deep levels empty (UNDEF_PRICE, some with stale sizes and counts),
size 0 on set levels, sizes up to 2^32 - 1, every action (A C M T F R N) and side, flags
0..255, ts_event going backwards while ts_recv rises, negative ts_in_delta, ts_out.
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import databento_dbn as dbn

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

UNDEF = dbn.UNDEF_PRICE
U32_MAX = 2**32 - 1
START_NS = 1_609_165_800_000_000_000  # 2020-12-28 14:30 UTC
DAY = dt.date(2020, 12, 28)

# (instrument_id, raw symbol, tick in 1e-9 units, first mid in ticks); the spread trades below zero
INSTRUMENTS = {
    "ES": (5482, "ESH1", 250_000_000, 14_881),
    "NQ": (13615, "NQH1", 250_000_000, 51_250),
    "SPREAD": (42_005_204, "ESH1-ESM1", 50_000_000, -9),
    "MAXID": (U32_MAX, "ZZZZ", 10_000_000, 123_456),
}
ACTIONS = "AACMMTTFRN"
SIDES = "ABN"
FLAGS = (dbn.F_LAST, dbn.F_LAST, dbn.F_LAST | dbn.F_MBP, dbn.F_LAST | dbn.F_SNAPSHOT, dbn.F_TOB, 0,
         dbn.F_LAST | dbn.F_BAD_TS_RECV, dbn.F_MAYBE_BAD_BOOK, dbn.F_LAST | dbn.F_PUBLISHER_SPECIFIC, 0xFF)


def mbp10_records(n: int, seed: int, names: list[str], ts_out: bool = False) -> list[dbn.MBP10Msg]:
    """n MBP-10 records over the instruments `names`, deterministic in `seed`.

    Rows 0, 8, 16, ... are trades; row 1 a clear (action R, every level empty), row 2 has set
    levels of size 0, row 3 stale sizes and counts on empty levels, row 4 sizes and counts of
    2^32 - 1, row 5 flags 0xFF; the rest is drawn at random (books 10 deep two times in three,
    else 0..9 levels a side).
    """
    rng = np.random.default_rng(seed)
    mids = {k: INSTRUMENTS[k][3] for k in names}
    ts_recv, seq = START_NS + seed * 1_000_003, int(rng.integers(0, 2**31))
    out = []
    for i in range(n):
        key = names[i % len(names)] if i < 2 * len(names) else names[int(rng.integers(len(names)))]
        iid, _, tick, _ = INSTRUMENTS[key]
        mids[key] += int(rng.integers(-2, 3))
        ts_recv += int(rng.integers(1, 5_000_000))
        ts_event = ts_recv - int(rng.integers(1_000, 60_000))
        if i % 7 == 6:
            ts_event -= 10_000_000  # exchange time earlier than the previous record's
        seq += int(rng.integers(1, 50))
        depth_b = 10 if rng.random() < 2 / 3 else int(rng.integers(0, 10))
        depth_a = 10 if rng.random() < 2 / 3 else int(rng.integers(0, 10))
        spread = int(rng.integers(1, 3))
        bid_tick, ask_tick = mids[key] - spread // 2 - 1, mids[key] - spread // 2 - 1 + spread
        levels, bid, ask = [], bid_tick, ask_tick
        for lvl in range(10):
            bid_set, ask_set = lvl < depth_b, lvl < depth_a
            levels.append(dict(
                bid_px=bid * tick if bid_set else UNDEF, ask_px=ask * tick if ask_set else UNDEF,
                bid_sz=int(rng.integers(1, 900)) if bid_set else 0, ask_sz=int(rng.integers(1, 900)) if ask_set else 0,
                bid_ct=int(rng.integers(1, 60)) if bid_set else 0, ask_ct=int(rng.integers(1, 60)) if ask_set else 0))
            bid -= 1 + int(rng.random() < 0.2)  # a gap of one tick now and then
            ask += 1 + int(rng.random() < 0.2)
        action = ACTIONS[int(rng.integers(len(ACTIONS)))]
        side = SIDES[int(rng.integers(len(SIDES)))]
        flags = FLAGS[int(rng.integers(len(FLAGS) - 1))]
        if i % 8 == 0:
            action = "T"
        if i == 1:
            action, side = "R", "N"
            levels = [dict(bid_px=UNDEF, ask_px=UNDEF, bid_sz=0, ask_sz=0, bid_ct=0, ask_ct=0) for _ in range(10)]
        elif i == 2:
            levels[0]["bid_sz"] = 0
            levels[min(3, depth_a - 1) if depth_a else 0]["ask_sz"] = 0
        elif i == 3:
            for lv in levels[min(depth_b, 6):]:
                lv.update(bid_px=UNDEF, bid_sz=int(rng.integers(1, 99)), bid_ct=int(rng.integers(1, 9)))
            for lv in levels[min(depth_a, 7):]:
                lv.update(ask_px=UNDEF, ask_sz=int(rng.integers(1, 99)), ask_ct=int(rng.integers(1, 9)))
        elif i == 4:
            levels[0].update(bid_sz=U32_MAX, ask_ct=U32_MAX)
            levels[1].update(ask_sz=U32_MAX, bid_ct=U32_MAX)
        elif i == 5:
            flags = 0xFF
        if action == "R":
            price, size, depth = UNDEF, 0, 0
        elif action in "TF":
            price, size, depth = (bid_tick if side == "B" else ask_tick) * tick, int(rng.integers(1, 50)), 0
        else:
            depth = int(rng.integers(0, 10))
            price, size = levels[depth]["bid_px" if side == "B" else "ask_px"], int(rng.integers(0, 400))
        out.append(dbn.MBP10Msg(
            publisher_id=int(rng.choice([1, 2, 40, 65535])), instrument_id=iid, ts_event=ts_event,
            price=price, size=size, action=dbn.Action(action), side=dbn.Side(side), depth=depth,
            ts_recv=ts_recv, flags=flags, ts_in_delta=int(rng.integers(-5_000, 60_000)), sequence=seq % 2**32,
            levels=[dbn.BidAskPair(**lv) for lv in levels],
            **({"ts_out": ts_recv + int(rng.integers(1_000, 90_000))} if ts_out else {})))
    return out


def metadata(version: int, names: list[str], schema, ts_out: bool = False, limit: int = 0) -> bytes:
    symbols = [INSTRUMENTS[k][1] for k in names]
    mappings = [SimpleNamespace(raw_symbol=INSTRUMENTS[k][1], intervals=[SimpleNamespace(
        start_date=DAY, end_date=DAY + dt.timedelta(days=1), symbol=str(INSTRUMENTS[k][0]))]) for k in names]
    return dbn.Metadata(dataset="GLBX.MDP3", start=START_NS, end=START_NS + 3600 * 10**9, limit=limit,
                        stype_in=dbn.SType.RAW_SYMBOL, stype_out=dbn.SType.INSTRUMENT_ID, schema=schema,
                        symbols=symbols, partial=[], not_found=["ZZH1"] if version > 1 else [],
                        mappings=mappings, ts_out=ts_out, version=version).encode()


def mbp10_file(version: int, n: int, seed: int, names: list[str], ts_out: bool = False) -> bytes:
    return metadata(version, names, dbn.Schema.MBP_10, ts_out) + b"".join(
        bytes(r) for r in mbp10_records(n, seed, names, ts_out))


def mixed_file(seed: int) -> bytes:
    """A live-style DBN v3 stream (schema unset, ts_out): MBP-10 among other record types."""
    names = ["ES", "NQ"]  # subscribed to; the MBP-10 records are ES's book (NQ has an MBP-1 record)
    books = mbp10_records(16, seed, names[:1], ts_out=True)
    t0 = START_NS - 10**9
    es, nq = INSTRUMENTS["ES"], INSTRUMENTS["NQ"]
    others = {
        0: [dbn.SystemMsg(t0, "Subscription request 0 for mbp-10 data succeeded", ts_out=t0 + 5),
            *(dbn.SymbolMappingMsg(1, iid, t0 + 1, dbn.SType.RAW_SYMBOL, sym, dbn.SType.RAW_SYMBOL, sym,
                                   START_NS - 86400 * 10**9, START_NS + 86400 * 10**9, ts_out=t0 + 6)
              for iid, sym, _, _ in (es, nq))],
        3: [dbn.TradeMsg(1, es[0], books[3].ts_event, es[3] * es[2], 2, dbn.Action.TRADE, dbn.Side.ASK, 0,
                         books[3].ts_recv, flags=dbn.F_LAST, ts_out=books[3].ts_recv + 7)],
        7: [dbn.SystemMsg(books[7].ts_recv, "Heartbeat", ts_out=books[7].ts_recv + 3)],
        9: [dbn.MBP1Msg(1, nq[0], books[9].ts_event, nq[3] * nq[2], 1, dbn.Action.ADD, dbn.Side.BID, 0,
                        books[9].ts_recv, flags=dbn.F_LAST,
                        levels=dbn.BidAskPair(nq[3] * nq[2], (nq[3] + 1) * nq[2], 5, 6, 1, 2),
                        ts_out=books[9].ts_recv + 9)],
        15: [dbn.ErrorMsg(books[15].ts_recv, "test: a gateway error between records", ts_out=books[15].ts_recv + 1)],
    }
    body = b""
    for i, rec in enumerate(books):
        body += b"".join(bytes(o) for o in others.get(i, [])) + bytes(rec)
    return metadata(3, names, None, ts_out=True) + body


def zstd(raw: bytes) -> bytes:
    """raw compressed by databento_dbn's own zstd encoder (DBN in, DBN out, version kept)."""
    buf = io.BytesIO()
    tr = dbn.Transcoder(buf, dbn.Encoding.DBN, dbn.Compression.ZSTD,
                        upgrade_policy=dbn.VersionUpgradePolicy.AS_IS)
    tr.write(raw)
    tr.flush()
    tr.finish()
    return buf.getvalue()


def build() -> dict[str, bytes]:
    """File name -> bytes of every fixture."""
    return {
        "mbp10.v1.dbn": mbp10_file(1, 24, seed=11, names=["ES"]),
        "mbp10.v2.dbn": mbp10_file(2, 24, seed=12, names=["ES", "SPREAD", "NQ"]),
        "mbp10.v3.dbn": mbp10_file(3, 24, seed=13, names=["NQ", "MAXID"]),
        "mbp10.v3.dbn.zst": zstd(mbp10_file(3, 40, seed=14, names=["MAXID"])),
        "mbp10.v2.ts_out.dbn.zst": zstd(mbp10_file(2, 30, seed=15, names=["SPREAD", "ES"], ts_out=True)),
        "mixed.v3.ts_out.dbn": mixed_file(seed=16),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=FIXTURES, help="folder to write (default tests/fixtures)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a fixture differs")
    args = ap.parse_args(argv)
    files = build()
    if args.check:
        stale = [n for n, b in files.items() if not (args.out / n).is_file() or (args.out / n).read_bytes() != b]
        for name in stale:
            print(f"stale or missing: {args.out / name}", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (args.out / name).write_bytes(data)
        print(f"{args.out / name}: {len(data)} bytes (databento-dbn {dbn_version()})")
    return 0


def dbn_version() -> str:
    from importlib.metadata import version
    return version("databento-dbn")


if __name__ == "__main__":
    sys.exit(main())
