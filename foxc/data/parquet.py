"""The pipeline's reader of Databento MBP-10 Parquet/Arrow (memory-mapped, column-projected, batch by batch), and its
writer. Prices are int64 fixed point (1e-9; 2^63 - 1 empty) or float (NaN empty, Databento's `pretty_px`). The time
is `ts_recv`, Databento's index time (`ts_event` can run backwards), else `ts_event` (noted); counts, `action`
(trades: 'T'), `instrument_id`, `flags` and `symbol` (--instrument SYMBOL) when present.

Trades as in a DBN file: a row whose `action` is 'T' is a trade at its `price` and `size` by the aggressor its `side`
names ('A' a seller, 'B' a buyer); feed_delay_ns is ts_recv - ts_event. A file without one of action, side, price
and size says nothing of trades' sides: every row has FLAG_NO_TRADES (noted). The trade columns foxc writes (the
record's own fields, TRADE_COLUMNS), all present, are read as they are: a foxc file's rows are intervals, each of any
number of trades."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .record import FLAG_NO_TRADES, LEVELS, PRICE_SCALE, PRICE_UNDEF, empty_snapshots
from .chunks import BUY, CHUNK_ROWS, SELL, UNKNOWN, feed_delay, fill_trades, new_meta, read_whole, trade_notes
from .select import map_symbol
from .validate import NEGATIVE_SIZE, DataError

SIDES = ("bid", "ask")


def level_columns(kind: str) -> list[str]:
    return [f"{side}_{kind}_{lvl:02d}" for side in SIDES for lvl in range(LEVELS)]


PRICE_COLUMNS = level_columns("px")
SIZE_COLUMNS = level_columns("sz")
COUNT_COLUMNS = level_columns("ct")
TIME_COLUMNS = ("ts_recv", "ts_event")  # the first present is the snapshot's time
REQUIRED = [*PRICE_COLUMNS, *SIZE_COLUMNS]
EVENT = ("action", "side", "price", "size")  # a Databento row's event: a trade where action is 'T'
TRADE_COLUMNS = ("sell_lo_px", "buy_hi_px", "last_px", "sell_lo_vol", "buy_hi_vol", "sell_vol", "buy_vol",
                 "trade_count")  # foxc's: an interval's trades, as the record holds them
OPTIONAL = [*COUNT_COLUMNS, *EVENT, "ts_event", *TRADE_COLUMNS, "instrument_id", "flags", "symbol"]
CODES = {"A": SELL, "B": BUY}  # a trade's side, its aggressor's


def _check_schema(path, schema: pa.Schema) -> tuple[list[str], str]:
    """(the columns to read, the time column)."""
    names = set(schema.names)
    time = next((c for c in TIME_COLUMNS if c in names), None)
    missing = ([] if time else ["ts_recv"]) + [c for c in REQUIRED if c not in names]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DataError(path, f"missing column{more}; not Databento MBP-10 layout", column=missing[0])
    twice = next((c for c in [time, *REQUIRED, *OPTIONAL] if schema.names.count(c) > 1), None)
    if twice:
        raise DataError(path, f"{schema.names.count(twice)} columns of this name: ambiguous, not Databento MBP-10 "
                              "layout", column=twice)
    numeric = lambda t: pa.types.is_integer(t) or pa.types.is_floating(t)  # noqa: E731
    text = lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)  # noqa: E731
    for columns, accepted, expected in (
            ([time], lambda t: pa.types.is_integer(t) or pa.types.is_timestamp(t),  # float seconds: ns of 1970
             "integer ns since the epoch, or a timestamp"),
            (PRICE_COLUMNS, numeric, "integer or float"),
            ([*SIZE_COLUMNS, *COUNT_COLUMNS, "instrument_id", "flags", "price", "size"], numeric, "integer"),
            (["ts_event"], lambda t: pa.types.is_integer(t) or pa.types.is_timestamp(t),
             "integer ns since the epoch, or a timestamp"),
            (TRADE_COLUMNS, pa.types.is_integer, "integer"),
            (["action"], lambda t: text(t.value_type if pa.types.is_dictionary(t) else t),
             "a string, 'T' for a trade, or its integer code"),
            (["side"], lambda t: text(t.value_type if pa.types.is_dictionary(t) else t),
             "a string, 'A', 'B' or 'N', or its integer code")):
        bad = next((c for c in columns if c in names and not accepted(schema.field(c).type)), None)
        if bad:
            raise DataError(path, f"wrong type {schema.field(bad).type} (expected {expected})", column=bad)
    some = [c for c in TRADE_COLUMNS if c in names]
    if some and len(some) < len(TRADE_COLUMNS):
        raise DataError(path, f"missing column: foxc's trade columns come together ({', '.join(TRADE_COLUMNS)}), "
                              f"the file has {', '.join(some)}", column=next(c for c in TRADE_COLUMNS if c not in names))
    return [time] + [c for c in REQUIRED + OPTIONAL if c in names and c != time], time


def _ints(col: pa.Array) -> np.ndarray:
    if pa.types.is_timestamp(col.type):  # of any unit: ns since the epoch
        col = col.cast(pa.timestamp("ns", col.type.tz)).cast(pa.int64())
    if col.null_count:
        col = col.fill_null(0)
    return col.to_numpy(zero_copy_only=False)


FLOAT_UNITS = (-2.0**63, 2.0**63 - 1024)  # the float prices (in units) that fit int64 below PRICE_UNDEF


def _fill_prices(cols: list[pa.Array], out: np.ndarray, bad: np.ndarray):
    """Into out (int64 [m, LEVELS], price units); non-finite floats flagged in `bad`."""
    for lvl, c in enumerate(cols):
        if pa.types.is_floating(c.type):
            x = c.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            finite = np.isfinite(x)
            bad |= np.isinf(x)
            units = np.clip(np.where(finite, x, 0.0) * PRICE_SCALE, *FLOAT_UNITS)  # beyond int64: out of range
            out[:, lvl] = np.where(finite, np.rint(units), 0)
            out[~finite, lvl] = PRICE_UNDEF
        else:
            out[:, lvl] = _ints(c)
            if c.null_count:
                out[c.is_null().to_numpy(zero_copy_only=False), lvl] = PRICE_UNDEF


def _fill_sizes(cols: list[pa.Array], out: np.ndarray, bad: np.ndarray, negative: np.ndarray,
                empty: np.ndarray | None):
    """Into out (uint32 [m, LEVELS]); 0 at empty levels; at set levels, non-finite floats flagged in `bad`, values
    below zero in `negative` (a record's sizes are unsigned: clipped, the row would pass as a book)."""
    for lvl, c in enumerate(cols):
        x = c.to_numpy(zero_copy_only=False) if pa.types.is_floating(c.type) else _ints(c)
        if x.dtype.kind == "f":
            ok = np.isfinite(x)
            bad |= ~ok & (empty is None or ~empty[:, lvl])
            x = np.where(ok, x, 0)
        if x.dtype != np.uint32:
            if x.dtype.kind != "u":
                negative |= (x < 0) & (empty is None or ~empty[:, lvl])
            x = np.clip(x, 0, 2**32 - 1)
        out[:, lvl] = x
    if empty is not None:
        out[empty] = 0


def _open(path: Path) -> tuple[pq.ParquetFile, list[str], str]:
    """(the file, the columns to read, the time column), its schema checked."""
    try:
        pf = pq.ParquetFile(path, memory_map=True)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError, UnicodeDecodeError) as e:  # a damaged footer raises any of them
        raise DataError(path, f"not a Parquet file ({str(e).splitlines()[0]})") from None
    return (pf, *_check_schema(path, schema))


