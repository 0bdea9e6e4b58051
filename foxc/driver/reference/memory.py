"""A simulated device address space: each allocation is a numpy byte array at a fake, stable address."""
from __future__ import annotations

import bisect

import numpy as np

from ..errors import CudaError
from ..runtime import ArrayBase, DeviceArrayBase
from .registry import RefMem

_BASE = 0x7F00_0000_0000
_ALIGN = 256
_GUARD = 4096  # a gap after each allocation, so running off the end never lands in a neighbour


class AddressSpace:
    def __init__(self):
        self._next = _BASE
        self._bases: list[int] = []
        self._allocs: dict[int, tuple[np.ndarray, str]] = {}

    def allocate(self, nbytes: int, name: str) -> tuple[int, np.ndarray]:
        buf = np.zeros(max(nbytes, 1), np.uint8)
        addr = self._next
        self._next = (addr + buf.size + _GUARD + _ALIGN - 1) // _ALIGN * _ALIGN
        bisect.insort(self._bases, addr)
        self._allocs[addr] = (buf, name)
        return addr, buf

    def free(self, addr: int):
        self._allocs.pop(addr, None)
        i = bisect.bisect_left(self._bases, addr)
        if i < len(self._bases) and self._bases[i] == addr:
            self._bases.pop(i)

    def resolve(self, addr: int) -> RefMem:
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0:
            base = self._bases[i]
            buf, name = self._allocs[base]
            if addr < base + buf.size:
                return RefMem(buf, addr - base, name)
        raise CudaError(f"address 0x{addr:x} is not inside any live allocation (CUDA_ERROR_ILLEGAL_ADDRESS)",
                        result="CUDA_ERROR_ILLEGAL_ADDRESS")


class RefDeviceArray(DeviceArrayBase):
    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(rt, shape, dtype, name)
        self._addr, self._buf = rt.space.allocate(self.nbytes, name)
        self._buf[:] = 0xAB  # uninitialised device memory is not zero on a GPU either
        self._own(rt.space.free, self._addr)

    def _write(self, host: np.ndarray, stream):
        self._buf[:host.nbytes] = host.reshape(-1).view(np.uint8)

    def _read(self, out: np.ndarray, stream):
        out.reshape(-1).view(np.uint8)[:] = self._buf[:self.nbytes]


class RefMappedArray(ArrayBase):
    """Host memory that kernels address directly; on this backend host and device are one array."""

    _kind = "mapped array"

    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(rt, shape, dtype, name)
        self._addr, buf = rt.space.allocate(self.nbytes, name)
        self._own(rt.space.free, self._addr)
        self.host = buf[:self.nbytes].view(self.dtype).reshape(self.shape)
