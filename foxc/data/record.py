"""The snapshot record: one packed MBP-10 book snapshot, shared by numpy and CUDA; cuda/include/foxc/snapshot.h is
generated from it (`python -m foxc.data.record --write`, also tools/build_cubins.py), static_asserts on every offset.

Prices are int64 fixed point, price × 1e9, Databento's own: LOBSTER's (× 1e4) are × 100,000 exactly and floats
rounded to 1e-9, so every tick stays exact at any magnitude (float32 cannot tell 60000.00 from 60000.01). An empty
level has price PRICE_UNDEF (2^63 − 1, Databento's UNDEF_PRICE) and size 0."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..cgen import HOST_CHECKABLE, GeneratedHeader, c_struct, header_text

LEVELS = 10
PRICE_SCALE = 1_000_000_000  # price units per 1.0 of price
PRICE_UNDEF = np.iinfo(np.int64).max
# foxc's own bit in `flags`, above Databento's byte: the source says nothing of trades' sides and prices (a LOBSTER
# order book without its message file, a Parquet file without trade columns), so a resting order fills only when
# the opposite touch moves through its price
FLAG_NO_TRADES = 1 << 8

SNAPSHOT_FIELDS = [
    ("ts_ns", np.int64, (), "time, ns since the Unix epoch, UTC (Databento: ts_recv; LOBSTER: New York time stored as UTC)"),
    ("prev_ts_ns", np.int64, (), "the previous snapshot's ts_ns in the same segment (its own ts_ns for the first)"),
    ("feed_delay_ns", np.int64, (), "ts_ns minus the exchange's time of the event (Databento: ts_recv - ts_event; 0 "
                                    "where the source has one time): resting orders live on the exchange's clock"),
    ("bid_px", np.int64, (LEVELS,), "bid prices × 1e9, best first; PRICE_UNDEF when the level is empty"),
    ("ask_px", np.int64, (LEVELS,), "ask prices × 1e9, best first; PRICE_UNDEF when the level is empty"),
    ("sell_lo_px", np.int64, (), "lowest price a seller-initiated trade printed at since the previous snapshot; "
                                 "PRICE_UNDEF when none"),
    ("buy_hi_px", np.int64, (), "highest price a buyer-initiated trade printed at since the previous snapshot; "
                                "PRICE_UNDEF when none"),
    ("last_px", np.int64, (), "price of the last trade since the previous snapshot (either side); PRICE_UNDEF when "
                              "none"),
    ("bid_sz", np.uint32, (LEVELS,), "displayed size at each bid level; 0 when empty"),
    ("ask_sz", np.uint32, (LEVELS,), "displayed size at each ask level; 0 when empty"),
    ("bid_ct", np.uint32, (LEVELS,), "orders at each bid level; 0 when the source does not say"),
    ("ask_ct", np.uint32, (LEVELS,), "orders at each ask level; 0 when the source does not say"),
    ("sell_lo_vol", np.uint32, (), "volume of the seller-initiated trades at sell_lo_px (0: no such trade)"),
    ("buy_hi_vol", np.uint32, (), "volume of the buyer-initiated trades at buy_hi_px (0: no such trade)"),
    ("sell_vol", np.uint32, (), "volume of all seller-initiated trades since the previous snapshot"),
    ("buy_vol", np.uint32, (), "volume of all buyer-initiated trades since the previous snapshot"),
    ("trade_count", np.uint32, (), "trades since the previous snapshot"),
    ("segment", np.uint32, (), "its segment: a file, or one instrument's rows in it (windows never cross one)"),
    ("instrument_id", np.uint32, (), "the source's instrument id (0 when unknown)"),
    ("flags", np.uint32, (), "source flags (Databento's flags byte; 0 otherwise)"),
]

SNAPSHOT_DTYPE = np.dtype([(name, dt, shape) for name, dt, shape, _ in SNAPSHOT_FIELDS], align=True)
SNAPSHOT_BYTES = SNAPSHOT_DTYPE.itemsize

HEADER_PATH = Path(__file__).resolve().parents[2] / "cuda" / "include" / "foxc" / "snapshot.h"


def render_header() -> str:
    body = [*HOST_CHECKABLE,
            f"#define FOXC_LEVELS {LEVELS}",
            f"#define FOXC_PRICE_SCALE {PRICE_SCALE}LL  // price units per 1.0",
            "#define FOXC_PRICE_UNDEF 0x7FFFFFFFFFFFFFFFLL  // an empty level",
            f"#define FOXC_FLAG_NO_TRADES {FLAG_NO_TRADES}u  // the source says nothing of trades",
            "",
            *c_struct("FoxcSnapshot", SNAPSHOT_FIELDS, SNAPSHOT_DTYPE,
                      "One MBP-10 snapshot; the layout of numpy's SNAPSHOT_DTYPE.", 8, {LEVELS: "FOXC_LEVELS"})]
    return header_text("FOXC_SNAPSHOT_H", "foxc.data.record", "foxc/data/record.py", body)


def empty_snapshots(n: int) -> np.ndarray:
    """n records with every level empty and every other field zero."""
    out = np.zeros(n, SNAPSHOT_DTYPE)
    for field in ("bid_px", "ask_px", "sell_lo_px", "buy_hi_px", "last_px"):
        out[field] = PRICE_UNDEF
    return out


def snapshot_records(records, name: str, least: int = 0) -> np.ndarray:
    """`records` when it is a 1-D array of at least `least` SNAPSHOT_DTYPE records, else a ValueError naming `name` and
    what it got (a list or a MarketData failed deep inside, on `.dtype` or an index)."""
    if not isinstance(records, np.ndarray) or records.dtype != SNAPSHOT_DTYPE or records.ndim != 1 or \
            records.size < least:
        got = f"{records.dtype} {records.shape}" if isinstance(records, np.ndarray) else type(records).__name__
        count = f"at least {least} " if least else ""
        raise ValueError(f"{name} must be a 1-D array of {count}SNAPSHOT_DTYPE records (a MarketData's .records), "
                         f"got {got}")
    return records


def segment_runs(segment: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) row of each run of equal `segment` values, int64, last inclusive."""
    seg = np.asarray(segment)
    first = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]]) if seg.size else np.zeros(0, np.int64)
    last = np.r_[first[1:] - 1, seg.size - 1] if seg.size else np.zeros(0, np.int64)
    return first.astype(np.int64), last.astype(np.int64)


HEADER = GeneratedHeader(HEADER_PATH, render_header, "foxc.data.record", "foxc/data/record.py")
header_is_current, write_header, main = HEADER.is_current, HEADER.write, HEADER.main

if __name__ == "__main__":
    sys.exit(main())
