"""The `meta` section: what every other section holds, and the run it came from.

msgpack of one map:
    foxc_version  str          the writer's foxc version
    step          int          equals the header's step
    isv_slots     [str]        ISV slot names by index (foxc.isv.registry)
    config        map          the run's configuration
    data          map | nil    the data source and its hash ({"source": ..., "sha256": ...})
    sections      map          name -> {"dtype": str, "shape": [int], "sha256": hex str}
plus any other keys a writer adds (kept as they are).

dtype is a little-endian numpy type string from SECTION_DTYPES, or "adamw" (the
AdamW wire format, shape [n]) or "bytes" (opaque, shape [length]).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePath

import msgpack
import numpy as np

from .adamw import AdamState, wire_size
from .errors import CheckpointError

ADAMW = "adamw"
BYTES = "bytes"
SECTION_DTYPES = frozenset(np.dtype(t).newbyteorder("<").str for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64))
RESERVED_KEYS = frozenset({"foxc_version", "step", "isv_slots", "sections"})
MAX_NDIM = 32
_HEX = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class SectionInfo:
    """One section as the meta describes it, checked against the file."""
    name: str
    dtype: str
    shape: tuple[int, ...]
    sha256: str
    offset: int      # of the section's header in the file
    nbytes: int

    def describe(self) -> str:
        return f"{self.dtype} {list(self.shape)}"


def canonical_dtype(dtype) -> str:
    """The meta spelling of a section type: "adamw", "bytes" or a whitelisted little-endian numpy type."""
    if isinstance(dtype, str) and dtype in (ADAMW, BYTES):
        return dtype
    try:
        text = np.dtype(dtype).newbyteorder("<").str
    except TypeError as exc:
        raise ValueError(f"not a section dtype: {dtype!r}") from exc
    if text not in SECTION_DTYPES:
        raise ValueError(f"dtype {np.dtype(dtype)} cannot be stored in a checkpoint "
                         f"(bool, int8..64, uint8..64 and float16/32/64 can)")
    return text


def section_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes the data of a section of this type must hold (Python ints: no overflow)."""
    if dtype == ADAMW:
        return wire_size(shape[0])
    if dtype == BYTES:
        return shape[0]
    return np.dtype(dtype).itemsize * math.prod(shape)


def describe_value(value) -> tuple[str, tuple[int, ...]]:
    """(dtype, shape) of a value the writer accepts."""
    if isinstance(value, AdamState):
        return ADAMW, (value.n,)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return BYTES, (memoryview(value).nbytes,)
    if isinstance(value, (np.ndarray, np.generic)):
        return canonical_dtype(value.dtype), tuple(int(d) for d in np.shape(value))
    raise TypeError(f"a section holds a numpy array, an AdamState or bytes, not {type(value).__name__}")


