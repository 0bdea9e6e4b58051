"""FOXC v1: the checkpoint file, written whole and read as hostile input.

Little-endian throughout:
    header   magic u32 = 0x464F5843 ("FOXC"), version u32 = 1, step u64, n_sections u32
    section  name_len u16, name (UTF-8, 1..1024 bytes), data_len u64, data    (n_sections times)

foxc writes `meta` first (meta.py), the state sections, then `checksum`: the sha256 of the header followed, for
every earlier section, by its header bytes and the sha256 of its data. The reader has one mode: every length
checked against the bytes that remain before it is used, every digest verified (the meta's name a damaged
section), what the meta describes decoded, and every problem one CheckpointError naming the section and byte
offset. A section the meta does not describe is skipped where the checksum vouches for it, else refused (it may be
a damaged `checksum`); a file without a meta is refused (foxc-ckpt-inspect reads one: seed_layout.py).
"""
from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import __version__
from ..isv.registry import SLOTS
from ..numbers import whole
from ..paths import file_kind
from .adamw import adamw_chunks, le_bytes, unpack_adamw
from .atomic import atomic_write
from .errors import CheckpointError
from .meta import (ADAMW, BYTES, CHECKSUM, META, RESERVED_KEYS, SectionInfo, canonical_dtype, check_meta,
                   decode_meta, describe_value, encode_meta)

MAGIC, VERSION = 0x464F5843, 1
HEADER, NAME_LEN, DATA_LEN = struct.Struct("<IIQI"), struct.Struct("<H"), struct.Struct("<Q")
MAX_NAME_LEN, DIGEST_BYTES = 1024, 32
NOT_RESUMABLE = ("written without a 'meta' section (the Rust trainer's layout?): foxc can inspect it "
                 "(foxc-ckpt-inspect) but cannot resume from it — its configuration and data are unknown")


class SectionSpan(NamedTuple):
    """Where one section lies in a file: its header at `offset`, its data_len bytes of data at `data_offset`."""
    name: str
    offset: int
    data_offset: int
    data_len: int

    @property
    def end(self) -> int:
        return self.data_offset + self.data_len


def check_header(head) -> None:
    """Refuse a file by its first bytes: cut short before the header's end, a bad magic or version."""
    if len(head) < HEADER.size:
        raise CheckpointError(f"short file: {len(head)} bytes, the header alone needs {HEADER.size}", offset=0)
    magic, version, _, _ = HEADER.unpack_from(head, 0)
    if magic != MAGIC:
        raise CheckpointError(f"bad magic {magic:#010x} (a FOXC checkpoint starts with u32 {MAGIC:#010x}, the bytes "
                              "'CXOF')", offset=0)
    if version != VERSION:
        raise CheckpointError(f"unsupported version {version} (this reader knows version {VERSION})", offset=4)


