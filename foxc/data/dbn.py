"""The pipeline's reader of Databento DBN files (`.dbn`, `.dbn.zst`, versions 1-3): MBP-10 records decoded with numpy.

Layout (the `dbn` crate's `decode/dbn/fsm.rs`, `record.rs`, `compat.rs`), little-endian:
  prelude   b"DBN", version u8, metadata length u32
  metadata  dataset char[16], schema u16, start, end, limit u64, [v1: record_count u64], stype_in u8, stype_out u8,
            ts_out u8, [v2+: symbol_cstr_len u16], reserved (v1: 47 bytes, v2+: 53), schema_definition_length u32
            (+ its bytes), symbols, partial, not_found (count u32, then cstrs), mappings (count u32, each raw_symbol,
            interval count u32, intervals {start_date u32, end_date u32 (YYYYMMDD), symbol})
  records   header {length u8 (4-byte words), rtype u8, publisher_id u16, instrument_id u32, ts_event u64}; MBP-10
            (rtype 0x0A, 368 bytes) then price i64, size u32, action, side, flags, depth, ts_recv u64, ts_in_delta
            i32, sequence u32, 10 × {bid_px, ask_px i64, bid_sz, ask_sz, bid_ct, ask_ct u32} (+ u64 with ts_out).
            A live stream's symbol mappings are records (rtype 0x16; v1 symbols char[22], v2+ char[71]) mapping the
            header's instrument_id from start_ts to before end_ts, in the rows after them.
A row whose action is 'T' is a trade at its price and size, by the aggressor its side names ('A' a seller, 'B' a
buyer, 'N' not said: counted, noted); feed_delay_ns is ts_recv - ts_event (0, counted, where that is below zero).
The file is read (and decompressed) a bounded block at a time: a block of only MBP-10 records is one strided numpy
view, one that mixes record types is walked header by header."""
from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path

import numpy as np

from .record import LEVELS, SNAPSHOT_DTYPE
from .chunks import BUY, CHUNK_ROWS, SELL, UNKNOWN, feed_delay, fill_trades, read_whole, trade_notes
from .select import map_symbol
from .validate import DataError

MAGIC = b"DBN"
MAX_VERSION = 3
RTYPE_MBP10 = 0x0A
RTYPE_SYMBOL_MAPPING = 0x16
MAPPING_V1, MAPPING = (22, 16, 38, 80), (71, 17, 89, 176)  # symbol length, stype_in_symbol, stype_out_symbol, size
SCHEMA_MBP10 = 2
SCHEMA_NULL = 0xFFFF
MBP10_BYTES = 368
ZSTD_MAGIC = 0xFD2FB528
ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)
MAX_METADATA = 1 << 30
UNDEF_TIMESTAMP, MAX_NS = 2**64 - 1, 2**63 - 1  # Databento's undefined time; the last int64 ns
META_FIXED = 104  # the metadata's fields up to schema_definition_length (any version): what read_metadata reads
EPOCH, DAY_NS = dt.date(1970, 1, 1), 86_400 * 10**9

_LEVEL = np.dtype([("bid_px", "<i8"), ("ask_px", "<i8"), ("bid_sz", "<u4"), ("ask_sz", "<u4"),
                   ("bid_ct", "<u4"), ("ask_ct", "<u4")])
MBP10_DTYPE = np.dtype([
    ("length", "u1"), ("rtype", "u1"), ("publisher_id", "<u2"), ("instrument_id", "<u4"), ("ts_event", "<u8"),
    ("price", "<i8"), ("size", "<u4"), ("action", "S1"), ("side", "S1"), ("flags", "u1"), ("depth", "u1"),
    ("ts_recv", "<u8"), ("ts_in_delta", "<i4"), ("sequence", "<u4"), ("levels", _LEVEL, (LEVELS,)),
])
assert MBP10_DTYPE.itemsize == MBP10_BYTES


READ_BYTES = 1 << 20  # zstd input (or plain file bytes) taken per read


