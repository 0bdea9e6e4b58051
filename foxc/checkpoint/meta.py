"""The `meta` section: what every other section holds, and the run it came from.

msgpack of one map, declared as META (jsonfile.shape_problem checks it): foxc_version, step (the header's),
isv_slots (the ISV slot names by index), config (the run's configuration), data (the data source and its hash, or
nil) and sections (name -> ENTRY: dtype, shape, sha256), plus any other keys a writer adds. dtype is a
little-endian numpy type string of SECTION_DTYPES, "adamw" (the AdamW wire format, shape [n]) or "bytes" (opaque,
shape [length]).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import PurePath

import msgpack
import numpy as np

from ..jsonfile import shape_problem
from .adamw import AdamState, wire_size
from .errors import CheckpointError

ADAMW, BYTES, META, CHECKSUM = "adamw", "bytes", "meta", "checksum"
SECTION_DTYPES = frozenset(np.dtype(t).newbyteorder("<").str for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64))
RESERVED_KEYS = frozenset({"foxc_version", "step", "isv_slots", "sections"})
MAX_NDIM = 32
META_SHAPE = {"foxc_version": str, "step": int, "isv_slots": list[str], "config": dict, "data?": dict | None,
              "sections": dict}
ENTRY = {"dtype": SECTION_DTYPES | {ADAMW, BYTES}, "shape": list[range(0, 2**63)], "sha256": re.compile("[0-9a-f]{64}")}


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
    """The meta spelling of a section type: "adamw", "bytes" or a little-endian numpy type of SECTION_DTYPES."""
    if isinstance(dtype, str) and dtype in (ADAMW, BYTES):
        return dtype
    text = np.dtype(dtype).newbyteorder("<").str
    if text not in SECTION_DTYPES:
        raise ValueError(f"dtype {np.dtype(dtype)} cannot be stored in a checkpoint (bool, ints and floats can)")
    return text


def section_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
    """Bytes the data of a section of this type must hold (Python ints: no overflow)."""
    return wire_size(shape[0]) if dtype == ADAMW else shape[0] if dtype == BYTES else \
        np.dtype(dtype).itemsize * math.prod(shape)


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
    except Exception as exc:  # msgpack raises many types for hostile bytes; all mean the same here
        raise CheckpointError(f"not valid msgpack ({type(exc).__name__}: {exc})", section=META, offset=offset) from None
    if not isinstance(doc, dict):
        raise CheckpointError(f"is a msgpack {type(doc).__name__}, not a map", section=META, offset=offset)
    return doc


def check_meta(doc: dict, step: int, spans: dict, digests: dict[str, bytes], offset: int) -> dict[str, SectionInfo]:
    """Every section the meta describes, checked against the file (`spans`: format.SectionSpan by name)."""
    problem = shape_problem(doc, META_SHAPE) or (
        doc["step"] != step and f"step {doc['step']} disagrees with the header's step {step}") or next(
        (f"describes section '{name}', which the file lacks" for name in doc["sections"] if name not in spans), "")
    if problem:
        raise CheckpointError(problem, section=META, offset=offset)
    infos = {name: _entry(name, entry, spans[name], digests.get(name)) for name, entry in doc["sections"].items()}
    isv = infos.get("isv")
    if isv is not None and (isv.dtype != "<f4" or isv.shape != (len(doc["isv_slots"]),)):
        raise CheckpointError(f"is {isv.describe()} but there are {len(doc['isv_slots'])} ISV slot names",
                              section="isv", offset=isv.offset)
    return infos


def _entry(name: str, entry, span, digest: bytes | None) -> SectionInfo:
    """The meta's entry of one section, checked against its data (its `digest`: None for the seal)."""
    def problem() -> str:
        if name in (META, CHECKSUM):
            return "is reserved and cannot be described by the meta"
        if not isinstance(entry, dict):
            return "its meta entry is not a map"
        if found := shape_problem(entry, ENTRY):
            return f"its meta entry: {found}"
        dtype, shape = entry["dtype"], entry["shape"]
        if len(shape) > MAX_NDIM or (dtype in (ADAMW, BYTES) and len(shape) != 1):
            return (f"its meta shape {shape} has {len(shape)} dimensions, a {dtype} section "
                    f"{'one dimension' if dtype in (ADAMW, BYTES) else f'at most {MAX_NDIM} dimensions'}")
        if (nbytes := section_nbytes(dtype, tuple(shape))) != span.data_len:
            return f"holds {span.data_len} bytes but its meta says {dtype} {shape} ({nbytes} bytes)"
        if digest.hex() != entry["sha256"]:
            return f"sha256 mismatch: the data is corrupt (file {digest.hex()[:16]}…, meta {entry['sha256'][:16]}…)"
        return ""
    if found := problem():
        raise CheckpointError(found, section=name, offset=span.offset)
    return SectionInfo(name, entry["dtype"], tuple(entry["shape"]), entry["sha256"], span.offset, span.data_len)


def config_differences(saved: dict, current: dict, prefix: str = "",
                       sides: tuple[str, str] = ("in the checkpoint", "now")) -> list[str]:
    """Each setting that differs between two configurations, by dotted name; `sides` say where each comes from."""
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