def parse_layout(view: memoryview) -> tuple[int, dict[str, SectionSpan]]:
    """The header and section framing of a whole file: its step, and its sections by name in file order."""
    size, pos = len(view), HEADER.size
    check_header(view)
    _, _, step, count = HEADER.unpack_from(view, 0)
    if count * (NAME_LEN.size + DATA_LEN.size) > size - pos:
        raise CheckpointError(f"n_sections {count} cannot fit in the {size - pos} bytes after the header", offset=16)
    spans = {}
    for index in range(count):
        label = f"#{index}"
        if size - pos < NAME_LEN.size:
            raise CheckpointError(f"short file: the section header is cut off after {size - pos} bytes",
                                  section=label, offset=pos)
        (name_len,), name_at = NAME_LEN.unpack_from(view, pos), pos + NAME_LEN.size
        if not 1 <= name_len <= MAX_NAME_LEN:
            raise CheckpointError(f"name_len {name_len} is outside 1..{MAX_NAME_LEN}", section=label, offset=pos)
        if name_len + DATA_LEN.size > size - name_at:
            raise CheckpointError(f"short file: name_len {name_len} and data_len run past the end of the file "
                                  f"({size - name_at} bytes remain)", section=label, offset=pos)
        try:
            name = bytes(view[name_at:name_at + name_len]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CheckpointError(f"the name is not valid UTF-8 ({exc.reason} at name byte {exc.start})",
                                  section=label, offset=name_at) from None
        (data_len,), data_at = DATA_LEN.unpack_from(view, name_at + name_len), name_at + name_len + DATA_LEN.size
        if data_len > size - data_at:
            raise CheckpointError(f"data_len {data_len} runs past the end of the file ({size - data_at} bytes remain)",
                                  section=name, offset=name_at + name_len)
        if name in spans:
            raise CheckpointError(f"duplicate section name (first at byte {spans[name].offset})", section=name,
                                  offset=pos)
        spans[name] = SectionSpan(name, pos, data_at, data_len)
        pos = data_at + data_len
    if pos != size:
        raise CheckpointError(f"{size - pos} trailing bytes after the last section", offset=pos)
    return step, spans


def _section_header(name: str, data_len: int) -> bytes:
    return NAME_LEN.pack(len(name.encode("utf-8"))) + name.encode("utf-8") + DATA_LEN.pack(data_len)


def _seal(header, framed) -> bytes:
    """The checksum section's data: sha256 over the header, then each section's header and data digest."""
    digest = hashlib.sha256(header)
    for section_header, data_digest in framed:
        digest.update(section_header)
        digest.update(data_digest)
    return digest.digest()


def digests_of(view: memoryview, spans: dict[str, SectionSpan]) -> dict[str, bytes]:
    """The sha256 of every section's data but the seal's."""
    return {s.name: hashlib.sha256(view[s.data_offset:s.end]).digest() for s in spans.values() if s.name != CHECKSUM}


def seal_problem(view: memoryview, spans: dict[str, SectionSpan], digests: dict[str, bytes], altered: str) -> str:
    """Why the `checksum` section is no seal of this file ("" when it is, or there is none): it must be the last
    section, hold one sha256, and equal the chain over the header and every other section (else `altered`)."""
    seal = spans.get(CHECKSUM)
    if seal is None:
        return ""
    if seal is not next(reversed(spans.values())):
        return "must be the last section"
    if seal.data_len != DIGEST_BYTES:
        return f"holds {seal.data_len} bytes, not a {DIGEST_BYTES}-byte sha256"
    framed = [(view[s.offset:s.data_offset], digests[s.name]) for s in spans.values() if s is not seal]
    return "" if _seal(view[:HEADER.size], framed) == view[seal.data_offset:seal.end] else \
        f"file checksum mismatch: {altered}"


class EncodedCheckpoint(NamedTuple):
    """A checkpoint as a list of buffers to write in order (array data is not copied), and its size."""
    chunks: list
    size: int


def encode_checkpoint(step: int, sections: dict, meta: dict | None = None) -> EncodedCheckpoint:
    """Lay out a checkpoint of `sections` (names to numpy arrays, AdamState or bytes). `meta` carries `config` (a
    map), `data` (the data source and its hash) and any other msgpack-able keys; foxc fills in its version, the
    step, the ISV slot names and every section's dtype, shape and sha256."""
    meta = dict(meta or {})
    if not whole(step) or not 0 <= int(step) < 1 << 64:
        raise ValueError(f"step must be an integer in 0..2^64-1, got {step!r}")
    if RESERVED_KEYS & meta.keys():
        raise ValueError(f"meta keys {sorted(RESERVED_KEYS & meta.keys())} are filled in by the writer")
    payloads, entries = {}, {}
    for name, value in sections.items():
        if not isinstance(name, str):
            raise TypeError(f"section names are str, got {type(name).__name__}")
        if name in (META, CHECKSUM) or not 1 <= len(name.encode("utf-8")) <= MAX_NAME_LEN:
            raise ValueError(f"section name '{name[:40]}' is reserved, or not 1..{MAX_NAME_LEN} bytes of UTF-8")
        dtype, shape = describe_value(value)
        chunks = adamw_chunks(value) if dtype == ADAMW else [
            memoryview(value).cast("B") if dtype == BYTES else le_bytes(np.asarray(value), dtype)]
        digest = hashlib.sha256()
        for chunk in chunks:
            digest.update(chunk)
        payloads[name] = (chunks, sum(memoryview(c).nbytes for c in chunks), digest.digest())
        entries[name] = {"dtype": dtype, "shape": list(shape), "sha256": digest.hexdigest()}
    if "isv" in entries and (entries["isv"]["dtype"], entries["isv"]["shape"]) != ("<f4", [len(SLOTS)]):
        raise ValueError(f"section 'isv' must be float32 [{len(SLOTS)}] (the registry's slots)")
    doc = {"foxc_version": __version__, "step": int(step), "isv_slots": [s.name for s in SLOTS],
           "config": meta.pop("config", {}), "data": meta.pop("data", None), **meta, "sections": entries}
    if not isinstance(doc["config"], dict) or not isinstance(doc["data"], (dict, type(None))):
        raise ValueError(f"meta['config'] must be a dict and meta['data'] a dict or None, got {doc['config']!r}, "
                         f"{doc['data']!r}")
    meta_bytes = encode_meta(doc)
    payloads = {META: ([meta_bytes], len(meta_bytes), hashlib.sha256(meta_bytes).digest()), **payloads}
    header = HEADER.pack(MAGIC, VERSION, int(step), len(payloads) + 1)
    chunks, framed = [header], []
    for name, (data, nbytes, digest) in payloads.items():
        framed.append((_section_header(name, nbytes), digest))
        chunks += [framed[-1][0], *data]
    chunks += [_section_header(CHECKSUM, DIGEST_BYTES), _seal(header, framed)]
    return EncodedCheckpoint(chunks, sum(memoryview(c).nbytes for c in chunks))


def write_checkpoint(path, step: int, sections: dict, meta: dict | None = None) -> Path:
    """Save atomically to `path`; a failed save raises CheckpointSaveError and leaves `path` as it was."""
    atomic_write(Path(path), encode_checkpoint(step, sections, meta).chunks)
    return Path(path)


@dataclass
class Checkpoint:
    """A checkpoint read and verified: typed sections by name, and what the meta says about them. One without a
    checksum has `sealed` false, one the inspector read in the seed's layout `has_meta` false; `notes` say what
    that leaves unknown or unverified."""
    step: int
    sections: dict
    meta: dict
    infos: dict[str, SectionInfo]
    skipped: list[str] = field(default_factory=list)
    size: int = 0
    notes: list[str] = field(default_factory=list)
    has_meta: bool = True
    sealed: bool = True
    isv_slots: list[str] = field(default_factory=list)  # the ISV slot names by index

    def __getitem__(self, name: str):
        return self.sections[name]

    @property
    def n_sections(self) -> int:
        """As the header counts them: the state sections, skipped ones, meta and checksum."""
        return len(self.sections) + len(self.skipped) + self.has_meta + self.sealed

    @property
    def config(self) -> dict:
        return self.meta["config"]

    def isv(self) -> dict[str, float]:
        """The ISV bus by slot name, as the file names its slots."""
        if not isinstance(self.sections.get("isv"), np.ndarray):
            raise CheckpointError("the checkpoint has no 'isv' section of float32 values")
        return {name: float(value) for name, value in zip(self.isv_slots, self.sections["isv"])}


def read_file(path: Path) -> np.ndarray:
    """The bytes of the file at `path` in one buffer of exactly its size (not mapped: a map of a file that another
    process truncates would fault); one that is no regular file, or whose first bytes are no checkpoint's, is
    refused before it is read."""
    try:
        _regular_file(path)  # before the open: a FIFO's waits for a writer
        with open(path, "rb") as f:
            _regular_file(f.fileno())  # what was opened (the path may name another file by now)
            check_header(f.read(HEADER.size))  # before the whole of a large file that is no checkpoint is read
            size = os.fstat(f.fileno()).st_size
            f.seek(0)
            try:
                data = np.empty(size, np.uint8)  # not zero-filled: every byte is read into
            except MemoryError:  # still a MemoryError, naming the file
                raise MemoryError(f"{path}: cannot read: its {size:,} bytes do not fit in memory") from None
            if (filled := f.readinto(data)) < size:  # a buffered file reads until the buffer is full or the end
                raise CheckpointError(f"shrank while being read ({filled} of {size} bytes)")
            if f.read(1):
                raise CheckpointError("grew while being read")
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror or exc}", path=path) from None
    except CheckpointError as exc:
        raise exc.with_path(path) from None
    return data


