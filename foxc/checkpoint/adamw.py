"""The AdamW wire format: one optimizer state as the bytes of an `adam_<tensor>` section.

Little-endian: `u64 n`, `i32 step`, `f32 lr, beta1, beta2, eps, wd`, `f32 m[n]`, `f32 v[n]`: a 32-byte head, then
8·n bytes of moments.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..numbers import whole
from .errors import CheckpointError

HEAD = struct.Struct("<Qi5f")
F32 = np.dtype("<f4")
SETTINGS = ("lr", "beta1", "beta2", "eps", "wd")


@dataclass(eq=False)
class AdamState:
    """One AdamW optimizer's state: both moments (float32, one per parameter) and its settings."""
    m: np.ndarray
    v: np.ndarray
    step: int
    lr: float
    beta1: float
    beta2: float
    eps: float
    wd: float

    def __post_init__(self):
        self.m, self.v = np.asarray(self.m), np.asarray(self.v)
        assert self.m.dtype == self.v.dtype == np.float32 and self.m.ndim == 1 and self.m.shape == self.v.shape, \
            f"AdamState: m and v must be 1-D float32 of one length, got {self.m.dtype} {self.m.shape}, {self.v.shape}"
        assert whole(self.step) and -2**31 <= self.step < 2**31, f"AdamState.step: not a whole i32, {self.step!r}"
        self.step = int(self.step)
        for label in SETTINGS:  # float32 on the wire and on the device: a state round-trips equal
            value = getattr(self, label)
            assert whole(value) or isinstance(value, (float, np.floating)), f"AdamState.{label}: {value!r}"
            setattr(self, label, float(np.float32(value)))

    @property
    def n(self) -> int:
        return int(self.m.size)

    @property
    def settings(self) -> dict[str, float]:
        return {"step": self.step, **{label: getattr(self, label) for label in SETTINGS}}


def wire_size(n: int) -> int:
    return HEAD.size + 8 * n


def adamw_chunks(state: AdamState) -> list:
    """The wire format as buffers to write one after the other (the moments are not copied)."""
    head = HEAD.pack(state.n, state.step, *(getattr(state, k) for k in SETTINGS))
    return [head, le_bytes(state.m), le_bytes(state.v)]


def unpack_adamw(data, section: str = "adamw", offset: int = 0) -> AdamState:
    """Parse the wire format; `section` and `offset` (of the data in its file) name errors."""
    view = memoryview(data).cast("B")
    size = len(view)
    if size < HEAD.size:
        raise CheckpointError(f"AdamW state of {size} bytes is shorter than its {HEAD.size}-byte head",
                              section=section, offset=offset)
    n, step, *settings = HEAD.unpack_from(view, 0)
    if wire_size(n) != size:
        raise CheckpointError(f"AdamW n = {n} needs {HEAD.size} + 8·n bytes but the section holds {size}",
                              section=section, offset=offset)
    moments = np.frombuffer(view, F32, 2 * n, HEAD.size).astype(np.float32)  # a copy, in native order
    return AdamState(moments[:n], moments[n:], step, *settings)


def le_bytes(array: np.ndarray, dtype=F32) -> memoryview:
    """The array's bytes as `dtype` (little-endian), flat; not copied when the array already is."""
    return memoryview(np.ascontiguousarray(array, dtype=dtype).reshape(-1).view(np.uint8))
