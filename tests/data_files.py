"""Writers of small market-data files for the data tests (DBN of any version, LOBSTER CSVs)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from foxc.data.dbn import MBP10_DTYPE, RTYPE_MBP10
from foxc.data.record import LEVELS, PRICE_UNDEF

def _shared_data() -> Path:
    """../shared/data beside the checkout (a worktree one level deeper looks one more level up)."""
    root = Path(__file__).resolve().parents[1]
    for base in (root.parent, root.parent.parent):
        if (base / "shared" / "data").is_dir():
            return base / "shared" / "data"
    return root.parent / "shared" / "data"


SHARED_DATA = _shared_data()


def dbn_bytes(rec: np.ndarray, version: int = 2, symbol: str = "TEST", ts_out: bool = False) -> bytes:
    """A DBN stream of MBP-10 records laid out as Databento's dbn crate writes it."""
    cstr = 22 if version == 1 else 71
    meta = b"GLBX.MDP3".ljust(16, b"\0") + struct.pack("<HQQQ", 2, 0, 2**64 - 1, 0)
    if version == 1:
        meta += struct.pack("<Q", len(rec))
    meta += bytes([1, 1, int(ts_out)])
    if version > 1:
        meta += struct.pack("<H", cstr)
    meta += b"\0" * (47 if version == 1 else 53)
    meta += struct.pack("<I", 0)  # schema definition length
    meta += struct.pack("<I", 1) + symbol.encode().ljust(cstr, b"\0")
    meta += struct.pack("<III", 0, 0, 0)  # partial, not_found, mappings
    stride = MBP10_DTYPE.itemsize + (8 if ts_out else 0)
    raw = np.zeros(len(rec), MBP10_DTYPE)
    raw["length"] = stride // 4
    raw["rtype"] = RTYPE_MBP10
    raw["instrument_id"] = rec["instrument_id"]
    raw["ts_event"] = rec["ts_ns"]
    raw["ts_recv"] = rec["ts_ns"]
    raw["action"] = np.where(rec["trade_count"] > 0, b"T", b"A")
    raw["flags"] = rec["flags"]
    for name in ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct"):
        raw["levels"][name] = rec[name]
    body = raw.tobytes()
    if ts_out:
        body = b"".join(raw[i].tobytes() + struct.pack("<Q", 7) for i in range(len(raw)))
    return b"DBN" + bytes([version]) + struct.pack("<I", len(meta)) + meta + body


def write_lobster(folder: Path, rec: np.ndarray, levels: int, ticker="AAPL", day="2012-06-21",
                  message: bool = True) -> Path:
    """orderbook_N.csv (+ message_N.csv) for the first `levels` levels of `rec` (prices in 1e-9 units)."""
    base = f"{ticker}_{day}_34200000_57600000"
    cols = []
    for lvl in range(levels):
        ask, bid = rec["ask_px"][:, lvl], rec["bid_px"][:, lvl]
        cols += [np.where(ask == PRICE_UNDEF, 9999999999, ask // 100_000), rec["ask_sz"][:, lvl],
                 np.where(bid == PRICE_UNDEF, -9999999999, bid // 100_000), rec["bid_sz"][:, lvl]]
    book = folder / f"{base}_orderbook_{levels}.csv"
    np.savetxt(book, np.stack(cols, 1).astype(np.int64), fmt="%d", delimiter=",")
    if message:
        seconds = (rec["ts_ns"] % (86400 * 10**9)) / 1e9
        kinds = np.where(rec["trade_count"] > 0, 4, 1)
        with open(folder / f"{base}_message_{levels}.csv", "w") as fh:
            for s, k in zip(seconds, kinds):
                fh.write(f"{s:.9f},{k},1,100,0,1\n")
    return book


__all__ = ["LEVELS", "SHARED_DATA", "dbn_bytes", "write_lobster"]
