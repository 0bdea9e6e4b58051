"""Device buffers, mapped-pinned host buffers and async copies (CUDA backend).

Frees wait for the context to go idle first, so nothing is released while a
stream may still use it; finalizers do the same and never raise at shutdown.
"""
from __future__ import annotations

import weakref

import numpy as np

from .arrays import ArrayBase, checked_host
from .errors import check
from .release import release


def _driver():
    from cuda.bindings import driver
    return driver


class _PinnedBlock:
    """Owns one cuMemHostAlloc block. Both the MappedArray and every numpy view of it hold the
    block (not each other), so the memory lives while either does and no reference cycle
    leaves its release to the cyclic garbage collector."""

    def __init__(self, nbytes: int, name: str):
        drv = _driver()
        flags = drv.CU_MEMHOSTALLOC_DEVICEMAP | drv.CU_MEMHOSTALLOC_PORTABLE
        self.addr = int(check(drv.cuMemHostAlloc(max(nbytes, 1), flags), "cuMemHostAlloc",
                              f"allocating {nbytes} mapped-pinned bytes for '{name}'"))
        self.finalizer = weakref.finalize(self, release, "cuMemFreeHost", self.addr)


class _HostView:
    """An array interface over a pinned block; numpy arrays made from it keep the block alive."""

    def __init__(self, block: _PinnedBlock, shape, dtype):
        self.block = block
        self.__array_interface__ = {"data": (block.addr, False), "shape": shape,
                                    "typestr": np.dtype(dtype).str, "version": 3}


class DeviceArray(ArrayBase):
    """`cuMemAlloc` memory of a fixed shape and dtype."""

    kind = "device array"

    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(shape, dtype, name)
        drv = _driver()
        self._rt = rt
        self._ctx = rt.ctx
        self._handle = check(drv.cuMemAlloc(max(self.nbytes, 1)), "cuMemAlloc",
                             f"allocating {self.nbytes} bytes for '{name}'")
        self._addr = int(self._handle)
        self._finalizer = weakref.finalize(self, release, "cuMemFree", self._handle)

    def upload(self, host: np.ndarray, stream=None):
        """Copy `host` (same dtype, at most this many bytes) into the array."""
        host = checked_host(host, self)
        copy_htod(self.ptr, host, stream or self._rt.stream, f"uploading '{self.name}'")

    def download(self, stream=None) -> np.ndarray:
        """A fresh host copy; waits for the copy to finish."""
        out = np.empty(self.shape, self.dtype)
        copy_dtoh(out, self.ptr, stream or self._rt.stream, f"downloading '{self.name}'")
        return out

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self._ctx.synchronize(f"waiting for the device before freeing '{self.name}'")
        check(_driver().cuMemFree(self._handle), "cuMemFree", f"freeing '{self.name}'")


class MappedArray(ArrayBase):
    """Pinned host memory mapped into the device's address space (DEVICEMAP | PORTABLE).

    `host` is a numpy view read and written without any copy; `ptr` is the
    address kernels use. Host reads see device writes once the writing work
    has completed (synchronize a stream or event first).
    """

    kind = "mapped array"

    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(shape, dtype, name)
        self._ctx = rt.ctx
        self._block = _PinnedBlock(self.nbytes, name)
        dev = check(_driver().cuMemHostGetDevicePointer(self._block.addr, 0), "cuMemHostGetDevicePointer",
                    f"mapping '{name}' into the device")
        self._addr = int(dev)
        self.host = np.asarray(_HostView(self._block, self.shape, self.dtype))

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._block.finalizer.detach()
        self._ctx.synchronize(f"waiting for the device before freeing '{self.name}'")
        check(_driver().cuMemFreeHost(self._block.addr), "cuMemFreeHost", f"freeing '{self.name}'")


def copy_htod(dst, host: np.ndarray, stream, doing: str):
    """Host to device on `stream`; returns once `host` may be reused (it may be a temporary)."""
    check(_driver().cuMemcpyHtoDAsync(int(dst), host.ctypes.data, host.nbytes, stream.handle),
          "cuMemcpyHtoDAsync", doing)
    if stream.capture_log is None:
        stream.synchronize(doing)


def copy_dtoh(host: np.ndarray, src, stream, doing: str):
    """Device to host on `stream`; returns once `host` holds the data."""
    check(_driver().cuMemcpyDtoHAsync(host.ctypes.data, int(src), host.nbytes, stream.handle),
          "cuMemcpyDtoHAsync", doing)
    stream.synchronize(doing)


def copy_dtod(dst, src, nbytes: int, stream, doing: str):
    """Device to device, ordered on `stream` and capturable."""
    check(_driver().cuMemcpyDtoDAsync(int(dst), int(src), nbytes, stream.handle),
          "cuMemcpyDtoDAsync", doing)
