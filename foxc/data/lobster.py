"""LOBSTER order books: `orderbook_N.csv` (N = 1..10) with the matching `message_N.csv`.

An order-book file has no header and 4·N columns, per level: ask price, ask size, bid price,
bid size; prices are dollars × 10,000 (converted to foxc's ×1e9 by × 100,000, exactly);
an empty level has a dummy price (9999999999 for an ask, -9999999999 for a bid) and size 0.
Levels beyond N are empty. The message file's first column is the event time in seconds
after midnight; its second the event type (4 and 5 are executions, counted as trades).

Times. A file named LOBSTER's way, `TICKER_YYYY-MM-DD_<start ms>_<end ms>_orderbook_N.csv`,
gives the date and the session (ms after midnight: 34200000 = 09:30). LOBSTER's times are New
York wall-clock times (America/New_York, DST-aware: zoneinfo, with the `tzdata` package where
the system has no tz database) and are stored as ns since the Unix epoch, UTC: 09:30 on
2012-06-21 (EDT) is 13:30 UTC, on 2012-01-03 (EST) 14:30 UTC. The offset is the one in force
at each hour of that date, so a DST change (02:00, a Sunday) falls where it should. Without
the message file the rows are numbered from the session start, a fixed 1 µs apart (row order
only: no pretence of spreading them over the session). A file named otherwise keeps times as
ns after midnight, with no date and no time zone (rows numbered from midnight, 1 µs apart,
without a message file). Every choice is written in the file's notes in the validation report.
"""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .record import LEVELS, PRICE_UNDEF, SNAPSHOT_DTYPE
from .validate import DataError

LOBSTER_TO_UNITS = 100_000  # 1e9 / 1e4
DUMMY_ASK = 9_999_999_999
DUMMY_BID = -9_999_999_999
TRADE_TYPES = (4, 5)
NAME = re.compile(r"^(?P<ticker>[^_]+)_(?P<date>\d{4}-\d{2}-\d{2})_(?P<start>\d+)_(?P<end>\d+)"
                  r"_orderbook_(?P<n>\d+)\.csv$")
TIME_ZONE = "America/New_York"
NS_PER_HOUR = 3600 * 10**9
NS_PER_DAY = 24 * NS_PER_HOUR
ROW_SPACING_NS = 1000  # rows without a message file: 1 µs apart
ANY_ORDERBOOK = re.compile(r"orderbook_(?P<n>\d+)\.csv$")


def is_lobster(path) -> bool:
    return bool(ANY_ORDERBOOK.search(Path(path).name))


def message_path(path: Path) -> Path:
    return path.with_name(re.sub(r"orderbook_(\d+)\.csv$", r"message_\1.csv", path.name))


