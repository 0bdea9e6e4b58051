"""The AdamW wire format: one optimizer state as the bytes of an `adam_<tensor>` section.

Little-endian: `u64 n`, `i32 step`, `f32 lr, beta1, beta2, eps, wd`, `f32 m[n]`,
`f32 v[n]` — a 32-byte head, then 8·n bytes of moments.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .errors import CheckpointError

HEAD = struct.Struct("<Qi5f")
F32 = np.dtype("<f4")
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


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
        for label in ("m", "v"):
            moment = np.asarray(getattr(self, label))
            if moment.ndim != 1 or moment.dtype != np.float32:
                raise ValueError(f"AdamState.{label} must be a 1-D float32 array, got {moment.dtype} {list(moment.shape)}")
            setattr(self, label, moment)
        if self.m.shape != self.v.shape:
            raise ValueError(f"AdamState m has {self.m.size} values but v has {self.v.size}")
        if not integer(self.step) or not I32_MIN <= int(self.step) <= I32_MAX:  # 1.5 was saved as 1
            raise ValueError(f"AdamState.step must be a whole number in the wire format's i32, got {self.step!r}")
        self.step = int(self.step)
        for label in ("lr", "beta1", "beta2", "eps", "wd"):  # float32 on the wire and on the device
            value = getattr(self, label)
            if not integer(value) and not isinstance(value, (float, np.floating)):
                raise ValueError(f"AdamState.{label} must be a number, got {value!r}")
            setattr(self, label, float(np.float32(value)))

    @property
    def n(self) -> int:
        return int(self.m.size)

    @property
    def settings(self) -> dict[str, float]:
        return {"step": self.step, "lr": self.lr, "beta1": self.beta1, "beta2": self.beta2,
                "eps": self.eps, "wd": self.wd}


def integer(value) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def wire_size(n: int) -> int:
    return HEAD.size + 8 * n


def adamw_chunks(state: AdamState) -> list:
    """The wire format as buffers to write one after the other (the moments are not copied)."""
    head = HEAD.pack(state.n, state.step, state.lr, state.beta1, state.beta2, state.eps, state.wd)
    return [head, le_bytes(state.m), le_bytes(state.v)]


def unpack_adamw(data, section: str = "adamw", offset: int = 0) -> AdamState:
    """Parse the wire format; `section` and `offset` (of the data in its file) name errors."""
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data
    size = len(view)
    if size < HEAD.size:
        raise CheckpointError(f"AdamW state of {size} bytes is shorter than its {HEAD.size}-byte head",
                              section=section, offset=offset)
    n, step, lr, beta1, beta2, eps, wd = HEAD.unpack_from(view, 0)
    if n > (size - HEAD.size) // 8 or wire_size(n) != size:
        raise CheckpointError(f"AdamW n = {n} needs {HEAD.size} + 8·n bytes but the section holds {size}",
                              section=section, offset=offset)
    m = np.frombuffer(view, F32, n, HEAD.size).astype(np.float32)
    v = np.frombuffer(view, F32, n, HEAD.size + 4 * n).astype(np.float32)
    return AdamState(m, v, step, lr, beta1, beta2, eps, wd)


def le_bytes(array: np.ndarray, dtype=F32) -> memoryview:
    """The array's bytes as `dtype` (little-endian), flat; not copied when the array already is."""
    flat = np.ascontiguousarray(array, dtype=dtype).reshape(-1)
    return memoryview(flat.view(np.uint8))
