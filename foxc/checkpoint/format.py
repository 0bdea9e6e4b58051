"""FOXC v1: the checkpoint file, written whole and read as hostile input.

Little-endian throughout:
    header   magic u32 = 0x464F5843 ("FOXC"), version u32 = 1, step u64, n_sections u32
    section  name_len u16, name (UTF-8, 1..1024 bytes), data_len u64, data    (n_sections times)

foxc writes `meta` first (msgpack; see meta.py), then the state sections in the
order given, then `checksum` last: 32 bytes, the sha256 of the 20-byte header
followed, for every earlier section, by its header bytes (name_len, name,
data_len) and the sha256 of its data. Per-section digests (in meta) name the
damaged section; the file digest covers everything else, so no flipped byte
anywhere goes unnoticed.

The reader checks every length against the bytes that remain before it uses
it, allocates nothing larger than the file, accounts for the last byte exactly,
and answers every problem with one CheckpointError naming the section and byte
offset. Sections the meta does not describe, or the caller did not ask for, are
skipped and listed (forward compatibility).

Other writers of FOXC v1 (the Rust trainer, see seed_layout.py) leave out `meta`,
`checksum` or both. Such a file still reads, with `Checkpoint.notes` saying what
cannot be known or verified; without a meta it can be inspected but never
resumed from (a read with `expected` refuses it). Without a checksum, a section
the meta does not describe is refused rather than skipped: nothing vouches for
it, and it may be a damaged `checksum`.
"""
from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import __version__
from ..paths import file_kind
from ..isv.registry import SLOTS
from . import seed_layout
from .adamw import AdamState, adamw_chunks, le_bytes, unpack_adamw
from .atomic import atomic_write
from .errors import CheckpointError
from .meta import (ADAMW, BYTES, RESERVED_KEYS, SectionInfo, canonical_dtype, check_meta, decode_meta,
                   describe_value, encode_meta)

MAGIC = 0x464F5843
VERSION = 1
HEADER = struct.Struct("<IIQI")
NAME_LEN = struct.Struct("<H")
DATA_LEN = struct.Struct("<Q")
MAX_NAME_LEN = 1024
SECTION_OVERHEAD = NAME_LEN.size + DATA_LEN.size
META = "meta"
CHECKSUM = "checksum"
DIGEST_BYTES = 32
NOT_RESUMABLE = ("written without a 'meta' section (the Rust trainer's layout?): foxc can inspect it "
                 "(foxc-ckpt-inspect) but cannot resume from it — its configuration and data are unknown")


# ---------------------------------------------------------------------------------------------
# The container: header and section framing.

@dataclass(frozen=True)
class SectionSpan:
    """Where one section lies in a file."""
    name: str
    offset: int        # of its name_len field
    data_offset: int
    data_len: int

    @property
    def end(self) -> int:
        return self.data_offset + self.data_len


