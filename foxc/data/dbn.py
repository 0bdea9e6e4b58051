"""Databento DBN files (`.dbn`, `.dbn.zst`, DBN versions 1-3): MBP-10 records decoded with numpy.

Layout (Databento's `dbn` crate, `decode/dbn/fsm.rs` and `record.rs`), little-endian:
  prelude   b"DBN", version u8, metadata length u32
  metadata  dataset char[16], schema u16, start u64, end u64, limit u64, [v1: record_count u64],
            stype_in u8, stype_out u8, ts_out u8, [v2+: symbol_cstr_len u16], reserved
            (v1: 47 bytes, v2+: 53), schema_definition_length u32 (+ that many bytes),
            symbols: count u32 then count × symbol_cstr_len (v1: 22) bytes, then partial,
            not_found and mappings (unused here)
  records   RecordHeader {length u8 (in 4-byte words), rtype u8, publisher_id u16,
            instrument_id u32, ts_event u64}, then for MBP-10 (rtype 0x0A, 368 bytes):
            price i64, size u32, action char, side char, flags u8, depth u8, ts_recv u64,
            ts_in_delta i32, sequence u32, 10 × {bid_px i64, ask_px i64, bid_sz u32, ask_sz u32,
            bid_ct u32, ask_ct u32}; with ts_out a u64 follows each record.
The MBP-10 record is the same in versions 1, 2 and 3. A file of only MBP-10 records is
decoded as one strided numpy view; a file mixing record types is walked header by header.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .record import LEVELS, SNAPSHOT_DTYPE
from .validate import DataError

MAGIC = b"DBN"
MAX_VERSION = 3
RTYPE_MBP10 = 0x0A
SCHEMA_MBP10 = 2
SCHEMA_NULL = 0xFFFF
MBP10_BYTES = 368
ZSTD_MAGIC = 0xFD2FB528
ZSTD_SKIPPABLE = range(0x184D2A50, 0x184D2A60)
MAX_METADATA = 1 << 30

_LEVEL = np.dtype([("bid_px", "<i8"), ("ask_px", "<i8"), ("bid_sz", "<u4"), ("ask_sz", "<u4"),
                   ("bid_ct", "<u4"), ("ask_ct", "<u4")])
MBP10_DTYPE = np.dtype([
    ("length", "u1"), ("rtype", "u1"), ("publisher_id", "<u2"), ("instrument_id", "<u4"), ("ts_event", "<u8"),
    ("price", "<i8"), ("size", "<u4"), ("action", "S1"), ("side", "S1"), ("flags", "u1"), ("depth", "u1"),
    ("ts_recv", "<u8"), ("ts_in_delta", "<i4"), ("sequence", "<u4"), ("levels", _LEVEL, (LEVELS,)),
])
assert MBP10_DTYPE.itemsize == MBP10_BYTES


def _load_bytes(path: Path) -> np.ndarray:
    with open(path, "rb") as fh:
        head = fh.read(4)
    if len(head) == 4 and (struct.unpack("<I", head)[0] == ZSTD_MAGIC or
                           struct.unpack("<I", head)[0] in ZSTD_SKIPPABLE):
        try:
            import zstandard
        except ImportError:
            raise DataError(path, "zstd-compressed DBN needs the 'zstandard' package") from None
        try:
            with open(path, "rb") as fh:
                raw = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True).read()
        except zstandard.ZstdError as e:
            raise DataError(path, f"corrupt or truncated zstd stream ({e})") from None
        return np.frombuffer(raw, np.uint8)
    if path.stat().st_size == 0:
        raise DataError(path, "the file is empty")
    return np.memmap(path, np.uint8, mode="r")


def parse_metadata(path, data: np.ndarray) -> tuple[dict, int]:
    """(metadata, offset of the first record)."""
    if len(data) < 8 or bytes(data[:3]) != MAGIC:
        raise DataError(path, "not a DBN file (no 'DBN' magic at the start)")
    version = int(data[3])
    if not 1 <= version <= MAX_VERSION:
        raise DataError(path, f"DBN version {version} is not supported (1-{MAX_VERSION})")
    (length,) = struct.unpack_from("<I", data, 4)
    if length < 100 or length > MAX_METADATA or 8 + length > len(data):
        raise DataError(path, f"truncated or corrupt DBN metadata (length {length}, file {len(data)} bytes)")
    meta = bytes(data[8:8 + length])
    dataset = meta[:16].split(b"\0", 1)[0].decode("ascii", "replace")
    schema, start, end = struct.unpack_from("<HQQ", meta, 16)
    pos = 16 + 2 + 24 + (8 if version == 1 else 0)
    ts_out = meta[pos + 2] != 0
    pos += 3
    if version == 1:
        cstr_len, pos = 22, pos + 47
    else:
        (cstr_len,) = struct.unpack_from("<H", meta, pos)
        pos += 2 + 53
    (schema_def,) = struct.unpack_from("<I", meta, pos)
    pos += 4 + schema_def
    symbols = []
    if pos + 4 <= length:
        (count,) = struct.unpack_from("<I", meta, pos)
        pos += 4
        if pos + count * cstr_len > length:
            raise DataError(path, f"corrupt DBN metadata: {count} symbols overrun the metadata")
        symbols = [meta[pos + i * cstr_len: pos + (i + 1) * cstr_len].split(b"\0", 1)[0].decode("ascii", "replace")
                   for i in range(min(count, 16))]
    if schema not in (SCHEMA_MBP10, SCHEMA_NULL):
        raise DataError(path, f"DBN schema id {schema} is not mbp-10 ({SCHEMA_MBP10})")
    return {"version": version, "dataset": dataset, "schema": schema, "start": start, "end": end,
            "ts_out": ts_out, "symbols": symbols}, 8 + length


def _record_offsets(path, body: np.ndarray, base: int) -> np.ndarray:
    """Offsets of the MBP-10 records in a stream that mixes record types (walks the headers)."""
    offsets, pos, n = [], 0, len(body)
    while pos < n:
        length = int(body[pos]) * 4
        if length < 16 or pos + length > n:
            raise DataError(path, f"truncated or corrupt record at byte {base + pos} (length {length})",
                            row=len(offsets))
        if body[pos + 1] == RTYPE_MBP10:
            if length < MBP10_BYTES:
                raise DataError(path, f"MBP-10 record at byte {base + pos} has length {length} < {MBP10_BYTES}")
            offsets.append(pos)
        pos += length
    return np.asarray(offsets, np.int64)


def read_dbn(path) -> tuple[np.ndarray, None, dict]:
    """(records, None, metadata) for one DBN file of MBP-10 records."""
    path = Path(path)
    data = _load_bytes(path)
    meta, start = parse_metadata(path, data)
    body = data[start:]
    if len(body) == 0:
        raise DataError(path, "no records after the DBN metadata")
    stride = int(body[0]) * 4
    uniform = stride >= MBP10_BYTES and len(body) % stride == 0
    if uniform:
        heads = body.reshape(-1, stride)
        uniform = bool(np.all(heads[:, 0] == body[0]) and np.all(heads[:, 1] == RTYPE_MBP10))
    if uniform:
        src = np.ndarray(len(body) // stride, np.dtype({"names": list(MBP10_DTYPE.names),
                                                       "formats": [MBP10_DTYPE[i] for i in range(len(MBP10_DTYPE))],
                                                       "offsets": [MBP10_DTYPE.fields[k][1] for k in MBP10_DTYPE.names],
                                                       "itemsize": stride}), buffer=body)
    else:
        if stride >= MBP10_BYTES and len(body) % stride and np.all(body[::stride][:len(body) // stride] == body[0]):
            full = len(body) // stride
            raise DataError(path, f"truncated: {len(body) - full * stride} bytes of a partial record at the end",
                            row=full)
        offsets = _record_offsets(path, body, start)
        if len(offsets) == 0:
            raise DataError(path, "no MBP-10 records (rtype 0x0A) in the file")
        src = np.stack([np.asarray(body[o:o + MBP10_BYTES]) for o in offsets]).reshape(-1).view(MBP10_DTYPE)
    n = len(src)
    rec = np.zeros(n, SNAPSHOT_DTYPE)
    rec["ts_ns"] = src["ts_recv"].astype(np.int64)  # Databento's index time: records are in ts_recv order
    levels = src["levels"]
    for name in ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct"):
        rec[name] = levels[name]
    for side in ("bid", "ask"):  # an UNDEF level may carry stale sizes; an empty level has none
        empty = rec[f"{side}_px"] == np.iinfo(np.int64).max
        rec[f"{side}_sz"][empty] = 0
        rec[f"{side}_ct"][empty] = 0
    rec["trade_count"] = src["action"] == b"T"
    rec["instrument_id"] = src["instrument_id"]
    rec["flags"] = src["flags"]
    out_meta = {"instrument": meta["symbols"][0] if meta["symbols"] else "",
                "instrument_id": int(src["instrument_id"][0]), "notes": [],
                "dbn": {k: meta[k] for k in ("version", "dataset", "schema", "ts_out")}}
    if not uniform:
        out_meta["notes"].append("mixed record types: only MBP-10 records read")
    return rec, None, out_meta