UNREADABLE = (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError)  # damaged data pages raise any of them


def iter_parquet(path, meta: dict, rows: int = CHUNK_ROWS):
    """One Databento MBP-10 Parquet file as (records, bad-float mask) chunks of at most `rows` rows,
    read batch by batch within its row groups; fills `meta` (instrument, instrument_id: None where the file has no
    such column, notes, the symbols' ids)."""
    path = Path(path)
    pf, columns, time = _open(path)
    n = pf.metadata.num_rows
    if n == 0:
        raise DataError(path, "the file holds no rows")
    if time != "ts_recv":
        meta["notes"].append("no ts_recv column: times are ts_event (the exchange's, which may run backwards)")
    has_ct = all(c in columns for c in COUNT_COLUMNS)
    if not has_ct:
        meta["notes"].append("no bid_ct/ask_ct columns: order counts are 0")
    if "action" not in columns:
        meta["notes"].append("no action column: trade_count is 0")
    trades = "own" if TRADE_COLUMNS[0] in columns else "events" if all(c in columns for c in EVENT) else "none"
    if trades == "none":
        missing = [c for c in EVENT if c not in columns]
        unknown = "" if missing == ["side"] else "no trade prices; "
        meta["notes"].append(f"no {' or '.join(missing)} column: trades' sides are unknown ({unknown}every row "
                             "FLAG_NO_TRADES): resting orders fill only when the opposite touch moves through them")
    seen = {"unknown": 0, "late": 0}
    numbered = "symbol" in columns and "instrument_id" not in columns  # its symbols stand for ids (_symbols)
    row = 0
    batches = pf.iter_batches(batch_size=rows, columns=columns, use_threads=True)
    while True:
        try:
            batch = next(batches, None)
            if batch is None:
                break
            if batch.column(time).null_count:  # not 0 (1970): the row has no time at all
                at = int(np.flatnonzero(batch.column(time).is_null().to_numpy(zero_copy_only=False))[0])
                raise DataError(path, "missing value", row=row + at, column=time)
            rec, bad = _convert(batch, columns, time, has_ct, trades, seen)
            if "symbol" in columns and len(rec):
                _symbols(batch.column("symbol"), rec["instrument_id"], meta, numbered)
        except UNREADABLE as e:
            raise DataError(path, f"unreadable Parquet data after row {row} ({str(e).splitlines()[0]})") from None
        if row == 0:
            meta["instrument_id"] = None if numbered else int(rec["instrument_id"][0]) if len(rec) else 0
            if "symbol" in columns and len(rec):
                meta["instrument"] = str(batch.column("symbol")[0].as_py() or "")
        row += len(rec)
        yield rec, bad
    if row != n:
        raise DataError(path, f"truncated: metadata promises {n} rows, read {row}", row=row)
    meta["notes"] += trade_notes("side not A or B", seen["unknown"], seen["late"])


