"""The reference backend: the runtime on numpy.

Same objects and calls as the CUDA backend. A launch runs the kernel's numpy reference at once, in
stream order; a capture records launches and device copies instead, and its graph replays them.
"""
from __future__ import annotations

import os
import time

from threadpoolctl import threadpool_limits

from ..errors import CudaError
from ..kernel_spec import PTR, KernelSpec
from ..lifecycle import Owned
from ..runtime import CaptureBase, GraphBase, PlanBase, RuntimeBase
from .memory import AddressSpace, RefDeviceArray, RefMappedArray
from .registry import LaunchInfo, reference_for


# What the reference backend reports as free device memory: a fixed figure, so defaults sized from it
# (the trainer's data budget) are the same on every machine.
REFERENCE_FREE_BYTES = 2_000_000_000

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
            raise CudaError(f"event '{self.name if self._t is None else end.name}' was never recorded",
                            result="CUDA_ERROR_INVALID_HANDLE")
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


class ReferenceRuntime(RuntimeBase):
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
