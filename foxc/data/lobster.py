"""The pipeline's reader of LOBSTER order books: `orderbook_N.csv` (N = 1..10) with its `message_N.csv`.

A book file has no header and 4·N columns, per level ask price, ask size, bid price, bid size; prices are dollars ×
10,000 (× 100,000 to foxc's ×1e9, exactly); an empty level has a dummy price (±9999999999) and size 0. The message
file's columns are the time in seconds after midnight, the event type, order id, size, price and direction; types 4
and 5 (a visible, a hidden limit order executed) are trades at the message's price and size, and the direction is
the resting order's side (1: a buy order executed, so the seller was the aggressor; -1: the buyer), except for a
hidden order's from 2014-07-14 on, always 1 (NASDAQ masks it; LOBSTER's help), and in a file of no date. One clock:
feed_delay_ns is 0. Without a message file no trade is known: every row has FLAG_NO_TRADES.
A file named `TICKER_YYYY-MM-DD_<start ms>_<end ms>_orderbook_N.csv` gives the date and session: its times are New
York wall-clock times (zoneinfo, DST-aware) stored as UTC ns; a file named otherwise keeps ns after midnight.
Without a message file the rows are 1 µs apart from the session start (row order only). Each choice is a note in
the report. Both files are parsed a block at a time, in step; a value that does not fit its column's type (the
first block's) or a row of the wrong field count is refused naming the row. A size below zero at a priced level
(or an execution's) is a skipped row, `negative_size`."""
from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .record import FLAG_NO_TRADES, LEVELS, PRICE_UNDEF, empty_snapshots
from .chunks import BUY, CHUNK_ROWS, SELL, UNKNOWN, fill_trades, read_whole, trade_notes
from .validate import NEGATIVE_SIZE, DataError

LOBSTER_TO_UNITS = 100_000  # 1e9 / 1e4
DUMMY_ASK = 9_999_999_999
DUMMY_BID = -9_999_999_999
TRADE_TYPES = (4, 5)
MESSAGE_COLUMNS = 6  # time, type, order id, size, price, direction
SIZE, PRICE, DIRECTION = 3, 4, 5  # the message file's columns of a trade
AGGRESSOR = {1: SELL, -1: BUY}  # by the direction: the resting order's side
HIDDEN = 5
MASKED_FROM = date(2014, 7, 14)  # from this day NASDAQ's feed says 1 (buy) for every hidden order executed (LOBSTER)
NO_TRADES = "no trades: resting orders fill only when the opposite touch moves through them"
NAME = re.compile(r"^(?P<ticker>[^_]+)_(?P<date>\d{4}-\d{2}-\d{2})_(?P<start>\d+)_(?P<end>\d+)"
                  r"_orderbook_(?P<n>\d+)\.csv$")
TIME_ZONE = "America/New_York"
NS_PER_HOUR = 3600 * 10**9
NS_PER_DAY = 24 * NS_PER_HOUR
MAX_SECONDS = 2.0**62 / 1e9  # message times (s after midnight) whose ns, and the date's, fit int64
ROW_SPACING_NS = 1000  # rows without a message file: 1 µs apart
CSV_BLOCK_BYTES = 1 << 24  # arrow parses this much CSV at a time (the first block also sets the column types)
HEADER_PEEK_BYTES = 4096  # of the first line, to tell a header from a row
ANY_ORDERBOOK = re.compile(r"orderbook_(?P<n>\d+)\.csv$")


def is_lobster(path) -> bool:
    return bool(ANY_ORDERBOOK.search(Path(path).name))


def message_path(path: Path) -> Path:
    return path.with_name(re.sub(r"orderbook_(\d+)\.csv$", r"message_\1.csv", path.name))


def new_york_to_utc_ns(day: date, ns_after_midnight: np.ndarray) -> np.ndarray:
    """UTC ns of New York wall-clock times (ns after midnight of `day`): each hour takes the offset in force at its
    start (fold=0), so a time in the hour that does not exist reads as before the change, one in the hour that
    repeats as its first occurrence."""
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


