"""Device memory and mapped-pinned host memory (CUDA backend).

A free waits for the runtime's stream first (stream.release), so nothing is freed while a launch
or a graph may still use it.
"""
from __future__ import annotations

import numpy as np
from cuda.bindings import driver

from .runtime import ArrayBase, DeviceArrayBase
from .errors import check
from .stream import release


class DeviceArray(DeviceArrayBase):
    """`cuMemAlloc` memory of a fixed shape and dtype."""

    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(rt, shape, dtype, name)
        self._addr = int(check(driver.cuMemAlloc(max(self.nbytes, 1)), "cuMemAlloc",
                               f"allocating {self.nbytes} bytes for '{name}'"))
        self._own(release, "cuMemFree", self._addr, f"freeing '{name}'", self._stream)

    def _write(self, host: np.ndarray, stream):
        doing = f"uploading '{self.name}'"
        check(driver.cuMemcpyHtoDAsync(self._addr, host.ctypes.data, host.nbytes, stream._handle),
              "cuMemcpyHtoDAsync", doing)
        stream.synchronize(doing)  # `host` may be a temporary

    def _read(self, out: np.ndarray, stream):
        doing = f"downloading '{self.name}'"
        check(driver.cuMemcpyDtoHAsync(out.ctypes.data, self._addr, out.nbytes, stream._handle),
              "cuMemcpyDtoHAsync", doing)
        stream.synchronize(doing)


class _Pinned:
    """A pinned block as an array interface: every numpy view of it holds it, so it outlives them all."""

    def __init__(self, addr: int, shape, dtype):
        self.__array_interface__ = {"data": (addr, False), "shape": shape, "typestr": dtype.str, "version": 3}


class MappedArray(ArrayBase):
    """Pinned host memory mapped into the device's address space (DEVICEMAP | PORTABLE).

    `host` is a numpy view read and written with no copy; `ptr` is the address kernels use. Host
    reads see device writes once the writing work has completed (synchronize a stream or event first).
    """

    _kind = "mapped array"

    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(rt, shape, dtype, name)
        flags = driver.CU_MEMHOSTALLOC_DEVICEMAP | driver.CU_MEMHOSTALLOC_PORTABLE
        host = int(check(driver.cuMemHostAlloc(max(self.nbytes, 1), flags), "cuMemHostAlloc",
                         f"allocating {self.nbytes} mapped-pinned bytes for '{name}'"))
        pinned = _Pinned(host, self.shape, self.dtype)
        # freed when the array and its last view are gone (or at close())
        self._own(release, "cuMemFreeHost", host, f"freeing '{name}'", self._stream, holder=pinned)
        self._addr = int(check(driver.cuMemHostGetDevicePointer(host, 0), "cuMemHostGetDevicePointer",
                               f"mapping '{name}' into the device"))
        self.host = np.asarray(pinned).view(self.dtype)  # the interface gives a structured dtype as raw bytes