def _zstd_pieces(path: Path, fh):
    """The decompressed bytes of a zstd file, frame by frame: a file that ends inside a frame is refused (a
    streaming decompressor across frames would drop the frame's tail silently)."""
    try:
        import zstandard
    except ImportError:
        raise DataError(path, "zstd-compressed DBN needs the 'zstandard' package") from None
    zstd = zstandard.ZstdDecompressor()
    frame, data = None, b""
    try:
        while True:
            data = data or fh.read(READ_BYTES)
            if not data:
                break
            frame = frame or zstd.decompressobj()
            out = frame.decompress(data)
            data = b""
            if frame.eof:  # the frame ended inside this input: the rest starts the next one
                data, frame = frame.unused_data, None
            if out:
                yield out
    except zstandard.ZstdError as e:
        raise DataError(path, f"corrupt or truncated zstd stream ({e})") from None
    if frame is not None:
        raise DataError(path, "corrupt or truncated zstd stream (the file ends inside a frame)")


class _Bytes:
    """A DBN file's bytes (decompressed), read in order; `offset` counts the bytes handed out."""

    def __init__(self, pieces):
        self.pieces, self.held, self.offset = pieces, bytearray(), 0

    def read(self, n: int) -> bytes:
        """The next n bytes, fewer only at the end of the file."""
        while len(self.held) < n:
            piece = next(self.pieces, None)
            if piece is None:
                break
            self.held += piece
        out = bytes(self.held[:n])
        del self.held[:n]
        self.offset += len(out)
        return out

    def size(self) -> int:
        """The file's whole (decompressed) size, reading what is left (only to name it in an error)."""
        while self.read(READ_BYTES):
            pass
        return self.offset


def _open(path: Path, fh) -> _Bytes:
    head = fh.read(4)
    fh.seek(0)
    if len(head) == 4 and (struct.unpack("<I", head)[0] == ZSTD_MAGIC or
                           struct.unpack("<I", head)[0] in ZSTD_SKIPPABLE):
        return _Bytes(_zstd_pieces(path, fh))
    if not head:
        raise DataError(path, "the file is empty")
    return _Bytes(iter(lambda: fh.read(READ_BYTES), b""))


def read_metadata(path, stream: _Bytes) -> dict:
    """The metadata at the start of the stream; leaves it at the first record."""
    prelude = stream.read(8)
    if len(prelude) < 8 or prelude[:3] != MAGIC:
        raise DataError(path, "not a DBN file (no 'DBN' magic at the start)")
    version = prelude[3]
    if not 1 <= version <= MAX_VERSION:
        raise DataError(path, f"DBN version {version} is not supported (1-{MAX_VERSION})")
    (length,) = struct.unpack_from("<I", prelude, 4)
    meta = stream.read(length) if META_FIXED <= length <= MAX_METADATA else b""
    if len(meta) < length or not meta:
        raise DataError(path, f"truncated or corrupt DBN metadata (length {length}, file {stream.size()} bytes)")
    dataset = meta[:16].split(b"\0", 1)[0].decode("ascii", "replace")
    schema, start, end = struct.unpack_from("<HQQ", meta, 16)
    pos = 16 + 2 + 24 + (8 if version == 1 else 0)
    stype_in, stype_out, ts_out = meta[pos], meta[pos + 1], meta[pos + 2] != 0
    pos += 3
    if version == 1:
        cstr_len, pos = 22, pos + 47
    else:
        (cstr_len,) = struct.unpack_from("<H", meta, pos)
        pos += 2 + 53
    (schema_def,) = struct.unpack_from("<I", meta, pos)
    pos += 4 + schema_def
    fields = _Fields(path, meta[:length], pos, cstr_len)
    symbols = fields.strings("symbols", shown=16)
    fields.strings("partial symbols")
    fields.strings("not_found symbols")
    if schema not in (SCHEMA_MBP10, SCHEMA_NULL):
        raise DataError(path, f"DBN schema id {schema} is not mbp-10 ({SCHEMA_MBP10})")
    return {"version": version, "dataset": dataset, "schema": schema, "start": start, "end": end,
            "ts_out": ts_out, "symbols": symbols, "mappings": fields.mappings(stype_in, stype_out)}