SYMBOL_ROWS = 1 << 20  # rows of the two columns parquet_symbols reads at a time (8 MB of ids and indices)


def parquet_symbols(path) -> dict:
    """The file's symbols and the ids they name, as iter_parquet's `meta` holds them once the file is read, from its
    `symbol` and `instrument_id` columns alone (none without `symbol`): what refuses an unknown --instrument SYMBOL
    before the rows are read (select.Selection.known)."""
    path = Path(path)
    pf, columns, _ = _open(path)
    meta, numbered = new_meta(), "instrument_id" not in columns
    if "symbol" not in columns:
        return meta
    meta["instrument_id"] = None if numbered else 0  # messages name the symbols of a file without ids
    row = 0
    try:
        for batch in pf.iter_batches(batch_size=SYMBOL_ROWS, columns=[c for c in ("symbol", "instrument_id")
                                                                      if c in columns]):
            ids = np.zeros(batch.num_rows, np.uint32) if numbered else \
                _ints(batch.column("instrument_id")).astype(np.uint32)  # as SNAPSHOT_DTYPE's field holds it
            if len(ids):
                _symbols(batch.column("symbol"), ids, meta, numbered)
            row += len(ids)
    except UNREADABLE as e:
        raise DataError(path, f"unreadable Parquet data after row {row} ({str(e).splitlines()[0]})") from None
    return meta