def _csv(path: Path, what: str, column_types: dict | None = None):
    """The CSV's record batches, parsed a block at a time (column types inferred from the first block)."""
    if path.stat().st_size == 0:
        raise DataError(path, f"the {what} file is empty")
    problem = (pa.ArrowInvalid, UnicodeDecodeError)
    try:
        reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(autogenerate_column_names=True,
                                                                     block_size=CSV_BLOCK_BYTES),
                                convert_options=pacsv.ConvertOptions(column_types=column_types or {}))
    except problem as e:
        _refuse_header(path)  # a header's words in a column of numbers (the message file's times)
        raise _not_csv(path, what, e, 0) from None

    def batches():
        done = 0  # rows read
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except problem as e:
                raise _not_csv(path, what, e, done) from None
            done += batch.num_rows
            yield batch
    return reader.schema, batches()


CONVERSION = re.compile(r"In CSV column #(?P<col>\d+): CSV conversion error to \w+: invalid value '(?P<value>.*)'$")
COLUMNS = re.compile(r"CSV parse error: Expected \d+ columns, got (?P<got>\d+)")
INTEGER = re.compile(r"[+-]?\d+")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf|infinity)", re.IGNORECASE)


def _not_csv(path: Path, what: str, exc: Exception, done: int) -> DataError:
    """Arrow's refusal of a block as a DataError naming the row it failed at (found again in the text after `done`)."""
    first = str(exc).splitlines()[0]
    row = column = None
    if found := CONVERSION.match(first):
        col, value = int(found["col"]), found["value"]
        row, column = _row_where(path, done, lambda f: len(f) > col and f[col] == value), f"#{col + 1}"
    elif found := COLUMNS.match(first):
        row = _row_where(path, done, lambda f: len(f) == int(found["got"]))
    return DataError(path, f"not a LOBSTER {what} CSV ({first})", row=row, column=column)


def _row_where(path: Path, done: int, wrong) -> int | None:
    """The number (from 1, blank lines none, as arrow counts) of the first row after `done` that `wrong` finds wrong."""
    row = 0
    with path.open("rb") as f:
        for line in f:
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if row == 0:
                text = text.lstrip("\ufeff")
            if not text:
                continue
            row += 1
            if row > done and wrong(text.split(",")):
                return row
    return None


def _check_type(path: Path, schema: pa.Schema, index: int, number: bool = False):
    """Column `index` holds integers (or, with `number`, floats too)."""
    t = schema.field(index).type
    if not (pa.types.is_integer(t) or number and pa.types.is_floating(t)):
        _refuse_header(path)
        shape = NUMBER if number else INTEGER  # the first block's rows: the first of them that is not one
        row = _row_where(path, 0, lambda f: len(f) > index and f[index] != "" and not shape.fullmatch(f[index]))
        raise DataError(path, f"wrong type {t} (expected {'a number' if number else 'integer'})", row=row,
                        column=f"#{index + 1}")


def _refuse_header(path: Path):
    """Refuse a first line of which no field is a number: LOBSTER files have no header."""
    with path.open("rb") as f:
        line = f.readline(HEADER_PEEK_BYTES).decode("utf-8", "replace").lstrip("\ufeff").strip()
    fields = [x.strip() for x in line.split(",")]
    if any(fields) and not any(NUMBER.fullmatch(x) for x in fields):
        shown = line if len(line) <= 80 else line[:80] + "…"
        raise DataError(path, f"a header line ({shown}): LOBSTER files have none (remove it)", row=1)


def _column(path: Path, batch: pa.RecordBatch, index: int, first_row: int) -> np.ndarray:
    """A column of a batch whose rows start at `first_row` of the file; a missing value is refused."""
    col = batch.column(index)
    if col.null_count:
        row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise DataError(path, "missing value", row=first_row + row + 1, column=f"#{index + 1}")
    return col.to_numpy(zero_copy_only=False)


def _pieces(batches, rows: int):
    """Batches cut into pieces of at most `rows` rows (zero-copy slices)."""
    for batch in batches:
        for i in range(0, batch.num_rows, rows):
            yield batch.slice(i, rows)