STYPE_INSTRUMENT_ID = 0  # a mapping's symbols on this side are instrument ids


class _Fields:
    """The metadata's variable-length part, read in order: a section that overruns it is refused, one absent empty."""

    def __init__(self, path, meta: bytes, pos: int, cstr_len: int):
        self.path, self.meta, self.pos, self.cstr_len = path, meta, pos, cstr_len

    def _count(self, what: str, each: int) -> int | None:
        if self.pos + 4 > len(self.meta):
            return None
        (count,) = struct.unpack_from("<I", self.meta, self.pos)
        self.pos += 4
        if self.pos + count * each > len(self.meta):
            raise DataError(self.path, f"corrupt DBN metadata: {count} {what} overrun the metadata")
        return count

    def _cstr(self) -> str:
        text = self.meta[self.pos:self.pos + self.cstr_len].split(b"\0", 1)[0].decode("ascii", "replace")
        self.pos += self.cstr_len
        return text

    def strings(self, what: str, shown: int = 0) -> list[str]:
        """A list of symbols: the first `shown` of them (the others passed over)."""
        count = self._count(what, self.cstr_len) or 0
        start, self.pos = self.pos, self.pos + count * self.cstr_len
        return [self.meta[start + i * self.cstr_len:start + (i + 1) * self.cstr_len].split(b"\0", 1)[0]
                .decode("ascii", "replace") for i in range(min(count, shown))]

    def mappings(self, stype_in: int, stype_out: int) -> list[tuple[str, int, int, int]]:
        """(symbol, instrument_id, start ns, end ns) of every mapping interval between a symbol and an instrument id."""
        spans = []
        for i in range(self._count("symbol mappings", self.cstr_len + 4) or 0):
            if self.pos + self.cstr_len + 4 > len(self.meta):
                raise DataError(self.path, f"corrupt DBN metadata: symbol mapping {i} overruns the metadata")
            raw = self._cstr()
            for _ in range(self._count(f"intervals of the mapping of {raw!r}", 8 + self.cstr_len)):
                dates = struct.unpack_from("<II", self.meta, self.pos)
                self.pos += 8
                mapped = self._cstr()
                symbol, iid = (raw, mapped) if stype_out == STYPE_INSTRUMENT_ID else (mapped, raw)
                if STYPE_INSTRUMENT_ID in (stype_in, stype_out) and iid.isascii() and iid.isdigit() and symbol:
                    spans.append((symbol, int(iid), *(self._midnight(d, raw) for d in dates)))
        return spans

    def _midnight(self, date: int, raw: str) -> int:
        """A mapping date (YYYYMMDD as a u32, the `dbn` crate's encoding) as the ns of its UTC midnight."""
        try:
            day = dt.date(date // 10_000, date // 100 % 100, date % 100)
        except ValueError:
            raise DataError(self.path, f"corrupt DBN metadata: the mapping of {raw!r} has an interval date {date}, "
                                       "not YYYYMMDD") from None
        return (day - EPOCH).days * DAY_NS


class _Walk:
    """Record framing across reads: which bytes are whole records, and what the file has shown so far."""

    def __init__(self, path, base: int, meta: dict, version: int):
        self.path, self.base = path, base  # base: the byte offset of the first record
        self.meta, self.mapping = meta, MAPPING_V1 if version == 1 else MAPPING  # where symbol mappings go
        self.length = 0       # the first record's length: a file of one record type repeats it
        self.same = True      # every record so far an MBP-10 record of that length
        self.records = 0      # records of any type so far
        self.mbp10 = 0        # MBP-10 records so far

    def take(self, body: np.ndarray, at: int) -> tuple[np.ndarray, int]:
        """(the MBP-10 records of the whole records `body` starts with, the bytes they span); `at`: body[0]'s offset."""
        if not self.length:
            self.length = int(body[0]) * 4
        stride = self.length
        full = len(body) // stride if self.same and stride >= MBP10_BYTES else 0
        heads = body[:full * stride].reshape(full, stride) if full else None
        if full and np.all(heads[:, 0] == stride // 4) and np.all(heads[:, 1] == RTYPE_MBP10):
            self.records += full
            self.mbp10 += full
            return _strided(body[:full * stride], stride), full * stride
        return self._walk(body, at)

    def _walk(self, body: np.ndarray, at: int) -> tuple[np.ndarray, int]:
        """Header by header (a file that mixes record types or lengths)."""
        offsets, pos, n = [], 0, len(body)
        while pos < n:
            length = int(body[pos]) * 4
            if length < 16:
                raise DataError(self.path, f"truncated or corrupt record at byte {self.base + at + pos} "
                                           f"(length {length})", row=self.mbp10)
            if pos + length > n:
                break
            if body[pos + 1] == RTYPE_MBP10:
                if length < MBP10_BYTES:
                    raise DataError(self.path, f"MBP-10 record at byte {self.base + at + pos} has length {length} "
                                               f"< {MBP10_BYTES}")
                offsets.append(pos)
                self.mbp10 += 1
            elif body[pos + 1] == RTYPE_SYMBOL_MAPPING:
                self._map(body[pos:pos + length], self.base + at + pos)
            self.same = self.same and length == self.length and body[pos + 1] == RTYPE_MBP10
            self.records += 1
            pos += length
        if not offsets:
            return np.empty(0, MBP10_DTYPE), pos
        return np.stack([body[o:o + MBP10_BYTES] for o in offsets]).reshape(-1).view(MBP10_DTYPE), pos

    def _map(self, record: np.ndarray, at: int):
        """A symbol mapping record: both its symbols name its instrument_id (the raw output symbol first) in the
        interval it gives, from the next MBP-10 row on."""
        size, in_at, out_at, whole = self.mapping
        if len(record) < whole:
            raise DataError(self.path, f"symbol mapping record at byte {at} has length {len(record)} < {whole}")
        iid = int(record[4:8].view("<u4")[0])
        start, end = (int(t) for t in record[whole - 16:whole].view("<u8"))  # start_ts, end_ts: its last fields
        span = (iid, 0 if start == UNDEF_TIMESTAMP else min(start, MAX_NS), min(end, MAX_NS), self.mbp10)
        for begin in (out_at, in_at):
            symbol = record[begin:begin + size].tobytes().split(b"\0", 1)[0].decode("ascii", "replace")
            if symbol and not symbol.isdigit():  # an instrument_id as text names nothing more
                map_symbol(self.meta, symbol, iid)
                self.meta["mapped"].setdefault(symbol, []).append(span)

    def end(self, tail: np.ndarray, at: int):
        """At the end of the file: `tail` holds the bytes of no whole record."""
        if not len(tail):
            return
        if self.same and self.length >= MBP10_BYTES and len(tail) < self.length:
            raise DataError(self.path, f"truncated: {len(tail)} bytes of a partial record at the end", row=self.records)
        raise DataError(self.path, f"truncated or corrupt record at byte {self.base + at} (length {int(tail[0]) * 4})",
                        row=self.mbp10)


def _strided(body: np.ndarray, stride: int) -> np.ndarray:
    """MBP-10 records `stride` bytes apart (longer than 368 with ts_out), as one numpy view."""
    dtype = np.dtype({"names": list(MBP10_DTYPE.names), "formats": [MBP10_DTYPE[i] for i in range(len(MBP10_DTYPE))],
                      "offsets": [MBP10_DTYPE.fields[k][1] for k in MBP10_DTYPE.names], "itemsize": stride})
    return np.ndarray(len(body) // stride, dtype, buffer=body)


SIDES = {b"A": SELL, b"B": BUY}  # a trade's side is its aggressor's (Databento's MBP-10 `side`); 'N' none


def _snapshots(src: np.ndarray, seen: dict) -> np.ndarray:
    """Records of MBP-10 rows; `seen` counts the trades without a side and the rows without a feed delay."""
    rec = np.zeros(len(src), SNAPSHOT_DTYPE)
    rec["ts_ns"] = src["ts_recv"].astype(np.int64)  # Databento's index time: records are in ts_recv order
    rec["feed_delay_ns"], late = feed_delay(rec["ts_ns"], src["ts_event"])
    levels = src["levels"]
    for name in ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct"):
        rec[name] = levels[name]
    for side in ("bid", "ask"):  # an UNDEF level may carry stale sizes; an empty level has none
        empty = rec[f"{side}_px"] == np.iinfo(np.int64).max
        rec[f"{side}_sz"][empty] = 0
        rec[f"{side}_ct"][empty] = 0
    trade = src["action"] == b"T"
    side = np.select([src["side"] == code for code in SIDES], list(SIDES.values()), UNKNOWN)
    fill_trades(rec, trade, src["price"], src["size"], side)
    rec["trade_count"] = trade
    rec["instrument_id"] = src["instrument_id"]
    rec["flags"] = src["flags"]
    seen["unknown"] += int(np.count_nonzero(trade & (side == UNKNOWN)))
    seen["late"] += late
    return rec


def iter_dbn(path, meta: dict, rows: int = CHUNK_ROWS):
    """One DBN file of MBP-10 records as (records, None) chunks of at most `rows` rows; fills `meta`."""
    path = Path(path)
    with open(path, "rb") as fh:
        stream = _open(path, fh)
        head = read_metadata(path, stream)
        meta["instrument"] = head["symbols"][0] if head["symbols"] else ""
        meta["mapped"] = {}  # symbol: [(iid, from, to: ns, first row)]; a live stream's come as records (_Walk._map)
        for symbol, iid, start, end in head["mappings"]:  # what --instrument SYMBOL resolves, and the ids' names
            map_symbol(meta, symbol, iid)
            meta["mapped"].setdefault(symbol, []).append((iid, start, end, -1))  # -1: up front, before any row
        meta["dbn"] = {k: head[k] for k in ("version", "dataset", "schema", "ts_out")}
        walk, tail = _Walk(path, stream.offset, meta, head["version"]), b""
        seen = {"unknown": 0, "late": 0}
        while True:
            data = stream.read(rows * max(walk.length, MBP10_BYTES))
            if not data and not tail and not walk.records:
                raise DataError(path, "no records after the DBN metadata")
            body = np.frombuffer(tail + data, np.uint8)
            at = stream.offset - walk.base - len(body)
            if not data:
                walk.end(body, at)
                break
            src, used = walk.take(body, at)
            tail = body[used:].tobytes()
            untimed = np.flatnonzero(src["ts_recv"] > np.iinfo(np.int64).max)
            if len(untimed):  # UNDEF_TIMESTAMP or damage: as int64 ns it would wrap to before 1970, silently
                first = int(untimed[0])
                raise DataError(path, f"ts_recv {int(src['ts_recv'][first])} is no time (past int64 ns; Databento's "
                                      "undefined time is 2^64 - 1)", row=walk.mbp10 - len(src) + first,
                                column="ts_recv")
            if len(src) and walk.mbp10 == len(src):  # the file's first MBP-10 records
                meta["instrument_id"] = int(src["instrument_id"][0])
            for i in range(0, len(src), rows):
                yield _snapshots(src[i:i + rows], seen), None
    if not walk.mbp10:
        raise DataError(path, "no MBP-10 records (rtype 0x0A) in the file")
    if not walk.same:
        meta["notes"].append("mixed record types: only MBP-10 records read")
    meta["notes"] += trade_notes("side N", seen["unknown"], seen["late"])


def read_dbn(path) -> tuple[np.ndarray, None, dict]:
    """(records, None, metadata) of a whole file: iter_dbn's chunks joined (tests, the oracle)."""
    return read_whole(iter_dbn, path)
