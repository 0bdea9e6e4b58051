"""The CUDA backend behind the runtime API: one context, a default stream, cached kernels."""
from __future__ import annotations

from .context import CudaContext
from .cubins import cubin_path, pick_arch, shipped_archs
from .errors import CudaError
from .graph import Capture
from .kernel_spec import KernelSpec
from .launch import LaunchPlan
from .memory import DeviceArray, MappedArray, copy_dtod, copy_dtoh, copy_htod
from .module import Module
from .profiler import profiler_start, profiler_stop
from .stream import Event, Stream


class CudaRuntime:
    backend = "cuda"

    def __init__(self, ordinal: int = 0, reason: str = ""):
        self.ctx = CudaContext(ordinal)
        major, minor = self.ctx.compute_capability
        self.arch = pick_arch(major, minor)
        self.device_name = self.ctx.describe()
        self.reason = reason or f"found {self.device_name}"
        self._modules: dict[str, Module] = {}
        self._kernels: dict[str, object] = {}
        self.stream = Stream(self.ctx, "main")
        self._closed = False

    # --- memory -----------------------------------------------------------
    def device_array(self, shape, dtype, name: str) -> DeviceArray:
        return DeviceArray(self, shape, dtype, name)

    def mapped_array(self, shape, dtype, name: str) -> MappedArray:
        return MappedArray(self, shape, dtype, name)

    def copy_htod(self, dst, host, stream=None):
        copy_htod(dst, host, stream or self.stream, f"copying {host.nbytes} B to the device")

    def copy_dtoh(self, host, src, stream=None):
        copy_dtoh(host, src, stream or self.stream, f"copying {host.nbytes} B to the host")

    def copy_dtod(self, dst, src, nbytes: int, stream=None):
        copy_dtod(dst, src, nbytes, stream or self.stream, f"copying {nbytes} B on the device")

    # --- execution --------------------------------------------------------
    def event(self, name: str = "event") -> Event:
        return Event(name)

    def kernel(self, spec: KernelSpec):
        """The verified kernel for `spec`, loading its cubin on first use."""
        found = self._kernels.get(spec.name)
        if found is not None and found.spec == spec:
            return found
        kernel = self._module(spec.module).kernel(spec)  # verifies the declaration against the cubin
        if found is not None:
            raise CudaError(f"kernel {spec.name} declared twice with different parameters")
        self._kernels[spec.name] = kernel
        return kernel

    def _module(self, name: str) -> Module:
        module = self._modules.get(name)
        if module is None:
            path = cubin_path(self.arch, name)
            if not path.is_file():
                raise CudaError(f"{path} is missing (shipped: {', '.join(shipped_archs())}); "
                                f"run tools/build_cubins.py")
            module = self._modules[name] = Module(path.read_bytes(), f"{self.arch}/{name}.cubin")
        return module

    def plan(self, spec: KernelSpec, grid, block, args, shared_bytes: int = 0) -> LaunchPlan:
        return LaunchPlan(self.kernel(spec), grid, block, args, shared_bytes)

    def capture(self, stream=None, name: str = "graph") -> Capture:
        return Capture(stream or self.stream, name)

    def synchronize(self):
        self.ctx.synchronize()

    def profiler_start(self):
        profiler_start()

    def profiler_stop(self):
        profiler_stop()

    def close(self):
        if self._closed:
            return
        self._closed = True
        self.stream.close()
        self._kernels.clear()
        for module in self._modules.values():
            module.close()
        self._modules.clear()
        self.ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
