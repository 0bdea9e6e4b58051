"""What both runtimes share; api.Runtime is the contract they implement."""
from __future__ import annotations

from .api import Capture, DeviceArray, Event, Kernel, LaunchPlan, MappedArray, Stream
from .errors import CudaError
from .kernel_spec import KernelSpec
from .lifecycle import Owned


class RuntimeBase(Owned):
    """A backend names the classes it makes and adds `_load_kernel(spec)`, `copy_dtod`, `free_bytes` and
    `synchronize`."""

    backend = ""
    _device_array = _mapped_array = _stream = _event = _plan = _capture = None

    def __init__(self, reason: str, device_name: str, stream: Stream):
        self.reason, self.device_name, self.stream = reason, device_name, stream
        self.profiling = False
        self._kernels: dict[str, Kernel] = {}

    def device_array(self, shape, dtype, name: str) -> DeviceArray:
        return self._device_array(self, shape, dtype, name)

    def mapped_array(self, shape, dtype, name: str) -> MappedArray:
        return self._mapped_array(self, shape, dtype, name)

    def side_stream(self, name: str) -> Stream:
        return self._stream(name)

    def event(self, name: str = "event") -> Event:
        return self._event(name)

    def kernel(self, spec: KernelSpec) -> Kernel:
        found = self._kernels.get(spec.name)
        if found is not None and found.spec == spec:
            return found
        kernel = self._load_kernel(spec)  # checks the declaration first, so a wrong one says what is wrong
        if found is not None:
            raise CudaError(f"kernel {spec.name} declared twice with different parameters")
        self._kernels[spec.name] = kernel
        return kernel

    def plan(self, spec: KernelSpec, grid, block, args, shared_bytes: int = 0) -> LaunchPlan:
        return self._plan(self, self.kernel(spec), grid, block, args, shared_bytes)

    def capture(self, stream: Stream | None = None, name: str = "graph") -> Capture:
        return self._capture(stream or self.stream, name)

    def profiler_start(self):
        self.profiling = True

    def profiler_stop(self):
        self.profiling = False