def new_york_to_utc_ns(day: date, ns_after_midnight: np.ndarray) -> np.ndarray:
    """ns since the Unix epoch (UTC) of New York wall-clock times given as ns after midnight of `day`.

    Each hour of the day takes the UTC offset in force at its start (zoneinfo, fold=0), so a
    DST change at 02:00 falls where it should; a time in the hour that does not exist (spring)
    reads as before the change, one in the hour that repeats (autumn) as its first occurrence.
    """
    try:
        tz = ZoneInfo(TIME_ZONE)
    except ZoneInfoNotFoundError:  # tzdata is a dependency: only a broken install gets here
        raise RuntimeError(f"no tz database entry for {TIME_ZONE}: pip install tzdata") from None
    offsets = np.array([datetime(day.year, day.month, day.day, h, tzinfo=tz).utcoffset() // timedelta(microseconds=1)
                        * 1000 for h in range(24)], np.int64)
    ns = np.asarray(ns_after_midnight, np.int64)
    wall = (day - date(1970, 1, 1)).days * NS_PER_DAY + ns
    return wall - offsets[np.clip(ns // NS_PER_HOUR, 0, 23)]


def _clock(ns: int) -> str:
    """hh:mm:ss.fff of ns after midnight."""
    ms = ns // 10**6
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def _read_csv(path: Path, what: str) -> pa.Table:
    if path.stat().st_size == 0:
        raise DataError(path, f"the {what} file is empty")
    try:
        return pacsv.read_csv(path, read_options=pacsv.ReadOptions(autogenerate_column_names=True,
                                                                   block_size=1 << 24))
    except (pa.ArrowInvalid, UnicodeDecodeError) as e:
        raise DataError(path, f"not a LOBSTER {what} CSV ({str(e).splitlines()[0]})") from None


def _int_column(path: Path, table: pa.Table, index: int, kind: str = "integer") -> np.ndarray:
    col = table.column(index)
    if kind == "integer" and not pa.types.is_integer(col.type):
        raise DataError(path, f"wrong type {col.type} (expected integer)", column=f"#{index + 1}")
    if kind == "number" and not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise DataError(path, f"wrong type {col.type} (expected a number)", column=f"#{index + 1}")
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError(path, "missing value", row=row + 1, column=f"#{index + 1}")
    return col.to_numpy()


def read_lobster(path) -> tuple[np.ndarray, None, dict]:
    """(records, None, metadata) for one LOBSTER order-book file (and its message file if present)."""
    path = Path(path)
    found = ANY_ORDERBOOK.search(path.name)
    if not found or not 1 <= int(found["n"]) <= LEVELS:
        raise DataError(path, f"not a LOBSTER orderbook_N.csv name with N in 1..{LEVELS}")
    levels = int(found["n"])
    book = _read_csv(path, "order-book")
    if book.num_columns != 4 * levels:
        raise DataError(path, f"{book.num_columns} columns, expected {4 * levels} for {levels} levels")
    n = book.num_rows
    if n == 0:
        raise DataError(path, "the file holds no rows")
    rec = np.zeros(n, SNAPSHOT_DTYPE)
    rec["bid_px"] = PRICE_UNDEF
    rec["ask_px"] = PRICE_UNDEF
    for lvl in range(levels):
        for side, col, dummy in (("ask", 4 * lvl, DUMMY_ASK), ("bid", 4 * lvl + 2, DUMMY_BID)):
            px = _int_column(path, book, col)
            sz = _int_column(path, book, col + 1)
            empty = (px >= DUMMY_ASK) | (px <= DUMMY_BID) | (px == dummy)
            rec[f"{side}_px"][:, lvl] = np.where(empty, PRICE_UNDEF, px * LOBSTER_TO_UNITS)
            rec[f"{side}_sz"][:, lvl] = np.where(empty, 0, np.clip(sz, 0, 2**32 - 1))
    meta = {"instrument": "", "instrument_id": 0, "notes": []}
    named = NAME.match(path.name)
    if named:
        meta["instrument"] = named["ticker"]
        try:
            day = date.fromisoformat(named["date"])
        except ValueError:
            raise DataError(path, f"the date {named['date']} in the file name is not a calendar date") from None
        to_ns = lambda ns: new_york_to_utc_ns(day, ns)
        meta["notes"].append(f"times: {TIME_ZONE} local, stored as UTC ns")
    else:
        to_ns = lambda ns: ns
        meta["notes"].append("file name does not follow LOBSTER's naming (TICKER_YYYY-MM-DD_start_end_orderbook_N"
                             ".csv): times are ns after midnight, no date or time zone applied")
    msg_path = message_path(path)
    if msg_path.is_file():
        msg = _read_csv(msg_path, "message")
        if msg.num_rows != n:
            raise DataError(msg_path, f"{msg.num_rows} rows, but the order-book file has {n}")
        if msg.num_columns < 2:
            raise DataError(msg_path, f"{msg.num_columns} columns, expected at least 6")
        seconds = _int_column(msg_path, msg, 0, "number").astype(np.float64)
        if not np.all(np.isfinite(seconds)):
            row = int(np.flatnonzero(~np.isfinite(seconds))[0])
            raise DataError(msg_path, "time is NaN or infinite", row=row + 1, column="#1")
        rec["ts_ns"] = to_ns(np.rint(seconds * 1e9).astype(np.int64))
        rec["trade_count"] = np.isin(_int_column(msg_path, msg, 1, "number"), TRADE_TYPES)
    else:
        start = int(named["start"]) * 10**6 if named else 0
        rec["ts_ns"] = to_ns(start + np.arange(n, dtype=np.int64) * ROW_SPACING_NS)
        if named:
            utc = datetime.fromtimestamp(int(rec["ts_ns"][0]) // 10**9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            session = f"{_clock(start)}-{_clock(int(named['end']) * 10**6)}"
            meta["notes"].append(f"no message file ({msg_path.name}): timestamps are row order, 1 us apart from the "
                                 f"session start {_clock(start)} {TIME_ZONE} ({utc} UTC; the name's session "
                                 f"{session}); no trades counted")
        else:
            meta["notes"].append(f"no message file ({msg_path.name}): timestamps are row order, 1 us apart "
                                 f"from midnight; no trades counted")
    return rec, None, meta