def _symbols(symbols: pa.Array, ids: np.ndarray, meta: dict, numbered: bool):
    """The (symbol, id) pairs of a batch's rows into `meta` (select.map_symbol). In a file without instrument_id
    (`numbered`), a row's id is its symbol's number, from 0 in the order they come: the key of segments and of
    interleaving, as ids are; messages name the symbols, and FileStream writes 0, no id."""
    enc = symbols if pa.types.is_dictionary(symbols.type) else pc.dictionary_encode(symbols)
    names = [str(s or "") for s in enc.dictionary.to_pylist()] + [""]  # "": a row without a symbol
    idx = enc.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False).astype(np.uint64)
    if numbered:
        number, (used, first) = np.zeros(len(names), np.uint32), np.unique(idx, return_index=True)
        for i in used[np.argsort(first)].tolist():
            number[i] = meta["symbol_ids"].get(names[i], [len(meta["symbol_ids"])])[0]
            map_symbol(meta, names[i], int(number[i]))
        ids[:] = number[idx]
        return
    key = idx << np.uint64(32) | ids
    if (key == key[0]).all() and int(ids[0]) in meta["symbol_ids"].get(names[int(idx[0])], ()):
        return
    unique, first = np.unique(key, return_index=True)
    for k in unique[np.argsort(first)].tolist():
        if names[k >> 32]:  # a row without a symbol names nothing
            map_symbol(meta, names[k >> 32], k & 0xFFFFFFFF)


def _convert(batch: pa.RecordBatch, columns: list[str], time: str, has_ct: bool, trades: str,
             seen: dict) -> tuple[np.ndarray, np.ndarray]:
    """One batch as (records, flags: a bad-float mask, or validate's codes where a size is below zero); `trades`:
    from foxc's own columns ("own"), Databento's rows ("events"), or none; `seen` counts sideless trades and rows
    without a feed delay."""
    m = batch.num_rows
    rec = empty_snapshots(m)  # every field set: the trade fields say none until the columns give them
    bad, negative = np.zeros(m, bool), np.zeros(m, bool)
    get = batch.column
    rec["ts_ns"] = _ints(get(time))
    rec["prev_ts_ns"] = 0
    for side in SIDES:
        px = rec[f"{side}_px"]
        _fill_prices([get(f"{side}_px_{lvl:02d}") for lvl in range(LEVELS)], px, bad)
        empty = px == PRICE_UNDEF
        empty = empty if empty.any() else None
        _fill_sizes([get(f"{side}_sz_{lvl:02d}") for lvl in range(LEVELS)], rec[f"{side}_sz"], bad, negative,
                    empty)
        if has_ct:
            _fill_sizes([get(f"{side}_ct_{lvl:02d}") for lvl in range(LEVELS)], rec[f"{side}_ct"], bad,
                        negative, empty)
        else:
            rec[f"{side}_ct"] = 0
    trade = _codes(get("action"), {"T": 1}) == 1 if "action" in columns else np.zeros(m, bool)
    rec["trade_count"] = trade
    if trades == "own":
        for name in TRADE_COLUMNS:
            x = _ints(get(name))
            if name.endswith("_px"):
                rec[name] = x  # a null: 0, out of range where it is a trade's
            else:
                negative |= x < 0
                rec[name] = np.clip(x, 0, 2**32 - 1)
    elif "price" in columns and "size" in columns:
        price = np.empty((m, 1), np.int64)
        _fill_prices([get("price")], price, np.zeros(m, bool))  # an infinite price: none
        size = get("size")
        size = np.nan_to_num(size.to_numpy(zero_copy_only=False)) if pa.types.is_floating(size.type) else _ints(size)
        negative |= trade & (size < 0)
        side = _codes(get("side"), CODES) if "side" in columns else np.zeros(m, np.int8)
        fill_trades(rec, trade, price[:, 0], np.clip(size, 0, 2**32 - 1).astype(np.uint32), side)
        seen["unknown"] += int(np.count_nonzero(trade & (side == UNKNOWN)))
    if "ts_event" in columns:
        event = get("ts_event")
        untimed = event.is_null().to_numpy(zero_copy_only=False) if event.null_count else None
        event = _ints(event)
        if untimed is not None:
            event = np.where(untimed, -1, event.astype(np.int64, copy=False)) if event.dtype.kind == "i" else \
                np.where(untimed, np.iinfo(np.uint64).max, event)
        rec["feed_delay_ns"], late = feed_delay(rec["ts_ns"], event)
        seen["late"] += late
    rec["segment"] = 0
    rec["flags"] = _ints(get("flags")) if "flags" in columns else 0
    if trades == "none":
        rec["flags"] |= FLAG_NO_TRADES
    rec["instrument_id"] = _ints(get("instrument_id")) if "instrument_id" in columns else 0
    if not negative.any():
        return rec, bad
    flags = bad.astype(np.uint8)  # validate.skip_reasons' codes: 1 nan_or_inf
    flags[negative] = NEGATIVE_SIZE
    return rec, flags