def _in_step(book, messages, rows: int, msg_path: Path):
    """(book rows, message rows) pieces of the same rows of both files; files of different lengths are refused."""
    book, messages = _pieces(book, rows), _pieces(messages, rows)
    b = m = None
    done = 0
    while True:  # _pieces yields no empty piece: one `next` refills a side
        if b is None or not b.num_rows:
            b = next(book, None)
        if m is None or not m.num_rows:
            m = next(messages, None)
        if b is None or m is None:
            break
        k = min(b.num_rows, m.num_rows)
        yield b.slice(0, k), m.slice(0, k)
        b, m, done = b.slice(k), m.slice(k), done + k
    n_book = done + (b.num_rows if b is not None else 0) + sum(p.num_rows for p in book)
    n_msg = done + (m.num_rows if m is not None else 0) + sum(p.num_rows for p in messages)
    if n_book and n_msg != n_book:
        raise DataError(msg_path, f"{n_msg} rows, but the order-book file has {n_book}")


def iter_lobster(path, meta: dict, rows: int = CHUNK_ROWS):
    """One LOBSTER order-book file and its message file as (records, flags) chunks of at most `rows` rows."""
    path = Path(path)
    found = ANY_ORDERBOOK.search(path.name)
    if not found or not 1 <= int(found["n"]) <= LEVELS:
        raise DataError(path, f"not a LOBSTER orderbook_N.csv name with N in 1..{LEVELS}")
    levels = int(found["n"])
    schema, book = _csv(path, "order-book")
    if len(schema) != 4 * levels:
        raise DataError(path, f"{len(schema)} columns, expected {4 * levels} for {levels} levels")
    for col in range(4 * levels):
        _check_type(path, schema, col)
    named = NAME.match(path.name)
    day = None
    if named:
        meta["instrument"] = named["ticker"]
        try:
            day = date.fromisoformat(named["date"])
        except ValueError:
            raise DataError(path, f"the date {named['date']} in the file name is not a calendar date") from None
        to_ns = lambda ns: new_york_to_utc_ns(day, ns)  # noqa: E731
        meta["notes"].append(f"times: {TIME_ZONE} local, stored as UTC ns")
    else:
        to_ns = lambda ns: ns  # noqa: E731
        meta["notes"].append("file name does not follow LOBSTER's naming (TICKER_YYYY-MM-DD_start_end_orderbook_N"
                             ".csv): times are ns after midnight, no date or time zone applied")
    msg_path = message_path(path)
    if msg_path.is_file():
        msg_schema, messages = _csv(msg_path, "message", {"f0": pa.float64()})  # times: seconds, any decimals
        if len(msg_schema) < MESSAGE_COLUMNS:
            raise DataError(msg_path, f"{len(msg_schema)} columns, expected at least {MESSAGE_COLUMNS}")
        _check_type(msg_path, msg_schema, 1, number=True)
        for col in (SIZE, PRICE, DIRECTION):
            _check_type(msg_path, msg_schema, col)
        pieces = _in_step(book, messages, rows, msg_path)
    else:
        start = int(named["start"]) * 10**6 if named else 0
        pieces = ((piece, None) for piece in _pieces(book, rows))
        if named:
            first = int(to_ns(np.array([start]))[0])
            utc = datetime.fromtimestamp(first // 10**9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
            session = f"{_clock(start)}-{_clock(int(named['end']) * 10**6)}"
            meta["notes"].append(f"no message file ({msg_path.name}): timestamps are row order, 1 us apart from the "
                                 f"session start {_clock(start)} {TIME_ZONE} ({utc} UTC; the name's session "
                                 f"{session}); {NO_TRADES}")
        else:
            meta["notes"].append(f"no message file ({msg_path.name}): timestamps are row order, 1 us apart "
                                 f"from midnight; {NO_TRADES}")
    row, unknown = 0, 0
    for piece, msg in pieces:
        rec, flags = _book_records(path, piece, levels, row)
        if msg is not None:
            seconds = _column(msg_path, msg, 0, row)
            if not np.all(np.isfinite(seconds)):
                bad = int(np.flatnonzero(~np.isfinite(seconds))[0])
                raise DataError(msg_path, "time is NaN or infinite", row=row + bad + 1, column="#1")
            if not np.all(np.abs(seconds) < MAX_SECONDS):
                bad = int(np.flatnonzero(~(np.abs(seconds) < MAX_SECONDS))[0])
                raise DataError(msg_path, f"time {seconds[bad]:g} s after midnight is beyond int64 ns",
                                row=row + bad + 1, column="#1")
            rec["ts_ns"] = to_ns(np.rint(seconds * 1e9).astype(np.int64))
            trade = np.isin(_column(msg_path, msg, 1, row), TRADE_TYPES)
            rec["trade_count"] = trade
            negative, sideless = _trades(msg_path, msg, rec, trade, row, day is None or day >= MASKED_FROM)
            unknown += int(np.count_nonzero(sideless))
            if negative.any():
                flags = np.where(negative, NEGATIVE_SIZE, 0 if flags is None else flags).astype(np.uint8)
        else:
            rec["ts_ns"] = to_ns(start + (row + np.arange(len(rec), dtype=np.int64)) * ROW_SPACING_NS)
            rec["flags"] = FLAG_NO_TRADES
        row += len(rec)
        yield rec, flags
    if row == 0:
        raise DataError(path, "the file holds no rows")
    meta["notes"] += trade_notes(f"a direction not 1 or -1, or a hidden order's: NASDAQ masks it from {MASKED_FROM}"
                                 ", and a file of no date may be later", unknown, 0)


def _trades(path: Path, msg: pa.RecordBatch, rec: np.ndarray, trade: np.ndarray, first_row: int,
            masked: bool) -> tuple[np.ndarray, np.ndarray]:
    """The trade fields of a piece's executions (`masked`: a hidden one's direction says nothing, on a day from
    MASKED_FROM or of no known date); per row, whether it is an execution of a size below zero (a skipped row, as a
    book's) and whether it is one of no known side."""
    size, price, direction = (_column(path, msg, col, first_row) for col in (SIZE, PRICE, DIRECTION))
    side = np.select([direction == d for d in AGGRESSOR], list(AGGRESSOR.values()), UNKNOWN)
    if masked:
        side[_column(path, msg, 1, first_row) == HIDDEN] = UNKNOWN
    reach = PRICE_UNDEF // LOBSTER_TO_UNITS - 1  # beyond it, a price in units is out of range, not wrapped
    px = np.clip(np.where(trade, price, 0), -reach, reach).astype(np.int64) * LOBSTER_TO_UNITS
    fill_trades(rec, trade, px, np.clip(np.where(trade, size, 0), 0, 2**32 - 1).astype(np.uint32), side)
    return trade & (size < 0), trade & (side == UNKNOWN)


def _book_records(path: Path, piece: pa.RecordBatch, levels: int,
                  first_row: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Records of an order-book piece (times and trades left 0), and NEGATIVE_SIZE flags (None when none)."""
    rec = empty_snapshots(piece.num_rows)
    negative = np.zeros(piece.num_rows, bool)
    for lvl in range(levels):
        for side, col in (("ask", 4 * lvl), ("bid", 4 * lvl + 2)):
            px = _column(path, piece, col, first_row)
            sz = _column(path, piece, col + 1, first_row)
            empty = (px >= DUMMY_ASK) | (px <= DUMMY_BID)  # either side's dummy price
            negative |= (sz < 0) & ~empty  # an empty level's size is not read
            rec[f"{side}_px"][:, lvl] = np.where(empty, PRICE_UNDEF, px * LOBSTER_TO_UNITS)
            rec[f"{side}_sz"][:, lvl] = np.where(empty, 0, np.clip(sz, 0, 2**32 - 1))
    return rec, (np.where(negative, NEGATIVE_SIZE, 0).astype(np.uint8) if negative.any() else None)


def read_lobster(path) -> tuple[np.ndarray, None, dict]:
    """(records, None, metadata) of a whole file: iter_lobster's chunks joined (tests)."""
    return read_whole(iter_lobster, path)
