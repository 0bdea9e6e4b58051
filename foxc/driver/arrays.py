"""What device and mapped-pinned arrays share on both backends: shape, dtype, addresses, host copies."""
from __future__ import annotations

import math

import numpy as np

from .errors import CudaError
from .kernel_spec import DevPtr
from .lifecycle import Owned


class ArrayBase(Owned):
    """A typed allocation with a stable device address for its whole life."""

    _kind = "array"

    def __init__(self, rt, shape, dtype, name: str):
        self.shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        if any(s < 0 for s in self.shape):
            raise ValueError(f"'{name}': negative dimension in shape {self.shape}")
        self.dtype = np.dtype(dtype)
        self.name = name
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._stream = rt.stream  # where host copies go by default, and what a free waits for
        self._addr = 0

    @property
    def ptr(self) -> DevPtr:
        return self.at(0)

    def at(self, index: int) -> DevPtr:
        self._check_open()
        if not 0 <= index <= self.size:
            raise IndexError(f"{self._kind} '{self.name}': element {index} outside 0..{self.size}")
        return DevPtr(self._addr + index * self.dtype.itemsize, self)

    def _check_open(self):
        if self._closed:
            raise ValueError(f"{self._kind} '{self.name}' is closed")

    def __repr__(self):
        state = "closed" if self._closed else f"0x{self._addr:x}"
        return f"<{type(self).__name__} '{self.name}' {self.shape} {self.dtype} at {state}>"


class DeviceArrayBase(ArrayBase):
    """Device memory; each backend adds `_write(host, stream)` and `_read(out, stream)`."""

    _kind = "device array"

    def upload(self, host: np.ndarray, stream=None):
        stream = self._host_copy_stream(stream, "uploading")
        host = np.ascontiguousarray(host)
        if host.dtype != self.dtype:
            raise TypeError(f"'{self.name}' holds {self.dtype}, got {host.dtype}")
        if host.nbytes > self.nbytes:
            raise ValueError(f"'{self.name}' holds {self.nbytes} bytes, got {host.nbytes}")
        self._write(host, stream)

    def download(self, stream=None) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self._read(out, self._host_copy_stream(stream, "downloading"))
        return out

    def _host_copy_stream(self, stream, doing: str):
        self._check_open()
        stream = stream or self._stream
        if stream.capture_log is not None:  # a replay would copy from or to host memory that may be gone by then
            raise CudaError(f"{doing} '{self.name}' while stream '{stream.name}' is capturing a graph: a graph "
                            f"cannot hold a host copy. Copy before the capture, or from a device buffer (copy_dtod)")
        return stream