def _codes(col: pa.Array, codes: dict[str, int]) -> np.ndarray:
    """A one-letter column (strings, dictionary, or the letters' integer codes) as `codes`' values, 0 for others."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    out = np.zeros(len(col), np.int8)
    if pa.types.is_integer(col.type):
        x = _ints(col)
        for letter, code in codes.items():
            out[x == ord(letter)] = code
        return out
    for letter, code in codes.items():
        out[pc.equal(col, letter).fill_null(False).to_numpy(zero_copy_only=False)] = code
    return out


def read_parquet(path) -> tuple[np.ndarray, np.ndarray, dict]:
    """(records, bad-float mask, metadata) of a whole file: iter_parquet's chunks joined (tests, benchmarks)."""
    return read_whole(iter_parquet, path)


def write_parquet(path, rec: np.ndarray, symbol: str = "SYNTH", publisher_id: int = 1,
                  compression: str = "zstd", row_group_rows: int = 1 << 20):
    """Write records in the Databento MBP-10 Parquet layout (fixed-point prices, uint64 ns times, ts_event the
    receive time less the feed delay) with foxc's trade columns (TRADE_COLUMNS) and flags as uint32 (FLAG_NO_TRADES
    is past Databento's byte): read back, every field but prev_ts_ns and segment (load() sets those) is the record's.
    action/side/price/size say each interval's trades as one row can: 'T' at the last price, of the interval's
    volume, by the side that traded (N where both or neither did)."""
    n = len(rec)
    trade = rec["trade_count"] > 0
    sell, buy = rec["sell_vol"] > 0, rec["buy_vol"] > 0
    cols: dict[str, pa.Array] = {
        "ts_recv": pa.array(rec["ts_ns"].astype(np.uint64)),
        "ts_event": pa.array((rec["ts_ns"] - rec["feed_delay_ns"]).astype(np.uint64)),
        "rtype": pa.array(np.full(n, 10, np.uint8)),
        "publisher_id": pa.array(np.full(n, publisher_id, np.uint16)),
        "instrument_id": pa.array(rec["instrument_id"]),
        "action": pa.array(np.where(trade, "T", "A")),
        "side": pa.array(np.where(trade & sell & ~buy, "A", np.where(trade & buy & ~sell, "B", "N"))),
        "depth": pa.array(np.zeros(n, np.uint8)),
        "price": pa.array(np.where(trade, rec["last_px"], PRICE_UNDEF)),
        "size": pa.array(np.where(trade, np.minimum(rec["sell_vol"].astype(np.uint64) + rec["buy_vol"], 2**32 - 1),
                                  0).astype(np.uint32)),
        "flags": pa.array(rec["flags"].astype(np.uint32)),
        "ts_in_delta": pa.array(np.zeros(n, np.int32)),
        "sequence": pa.array(np.arange(n, dtype=np.uint32)),
        **{name: pa.array(rec[name]) for name in TRADE_COLUMNS},
    }
    for lvl in range(LEVELS):
        for kind in ("px", "sz", "ct"):
            for side in SIDES:
                cols[f"{side}_{kind}_{lvl:02d}"] = pa.array(rec[f"{side}_{kind}"][:, lvl])
    cols["symbol"] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([symbol]))
    pq.write_table(pa.table(cols), path, compression=compression, row_group_size=row_group_rows)
