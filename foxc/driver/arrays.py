"""What device and mapped-pinned arrays share on both backends: shape, dtype, pointers."""
from __future__ import annotations

import math

import numpy as np

from .kernel_spec import DevPtr


def normalize_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return shape


class ArrayBase:
    """A typed allocation with a stable device address for its whole life."""

    kind = "array"

    def __init__(self, shape, dtype, name: str):
        self.shape = normalize_shape(shape)
        self.dtype = np.dtype(dtype)
        self.name = name
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._addr = 0
        self._closed = False

    @property
    def ptr(self) -> DevPtr:
        """The device address of element 0; keeps this array alive while held."""
        if self._closed:
            raise ValueError(f"{self.kind} '{self.name}' is closed")
        return DevPtr(self._addr, self)

    def at(self, index: int) -> DevPtr:
        """The device address of flat element `index`."""
        if not 0 <= index <= self.size:
            raise IndexError(f"{self.kind} '{self.name}': element {index} outside 0..{self.size}")
        return DevPtr(self._addr + index * self.dtype.itemsize, self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._closed else f"0x{self._addr:x}"
        return f"<{type(self).__name__} '{self.name}' {self.shape} {self.dtype} at {state}>"


def checked_host(host: np.ndarray, dst: ArrayBase) -> np.ndarray:
    """`host` as a contiguous array that fits `dst`: same dtype, at most as many bytes."""
    host = np.ascontiguousarray(host)
    if host.dtype != dst.dtype:
        raise TypeError(f"'{dst.name}' holds {dst.dtype}, got {host.dtype}")
    if host.nbytes > dst.nbytes:
        raise ValueError(f"'{dst.name}' holds {dst.nbytes} bytes, got {host.nbytes}")
    return host
