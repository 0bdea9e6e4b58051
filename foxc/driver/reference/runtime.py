"""The reference backend: the runtime on numpy, the same objects and calls as the CUDA backend's.

Memory is a simulated address space, each allocation a numpy byte array at a fake, stable address. A launch
runs the kernel's numpy reference at once, in stream order; a capture records launches and device copies
instead, and its graph replays them.
"""
from __future__ import annotations

import bisect
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

from ..errors import CudaError
from ..kernel_spec import PTR, KernelSpec
from ..lifecycle import Owned
from ..runtime import ArrayBase, CaptureBase, DeviceArrayBase, GraphBase, PlanBase, Runtime
from .registry import LaunchInfo, RefMem, reference_for


# What the reference backend reports as free device memory: a fixed figure, so defaults sized from it
# (the trainer's data budget) are the same on every machine.
REFERENCE_FREE_BYTES = 2_000_000_000

_BASE = 0x7F00_0000_0000
_ALIGN = 256
_GUARD = 4096  # a gap after each allocation, so running off the end never lands in a neighbour


class AddressSpace:
    """The simulated device memory: allocations at addresses that never move, a guard gap between them."""

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
    """Host and device are one array on this backend."""

    _kind = "mapped array"

    def __init__(self, rt, shape, dtype, name: str):
        super().__init__(rt, shape, dtype, name)
        self._addr, buf = rt.space.allocate(self.nbytes, name)
        self._own(rt.space.free, self._addr)
        self.host = buf[:self.nbytes].view(self.dtype).reshape(self.shape)

# The reference kernels multiply small matrices (a few hundred rows) thousands of times a second;
# OpenBLAS's default of one thread per core spends more on waking threads than on arithmetic (runs
# were up to 9x slower on two cores), so BLAS gets one thread unless the user chose a count.
USER_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
_blas_limits = None  # the process-wide pin, kept so it is not released


def pin_blas_threads() -> str:
    """Pin BLAS to one thread (once per process) unless an environment variable chose; say which."""
    global _blas_limits
    chosen = next((k for k in USER_SETTINGS if os.environ.get(k)), None)
    if chosen:
        return f"{chosen}={os.environ[chosen]}"
    if _blas_limits is None:
        _blas_limits = threadpool_limits(limits=1, user_api="blas")
    return "1 (pinned; set OPENBLAS_NUM_THREADS to choose)"


def _issue(stream: RefStream, work: list):
    """Run `work` (plans and copies) now, or record it into the capture open on `stream`."""
    if stream.capture_log is not None:
        stream.capture_log.extend(work)
    else:
        for entry in work:
            entry._run()


class RefStream(Owned):
    def __init__(self, name: str, urgent: bool = False):
        self.name, self.urgent = name, urgent  # urgent has no effect here: work runs in issue order
        self.capture_log = None

    def synchronize(self, doing: str | None = None):
        pass  # every launch has run by the time it returns

    def wait(self, event: RefEvent):
        pass  # what the event marks has run already


class RefEvent(Owned):
    """Host time: each launch runs to completion as it is issued."""

    def __init__(self, name: str = "event"):
        self.name = name
        self._t = None

    def record(self, stream: RefStream):
        self._t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_ms(self, end: RefEvent) -> float:
        if self._t is None or end._t is None:
            raise ValueError(f"event '{self.name if self._t is None else end.name}' was never recorded")
        return (end._t - self._t) * 1e3


class RefKernel:
    def __init__(self, spec: KernelSpec):
        self.name, self.spec = spec.name, spec
        self._run = reference_for(spec)


class RefLaunchPlan(PlanBase):
    def __init__(self, rt: ReferenceRuntime, kernel: RefKernel, grid, block, args, shared_bytes: int = 0):
        super().__init__(kernel, grid, block, args, shared_bytes)
        self._args = [LaunchInfo(self._grid, self._block, self._shared_bytes, rt.space)] + [
            rt.space.resolve(v.addr) if p.kind is PTR else v for p, v in zip(kernel.spec.params, self.values)]

    def _run(self):
        self.kernel._run(*self._args)

    def launch(self, stream: RefStream):
        _issue(stream, [self])


class _DeviceCopy:
    def __init__(self, rt: ReferenceRuntime, dst, src, nbytes: int):
        self._space, self._dst, self._src, self._nbytes = rt.space, dst, src, nbytes  # DevPtrs keep buffers alive

    def _run(self):
        n = self._nbytes
        self._space.resolve(int(self._dst)).u8(n)[:] = self._space.resolve(int(self._src)).u8(n)


class RefGraph(GraphBase):
    def node_count(self) -> int:
        return len(self.plans)

    def launch(self, stream: RefStream):
        _issue(stream, self.plans)


class RefCapture(CaptureBase):
    def _begin(self):
        pass

    def _end(self, log: list, failed: bool) -> RefGraph | None:
        return None if failed else RefGraph(log, self._name)


class ReferenceRuntime(Runtime):
    backend = "reference"
    _device_array, _mapped_array, _stream, _event, _plan, _capture = (RefDeviceArray, RefMappedArray, RefStream,
                                                                      RefEvent, RefLaunchPlan, RefCapture)

    def __init__(self, reason: str = "asked for"):
        super().__init__(reason, f"numpy reference (CPU, BLAS threads {pin_blas_threads()})", RefStream("main"))
        self.space = AddressSpace()
        self._own(self._kernels.clear)  # as a CUDA runtime's close unloads its kernels; and marks it closed

    def _load_kernel(self, spec: KernelSpec) -> RefKernel:
        return RefKernel(spec)

    def copy_dtod(self, dst, src, nbytes: int, stream: RefStream | None = None):
        _issue(stream or self.stream, [_DeviceCopy(self, dst, src, nbytes)])

    def free_bytes(self) -> int:
        return REFERENCE_FREE_BYTES

    def synchronize(self):
        pass
