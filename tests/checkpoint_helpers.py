"""Building FOXC files by hand for the checkpoint tests, independently of foxc's writer."""
import hashlib
import struct

import msgpack
import numpy as np
import pytest

from foxc.checkpoint import AdamState, CheckpointError, encode_checkpoint, parse_checkpoint
from foxc.isv.registry import SLOTS

MAGIC = 0x464F5843


def sample_state(rng, n_weights: int = 24) -> dict:
    """A small state dict with every kind of section."""
    return {
        "isv": np.array([s.bootstrap for s in SLOTS], np.float32),
        "dqn_w": rng.standard_normal((4, n_weights // 4)).astype(np.float32),
        "dqn_b": rng.standard_normal(4).astype(np.float32),
        "adam_dqn_w": AdamState(rng.standard_normal(n_weights).astype(np.float32),
                                rng.random(n_weights, dtype=np.float32), 17, 1e-4, 0.9, 0.999, 1e-8, 0.01),
        "replay_head": np.array([5, 9], np.int64),
        "prng": rng.integers(0, 2**32, (3, 4), dtype=np.uint32),
        "empty": np.zeros((0, 3), np.float32),
        "blob": b"simulator-state\x00\x01",
    }


def encoded_bytes(step: int, state: dict, meta: dict | None = None) -> bytes:
    """foxc's writer's file as one bytes object."""
    return b"".join(bytes(chunk) for chunk in encode_checkpoint(step, state, meta).chunks)


def section_header(name: bytes, data_len: int) -> bytes:
    return struct.pack("<H", len(name)) + name + struct.pack("<Q", data_len)


def container(sections, step: int = 1, magic: int = MAGIC, version: int = 1, count: int | None = None,
              seal: bool = True) -> bytes:
    """Header + framed sections (+ a correct `checksum` section last when `seal`), as the spec says."""
    sections = [(n.encode() if isinstance(n, str) else n, bytes(d)) for n, d in sections]
    n = len(sections) + (1 if seal else 0) if count is None else count
    head = struct.pack("<IIQI", magic, version, step, n)
    body = b"".join(section_header(name, len(data)) + data for name, data in sections)
    if not seal:
        return head + body
    digest = hashlib.sha256(head)
    for name, data in sections:
        digest.update(section_header(name, len(data)))
        digest.update(hashlib.sha256(data).digest())
    return head + body + section_header(b"checksum", 32) + digest.digest()


def meta_entry(dtype: str, shape, data: bytes) -> dict:
    return {"dtype": dtype, "shape": list(shape), "sha256": hashlib.sha256(data).hexdigest()}


def meta_doc(step: int = 1, sections: dict | None = None, **extra) -> dict:
    return {"foxc_version": "test", "step": step, "isv_slots": [s.name for s in SLOTS], "config": {},
            "data": None, "sections": sections or {}, **extra}


def packed(doc) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)


def split_sections(data: bytes) -> tuple[int, list[tuple[str, bytes]]]:
    """(step, [(name, data)]) of a well-formed file, parsed with struct alone."""
    magic, version, step, count = struct.unpack_from("<IIQI", data, 0)
    pos, out = 20, []
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2:pos + 2 + name_len].decode()
        (data_len,) = struct.unpack_from("<Q", data, pos + 2 + name_len)
        start = pos + 10 + name_len
        out.append((name, data[start:start + data_len]))
        pos = start + data_len
    assert pos == len(data)
    return step, out


def reseal(data: bytes) -> bytes:
    """Recompute the trailing checksum of a file whose framing is intact (an adversary that fixes checksums)."""
    step, sections = split_sections(data)
    assert sections[-1][0] == "checksum"
    return container(sections[:-1], step=step, magic=struct.unpack_from("<I", data)[0],
                     version=struct.unpack_from("<I", data, 4)[0])


def refused(data: bytes, *fragments, expected=None, reader=None) -> CheckpointError:
    """The CheckpointError parsing `data` (with parse_checkpoint, or `reader`) raises; its message holds every
    fragment."""
    with pytest.raises(CheckpointError) as info:
        reader(data) if reader else parse_checkpoint(data, expected)
    for fragment in fragments:
        assert fragment in str(info.value), f"'{fragment}' not in: {info.value}"
    return info.value