def parse_layout(buf) -> tuple[int, dict[str, SectionSpan]]:
    """Parse the header and section framing of a whole file held in `buf` (bytes, mmap, memoryview):
    its step, and its sections by name in file order."""
    view = _byte_view(buf)
    size = len(view)
    check_header(view)
    magic, version, step, count = HEADER.unpack_from(view, 0)
    pos = HEADER.size
    if count * SECTION_OVERHEAD > size - pos:
        raise CheckpointError(f"n_sections {count} cannot fit in the {size - pos} bytes after the header", offset=16)

    spans = {}
    for index in range(count):
        label = f"#{index}"
        if size - pos < NAME_LEN.size:
            raise CheckpointError(f"short file: the section header is cut off after {size - pos} bytes",
                                  section=label, offset=pos)
        (name_len,) = NAME_LEN.unpack_from(view, pos)
        if not 1 <= name_len <= MAX_NAME_LEN:
            raise CheckpointError(f"name_len {name_len} is outside 1..{MAX_NAME_LEN}", section=label, offset=pos)
        name_at = pos + NAME_LEN.size
        if name_len + DATA_LEN.size > size - name_at:
            raise CheckpointError(f"short file: name_len {name_len} and data_len run past the end of the file "
                                  f"({size - name_at} bytes remain)", section=label, offset=pos)
        try:
            name = bytes(view[name_at:name_at + name_len]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CheckpointError(f"the name is not valid UTF-8 ({exc.reason} at name byte {exc.start})",
                                  section=label, offset=name_at) from None
        len_at = name_at + name_len
        (data_len,) = DATA_LEN.unpack_from(view, len_at)
        data_at = len_at + DATA_LEN.size
        if data_len > size - data_at:
            raise CheckpointError(f"data_len {data_len} runs past the end of the file ({size - data_at} bytes remain)",
                                  section=name, offset=len_at)
        if name in spans:
            raise CheckpointError(f"duplicate section name (first at byte {spans[name].offset})", section=name,
                                  offset=pos)
        spans[name] = SectionSpan(name, pos, data_at, data_len)
        pos = data_at + data_len
    if pos != size:
        raise CheckpointError(f"{size - pos} trailing bytes after the last section", offset=pos)
    return step, spans


def check_header(head) -> None:
    """Refuse a file by its first bytes: cut short before the header's end, a bad magic or version."""
    if len(head) < HEADER.size:
        raise CheckpointError(f"short file: {len(head)} bytes, the header alone needs {HEADER.size}", offset=0)
    magic, version, _, _ = HEADER.unpack_from(head, 0)
    if magic != MAGIC:
        raise CheckpointError(f"bad magic {magic:#010x} (a FOXC checkpoint starts with u32 {MAGIC:#010x}, "
                              "the bytes 'CXOF')",
                              offset=0)
    if version != VERSION:
        raise CheckpointError(f"unsupported version {version} (this reader knows version {VERSION})", offset=4)


def _byte_view(buf) -> memoryview:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.ndim != 1 or view.itemsize != 1 or not view.contiguous:
        view = view.cast("B")
    return view


def _section_header(name: str, data_len: int) -> bytes:
    raw = name.encode("utf-8")
    return NAME_LEN.pack(len(raw)) + raw + DATA_LEN.pack(data_len)


def _seal(header, framed: list) -> bytes:
    """The checksum section's data: sha256 over the header, then each section's header and data digest."""
    digest = hashlib.sha256(header)
    for section_header, data_digest in framed:
        digest.update(section_header)
        digest.update(data_digest)
    return digest.digest()


# ---------------------------------------------------------------------------------------------
# Writing.

@dataclass
class EncodedCheckpoint:
    """A checkpoint as a list of buffers to write in order (array data is not copied)."""
    chunks: list
    size: int


def encode_checkpoint(step: int, sections: dict, meta: dict | None = None) -> EncodedCheckpoint:
    """Lay out a checkpoint: `sections` maps names to numpy arrays, AdamState or bytes.

    `meta` carries `config` (a map), `data` (the data source and its hash) and any
    other msgpack-able keys; foxc fills in its version, the step, the ISV slot names
    and every section's dtype, shape and sha256.
    """
    meta = dict(meta or {})
    if not isinstance(step, (int, np.integer)) or not 0 <= int(step) < 1 << 64:
        raise ValueError(f"step must be an integer in 0..2^64-1, got {step!r}")
    step = int(step)
    clash = RESERVED_KEYS & meta.keys()
    if clash:
        raise ValueError(f"meta keys {sorted(clash)} are filled in by the writer")
    payloads, entries = {}, {}
    for name, value in sections.items():
        _check_name(name)
        dtype, shape = describe_value(value)
        chunks = _payload(value)
        digest = hashlib.sha256()
        for chunk in chunks:
            digest.update(chunk)
        payloads[name] = (chunks, sum(memoryview(c).nbytes for c in chunks), digest.digest())
        entries[name] = {"dtype": dtype, "shape": list(shape), "sha256": digest.hexdigest()}
    isv = entries.get("isv")
    if isv is not None and (isv["dtype"] != "<f4" or isv["shape"] != [len(SLOTS)]):
        raise ValueError(f"section 'isv' must be float32 [{len(SLOTS)}] (the registry's slots), "
                         f"got {isv['dtype']} {isv['shape']}")
    doc = {"foxc_version": __version__, "step": step, "isv_slots": [s.name for s in SLOTS],
           "config": meta.pop("config", {}), "data": meta.pop("data", None), **meta, "sections": entries}
    if not isinstance(doc["config"], dict):
        raise ValueError(f"meta['config'] must be a dict, got {type(doc['config']).__name__}")
    if doc["data"] is not None and not isinstance(doc["data"], dict):
        raise ValueError(f"meta['data'] must be a dict or None, got {type(doc['data']).__name__}")
    meta_bytes = encode_meta(doc)
    payloads = {META: ([meta_bytes], len(meta_bytes), hashlib.sha256(meta_bytes).digest()), **payloads}

    header = HEADER.pack(MAGIC, VERSION, step, len(payloads) + 1)
    chunks, framed = [header], []
    for name, (data, nbytes, digest) in payloads.items():
        section_header = _section_header(name, nbytes)
        framed.append((section_header, digest))
        chunks += [section_header, *data]
    chunks += [_section_header(CHECKSUM, DIGEST_BYTES), _seal(header, framed)]
    return EncodedCheckpoint(chunks, sum(memoryview(c).nbytes for c in chunks))


def _check_name(name) -> None:
    if not isinstance(name, str):
        raise TypeError(f"section names are str, got {type(name).__name__}")
    if name in (META, CHECKSUM):
        raise ValueError(f"section name '{name}' is reserved for the writer")
    if not 1 <= len(name.encode("utf-8")) <= MAX_NAME_LEN:
        raise ValueError(f"section name '{name[:40]}' must be 1..{MAX_NAME_LEN} bytes of UTF-8")


def _payload(value) -> list:
    if isinstance(value, AdamState):
        return adamw_chunks(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return [_byte_view(value)]
    array = np.asarray(value)
    return [le_bytes(array, canonical_dtype(array.dtype))]


def write_checkpoint(path, step: int, sections: dict, meta: dict | None = None) -> Path:
    """Save atomically to `path` (temporary file, fsync, rename, fsync of the directory).

    Raises CheckpointSaveError when the save fails; `path` is then as it was before.
    """
    path = Path(path)
    atomic_write(path, encode_checkpoint(step, sections, meta).chunks)
    return path


# ---------------------------------------------------------------------------------------------
# Reading.

@dataclass
class Checkpoint:
    """A checkpoint read and verified: typed sections by name, and what the meta says about them.

    A file without a meta (`has_meta` false) has `meta` {} and inferred `infos`; one without a
    checksum has `sealed` false; `notes` says what that leaves unknown or unverified.
    """
    step: int
    sections: dict
    meta: dict
    infos: dict[str, SectionInfo]
    skipped: list[str] = field(default_factory=list)
    size: int = 0
    notes: list[str] = field(default_factory=list)
    has_meta: bool = True
    sealed: bool = True

    def __getitem__(self, name: str):
        return self.sections[name]

    @property
    def n_sections(self) -> int:
        """As the header counts them: the state sections, skipped ones, meta and checksum."""
        return len(self.sections) + len(self.skipped) + self.has_meta + self.sealed

    @property
    def config(self) -> dict:
        if not self.has_meta:
            raise CheckpointError(NOT_RESUMABLE)
        return self.meta["config"]

    @property
    def isv_slots(self) -> list[str]:
        """The ISV slot names: the meta's, or for a file without one the seed's where it documents them."""
        if self.has_meta:
            return self.meta["isv_slots"]
        isv = self.sections.get("isv")
        return seed_layout.isv_slot_names(isv.size if isinstance(isv, np.ndarray) else 0)

    def isv(self) -> dict[str, float]:
        """The ISV bus by slot name, as the file names its slots."""
        if "isv" not in self.sections or not isinstance(self.sections["isv"], np.ndarray):
            raise CheckpointError("the checkpoint has no 'isv' section of float32 values")
        return {name: float(value) for name, value in zip(self.isv_slots, self.sections["isv"])}


def read_checkpoint(path, expected: dict | None = None, check_meta_first=None) -> Checkpoint:
    """Read and verify a checkpoint file; see parse_checkpoint for `expected` and `check_meta_first`.

    The file is read whole into one buffer of exactly its size (not mapped: a map
    of a file that another process truncates would fault), then parsed.
    """
    path = Path(path)
    _regular_file(path, path)  # before the open: a FIFO's waits for a writer
    try:
        with open(path, "rb") as f:
            _regular_file(f.fileno(), path)  # what was opened (the path may name another file by now)
            info = os.fstat(f.fileno())
            try:  # by its first bytes, before the whole of a large file that is no checkpoint is read
                check_header(f.read(HEADER.size))
            except CheckpointError as exc:
                raise exc.with_path(path) from None
            f.seek(0)
            try:
                data = np.empty(info.st_size, np.uint8)  # not zero-filled: every byte is read into
            except MemoryError:
                raise CheckpointError(f"cannot read: its {info.st_size:,} bytes do not fit in memory",
                                      path=path) from None
            filled = f.readinto(data)  # a buffered file reads until the buffer is full or the file ends
            if filled < data.size:
                raise CheckpointError(f"shrank while being read ({filled} of {data.size} bytes)", path=path)
            if f.read(1):
                raise CheckpointError("grew while being read", path=path)
    except OSError as exc:
        raise CheckpointError(f"cannot read: {exc.strerror or exc}", path=path) from None
    try:
        ckpt = parse_checkpoint(data, expected, check_meta_first)
    except CheckpointError as exc:  # every message names the file it came from
        raise exc.with_path(path) from None
    if not ckpt.has_meta and seed_layout.looks_like_seed(ckpt.sections):
        ckpt.notes.append(seed_layout.encoder_note(path))
    return ckpt


def _regular_file(target, path: Path) -> None:
    kind = file_kind(target)
    if kind:
        raise CheckpointError(f"{kind}, not a checkpoint file (a checkpoint is a regular file)", path=path)


def parse_checkpoint(buf, expected: dict | None = None, check_meta_first=None) -> Checkpoint:
    """Verify a whole checkpoint held in `buf` and decode its sections.

    `expected` maps section names to (dtype, shape) — a numpy dtype, "adamw" or
    "bytes"; shape None accepts any — as the model holds them (expected_from(state)
    builds it). Each must be present with exactly that type and shape; other
    sections are skipped and listed in `Checkpoint.skipped`. Without `expected`,
    every section the meta describes is decoded. `check_meta_first(meta)`, when given, runs
    once the file is verified and before the sections are matched against `expected`, so a
    caller can refuse a different configuration by name rather than by a section's shape.

    A file without a meta is decoded whole with inferred types (seed_layout.py) and refused
    whenever `expected` is given: nothing in it says which run it continues.
    """
    view = _byte_view(buf)
    step, spans = parse_layout(view)
    seal = _seal_span(spans)
    body = [s for s in spans.values() if s is not seal]
    digests = {s.name: hashlib.sha256(view[s.data_offset:s.end]).digest() for s in body}
    framed = [(view[s.offset:s.data_offset], digests[s.name]) for s in body]
    intact = seal is None or _seal(view[:HEADER.size], framed) == view[seal.data_offset:seal.end]
    meta_span = spans.get(META)
    if meta_span is None:
        if not intact:
            raise CheckpointError("file checksum mismatch: the file was altered or damaged (it has no meta to "
                                  "name the section)", section=CHECKSUM, offset=seal.offset)
        if expected is not None:
            raise CheckpointError(NOT_RESUMABLE)
        return _parse_without_meta(view, step, body, digests, seal is not None)

    # The meta is checked first: its per-section digests name a damaged section precisely.
    doc = decode_meta(view[meta_span.data_offset:meta_span.end], meta_span.data_offset)
    infos = check_meta(doc, step, spans, digests, meta_span.data_offset)
    if not intact:
        raise CheckpointError("file checksum mismatch: the header, a section header or the meta was altered "
                              "(every section's data matches its sha256)", section=CHECKSUM, offset=seal.offset)
    notes = []
    if seal is None:
        loose = next((s for s in body if s.name != META and s.name not in infos), None)
        if loose is not None:
            raise CheckpointError("the meta does not describe this section and there is no checksum to vouch for "
                                  "it (a damaged 'checksum' section?)", section=loose.name, offset=loose.offset)
        notes.append("no 'checksum' section: every section's data is verified against the meta's sha256, but the "
                     "header, the section framing and the meta itself are not sealed (an altered configuration "
                     "or data hash in the meta would go unnoticed)")

    if check_meta_first is not None:
        check_meta_first(doc)
    wanted = infos if expected is None else _match_expected(infos, expected)
    sections = {name: _decode(view, infos[name], spans[name]) for name in wanted}
    skipped = [name for name in spans if name not in sections and name not in (META, CHECKSUM)]
    return Checkpoint(step, sections, doc, infos, skipped, len(view), notes, True, seal is not None)


def _seal_span(spans: dict[str, SectionSpan]) -> SectionSpan | None:
    """The `checksum` section, when there is one: it must be last and hold one sha256."""
    seal = spans.get(CHECKSUM)
    if seal is None:
        return None
    if seal is not next(reversed(spans.values())):
        raise CheckpointError("must be the last section", section=CHECKSUM, offset=seal.offset)
    if seal.data_len != DIGEST_BYTES:
        raise CheckpointError(f"holds {seal.data_len} bytes, not a {DIGEST_BYTES}-byte sha256",
                              section=CHECKSUM, offset=seal.offset)
    return seal


def _parse_without_meta(view: memoryview, step: int, body, digests: dict, sealed: bool) -> Checkpoint:
    """Every section decoded with an inferred type, and notes on what the missing meta leaves unknown."""
    sections, infos, problems = {}, {}, []
    for span in body:
        value, info, problem = seed_layout.infer_section(span.name, view[span.data_offset:span.end], span.offset,
                                                         span.data_offset, digests[span.name].hex())
        sections[span.name], infos[span.name] = value, info
        if problem is not None:
            problems.append(problem)
    notes = seed_layout.notes_without_meta(sections, sealed, problems)
    return Checkpoint(step, sections, {}, infos, [], len(view), notes, False, sealed)


def _match_expected(infos: dict[str, SectionInfo], expected: dict) -> list[str]:
    for name, (dtype, shape) in expected.items():
        info = infos.get(name)
        if info is None:
            raise CheckpointError("the model needs this section but the checkpoint has none", section=name)
        want_dtype = canonical_dtype(dtype)
        want_shape = None if shape is None else tuple(int(d) for d in shape)
        if info.dtype != want_dtype or (want_shape is not None and info.shape != want_shape):
            want = f"{want_dtype} {list(want_shape) if want_shape is not None else '[any]'}"
            raise CheckpointError(f"the file holds {info.describe()}, the model expects {want}",
                                  section=name, offset=info.offset)
    return list(expected)


def _decode(view: memoryview, info: SectionInfo, span: SectionSpan):
    data = view[span.data_offset:span.end]
    if info.dtype == ADAMW:
        return unpack_adamw(data, info.name, span.data_offset)
    if info.dtype == BYTES:
        return bytes(data)
    dtype = np.dtype(info.dtype)
    if info.nbytes == 0:
        return np.zeros(info.shape, dtype)
    if dtype.kind == "b" and np.frombuffer(data, np.uint8).max() > 1:
        raise CheckpointError("a bool section holds bytes other than 0 and 1", section=info.name,
                              offset=span.data_offset)
    return np.frombuffer(data, dtype).astype(dtype.newbyteorder("="), copy=True).reshape(info.shape)