def expected_from(state: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The `expected` argument of read_checkpoint for a live state dict: every section it holds, as it is."""
    return {name: describe_value(value) for name, value in state.items()}


def encode_meta(doc: dict) -> bytes:
    return msgpack.packb(doc, use_bin_type=True, default=_to_msgpack)


def _to_msgpack(value):
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    if isinstance(value, (PurePath, np.dtype)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"meta cannot hold a {type(value).__name__}: {value!r}")


def decode_meta(data, offset: int) -> dict:
    """msgpack bytes -> the meta map, refusing anything that is not one well-formed map."""
    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises many types for hostile input; all mean the same here
        raise CheckpointError(f"not valid msgpack ({type(exc).__name__}: {exc})", section="meta", offset=offset) from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"is a msgpack {type(doc).__name__}, not a map", section="meta", offset=offset)
    return doc


def check_meta(doc: dict, step: int, spans: dict, digests: dict[str, bytes], offset: int) -> dict[str, SectionInfo]:
    """Validate the decoded meta against the file; return every section it describes.

    `spans` maps each section name in the file to its SectionSpan (format.py).
    """
    def fail(reason: str, section: str = "meta", at: int | None = offset):
        raise CheckpointError(reason, section=section, offset=at)

    for key, kind in (("foxc_version", str), ("step", int), ("isv_slots", list), ("config", dict), ("sections", dict)):
        if key not in doc:
            fail(f"has no '{key}' key")
        if not isinstance(doc[key], kind) or isinstance(doc[key], bool):
            fail(f"'{key}' is a {type(doc[key]).__name__}, not a {kind.__name__}")
    if doc["step"] != step:
        fail(f"step {doc['step']} disagrees with the header's step {step}")
    if not all(isinstance(name, str) for name in doc["isv_slots"]):
        fail("'isv_slots' holds something other than names")
    if doc.get("data") is not None and not isinstance(doc["data"], dict):
        fail(f"'data' is a {type(doc['data']).__name__}, not a map")

    infos = {}
    for name, entry in doc["sections"].items():
        if name not in spans:
            fail(f"describes section '{name}', which the file lacks")
        # no digest for the seal: `_check_entry` refuses a reserved name before it would need one
        infos[name] = _check_entry(name, entry, spans[name].offset, spans[name].data_len, digests.get(name))
    isv = infos.get("isv")
    if isv is not None and (isv.dtype != "<f4" or isv.shape != (len(doc["isv_slots"]),)):
        fail(f"is {isv.describe()} but there are {len(doc['isv_slots'])} ISV slot names", "isv", isv.offset)
    return infos


def _check_entry(name: str, entry, at: int, data_len: int, digest: bytes) -> SectionInfo:
    def fail(reason: str):
        raise CheckpointError(reason, section=name, offset=at)

    if name in ("meta", "checksum"):
        fail("is reserved and cannot be described by the meta")
    if not isinstance(entry, dict) or not {"dtype", "shape", "sha256"} <= entry.keys():
        fail("its meta entry is not a map with dtype, shape and sha256")
    dtype, shape, sha = entry["dtype"], entry["shape"], entry["sha256"]
    if not isinstance(dtype, str) or (dtype not in SECTION_DTYPES and dtype not in (ADAMW, BYTES)):
        fail(f"its meta dtype {dtype!r} is not one foxc stores")
    if (not isinstance(shape, list) or len(shape) > MAX_NDIM
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        fail(f"its meta shape {shape!r} is not a list of at most {MAX_NDIM} non-negative integers")
    if dtype in (ADAMW, BYTES) and len(shape) != 1:
        fail(f"a {dtype} section has a shape of one dimension, not {shape}")
    if not isinstance(sha, str) or len(sha) != 64 or not set(sha) <= _HEX:
        fail(f"its meta sha256 {sha!r} is not 64 lowercase hex digits")
    shape = tuple(shape)
    nbytes = section_nbytes(dtype, shape)
    if nbytes != data_len:
        fail(f"holds {data_len} bytes but its meta says {dtype} {list(shape)} ({nbytes} bytes)")
    if digest.hex() != sha:
        fail(f"sha256 mismatch: the data is corrupt (file {digest.hex()[:16]}…, meta {sha[:16]}…)")
    return SectionInfo(name, dtype, shape, sha, at, data_len)


def config_differences(saved: dict, current: dict, prefix: str = "",
                       sides: tuple[str, str] = ("in the checkpoint", "now")) -> list[str]:
    """Each setting that differs between two configurations, by dotted name; `sides` say where each
    comes from (a resume check's by default; two files' for foxc-ckpt-inspect --diff: "in A", "in B")."""
    problems, (was, now) = [], sides
    for key in sorted(set(saved) | set(current), key=str):
        name = f"{prefix}{key}"
        if key not in current:
            problems.append(f"{name}: {saved[key]!r} {was}, not set {now}")
        elif key not in saved:
            problems.append(f"{name}: not {was}, {current[key]!r} {now}")
        elif isinstance(saved[key], dict) and isinstance(current[key], dict):
            problems += config_differences(saved[key], current[key], f"{name}.", sides)
        elif _normal(saved[key]) != _normal(current[key]):
            problems.append(f"{name}: {saved[key]!r} {was}, {current[key]!r} {now}")
    return problems


def _normal(value):
    """The value as it reads back from msgpack (tuples become lists, numpy scalars Python ones)."""
    return msgpack.unpackb(encode_meta(value), raw=False, strict_map_key=False)
