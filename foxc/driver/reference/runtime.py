"""The reference backend behind the runtime API.

Same objects and calls as the CUDA backend; launches run the numpy reference
of the kernel at once, in stream order. A capture records the launches and
copies instead of running them, and the graph replays the recording.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import CudaError
from ..kernel_spec import PTR, KernelSpec, convert_args
from ..launch import MAX_THREADS_PER_BLOCK, launch_dims
from .blas import pin_blas_threads
from .memory import AddressSpace, RefDeviceArray, RefMappedArray
from .registry import LaunchInfo, reference_for


class RefStream:
    def __init__(self, name: str):
        self.name = name
        self.capture_log = None

    def synchronize(self, doing: str | None = None):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class RefEvent:
    def __init__(self, name: str):
        self.name = name
        self.t = None

    def record(self, stream):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def query(self) -> bool:
        return True

    def elapsed_ms(self, end: "RefEvent") -> float:
        if self.t is None or end.t is None:
            raise CudaError(f"event '{self.name if self.t is None else end.name}' was never recorded",
                            result="CUDA_ERROR_INVALID_HANDLE")
        return (end.t - self.t) * 1e3

    def close(self):
        pass


class RefKernel:
    def __init__(self, spec: KernelSpec):
        self.spec = spec
        self.name = spec.name
        self.fn = reference_for(spec)


class RefLaunchPlan:
    def __init__(self, rt, kernel: RefKernel, grid, block, args, shared_bytes: int = 0):
        self.kernel = kernel
        self.name = kernel.name
        self.grid = launch_dims(grid, "grid", kernel.name)
        self.block = launch_dims(block, "block", kernel.name)
        if self.block[0] * self.block[1] * self.block[2] > MAX_THREADS_PER_BLOCK:
            raise CudaError(f"kernel {kernel.name}: block {self.block} has more than {MAX_THREADS_PER_BLOCK} threads")
        self.shared_bytes = int(shared_bytes)
        self._rt = rt
        self.values = convert_args(kernel.spec, args)
        self.info = LaunchInfo(self.grid, self.block, self.shared_bytes)
        self._resolve()

    def _resolve(self):
        self._resolved = [self._rt.space.resolve(v.addr) if p.kind is PTR else v
                          for p, v in zip(self.kernel.spec.params, self.values)]

    def set_arg(self, index: int, value):
        patched = list(self.values)
        patched[index] = value
        self.values = convert_args(self.kernel.spec, patched)
        self._resolve()

    def execute(self):
        self.kernel.fn(self.info, *self._resolved)

    def launch(self, stream):
        if stream.capture_log is not None:
            stream.capture_log.append(self)
        else:
            self.execute()


class _Copy:
    """A recorded copy between simulated addresses (or from a host array)."""

    def __init__(self, rt, dst, src, nbytes: int):
        self.rt, self.dst, self.src, self.nbytes = rt, dst, src, nbytes

    def execute(self):
        src = self.src if isinstance(self.src, np.ndarray) else self.rt.space.resolve(int(self.src)).u8(self.nbytes)
        if isinstance(self.dst, np.ndarray):
            self.dst.reshape(-1).view(np.uint8)[:self.nbytes] = src.reshape(-1).view(np.uint8)[:self.nbytes]
        else:
            self.rt.space.resolve(int(self.dst)).u8(self.nbytes)[:] = src.reshape(-1).view(np.uint8)[:self.nbytes]


class RefGraph:
    def __init__(self, ops: list, name: str):
        self.plans = ops
        self.name = name

    @property
    def kernel_count(self) -> int:
        return sum(1 for op in self.plans if isinstance(op, RefLaunchPlan))

    def node_count(self) -> int:
        return len(self.plans)

    def upload(self, stream):
        pass

    def launch(self, stream):
        if stream.capture_log is not None:
            stream.capture_log.extend(self.plans)
            return
        for op in self.plans:
            op.execute()

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


class RefCapture:
    def __init__(self, stream, name: str):
        self.stream = stream
        self.name = name
        self.graph = None

    def __enter__(self):
        if self.stream.capture_log is not None:
            raise CudaError(f"stream '{self.stream.name}' is already capturing")
        self.stream.capture_log = []
        return self

    def __exit__(self, exc_type, exc, tb):
        ops, self.stream.capture_log = self.stream.capture_log, None
        if exc_type is None:
            self.graph = RefGraph(ops, self.name)
        return False


class ReferenceRuntime:
    backend = "reference"
    arch = "numpy"

    def __init__(self, reason: str = "asked for"):
        self.reason = reason
        self.blas_threads = pin_blas_threads()
        self.device_name = f"numpy reference (CPU, BLAS threads {self.blas_threads})"
        self.space = AddressSpace()
        self.stream = RefStream("main")
        self._kernels: dict[str, RefKernel] = {}
        self.profiling = False

    def device_array(self, shape, dtype, name: str) -> RefDeviceArray:
        return RefDeviceArray(self, shape, dtype, name)

    def mapped_array(self, shape, dtype, name: str) -> RefMappedArray:
        return RefMappedArray(self, shape, dtype, name)

    def _copy(self, dst, src, nbytes: int, stream):
        op = _Copy(self, dst, src, nbytes)
        stream = stream or self.stream
        if stream.capture_log is not None:
            if isinstance(src, np.ndarray):
                op.src = src.copy()  # a captured copy reads the host array as it was at capture
            stream.capture_log.append(op)
        else:
            op.execute()

    def copy_htod(self, dst, host, stream=None):
        self._copy(dst, np.ascontiguousarray(host), host.nbytes, stream)

    def copy_dtoh(self, host, src, stream=None):
        self._copy(host, src, host.nbytes, stream)

    def copy_dtod(self, dst, src, nbytes: int, stream=None):
        self._copy(dst, src, nbytes, stream)

    def event(self, name: str = "event") -> RefEvent:
        return RefEvent(name)

    def kernel(self, spec: KernelSpec) -> RefKernel:
        found = self._kernels.get(spec.name)
        if found is None:
            found = self._kernels[spec.name] = RefKernel(spec)
        elif found.spec != spec:
            raise CudaError(f"kernel {spec.name} declared twice with different parameters")
        return found

    def plan(self, spec: KernelSpec, grid, block, args, shared_bytes: int = 0) -> RefLaunchPlan:
        return RefLaunchPlan(self, self.kernel(spec), grid, block, args, shared_bytes)

    def capture(self, stream=None, name: str = "graph") -> RefCapture:
        return RefCapture(stream or self.stream, name)

    def synchronize(self):
        pass

    def profiler_start(self):
        self.profiling = True

    def profiler_stop(self):
        self.profiling = False

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