def _regular_file(target) -> None:
    if kind := file_kind(target):
        raise CheckpointError(f"{kind}, not a checkpoint file (a checkpoint is a regular file)")


def read_checkpoint(path, expected: dict | None = None, check_meta_first=None) -> Checkpoint:
    """Read and verify a checkpoint file (parse_checkpoint); every error names the file."""
    try:
        return parse_checkpoint(read_file(Path(path)), expected, check_meta_first)
    except CheckpointError as exc:
        raise exc.with_path(path) from None


def parse_checkpoint(buf, expected: dict | None = None, check_meta_first=None) -> Checkpoint:
    """Verify a whole checkpoint held in `buf` and decode every section its meta describes. Then
    `check_meta_first(meta)` may refuse another configuration by name, before `expected` (name -> (dtype, shape)
    as the model holds them: expected_from(state), shape None for any) refuses a section by its shape and picks
    the sections to keep (the others are skipped)."""
    view = memoryview(buf).cast("B")
    step, spans = parse_layout(view)
    if META not in spans:
        raise CheckpointError(NOT_RESUMABLE)
    digests, meta = digests_of(view, spans), spans[META]
    doc = decode_meta(view[meta.data_offset:meta.end], meta.data_offset)
    infos = check_meta(doc, step, spans, digests, meta.data_offset)  # first: its digests name a damaged section
    if problem := seal_problem(view, spans, digests, "the header, a section header or the meta was altered (every "
                                                     "section's data matches its sha256)"):
        raise CheckpointError(problem, section=CHECKSUM, offset=spans[CHECKSUM].offset)
    sealed, notes = CHECKSUM in spans, []
    if not sealed:
        if loose := next((s for s in spans.values() if s.name not in infos and s is not meta), None):
            raise CheckpointError("the meta does not describe this section and there is no checksum to vouch for "
                                  "it (a damaged 'checksum' section?)", section=loose.name, offset=loose.offset)
        notes.append("no 'checksum' section: every section's data is verified against the meta's sha256, but the "
                     "header, the section framing and the meta itself are not sealed (an altered configuration "
                     "or data hash in the meta would go unnoticed)")
    if check_meta_first is not None:
        check_meta_first(doc)
    for name, (dtype, shape) in (expected or {}).items():
        info, dtype, shape = infos.get(name), canonical_dtype(dtype), None if shape is None else tuple(map(int, shape))
        if info is None:
            raise CheckpointError("the model needs this section but the checkpoint has none", section=name)
        if info.dtype != dtype or shape not in (None, info.shape):
            raise CheckpointError(f"the file holds {info.describe()}, the model expects {dtype} "
                                  f"{'[any]' if shape is None else list(shape)}", section=name, offset=info.offset)
    sections = {name: _decode(view, infos[name], spans[name]) for name in (infos if expected is None else expected)}
    skipped = [name for name in spans if name not in sections and name not in (META, CHECKSUM)]
    return Checkpoint(step, sections, doc, infos, skipped, len(view), notes, True, sealed, doc["isv_slots"])


def _decode(view: memoryview, info: SectionInfo, span: SectionSpan):
    data = view[span.data_offset:span.end]
    if info.dtype in (ADAMW, BYTES):
        return unpack_adamw(data, info.name, span.data_offset) if info.dtype == ADAMW else bytes(data)
    dtype = np.dtype(info.dtype)
    if info.nbytes == 0:
        return np.zeros(info.shape, dtype)
    if dtype.kind == "b" and np.frombuffer(data, np.uint8).max() > 1:
        raise CheckpointError("a bool section holds bytes other than 0 and 1", section=info.name,
                              offset=span.data_offset)
    return np.frombuffer(data, dtype).astype(dtype.newbyteorder("="), copy=True).reshape(info.shape)
