"""The CUDA backend: the device's primary context, one stream, cubins loaded on first use."""
from __future__ import annotations

from cuda.bindings import driver

from .backend import Device, probe_device
from .errors import check
from .graph import Capture
from .kernel_spec import KernelSpec
from .launch import LaunchPlan
from .lifecycle import Owned
from .memory import DeviceArray, MappedArray
from .module import Kernel, Module
from .runtime import RuntimeBase
from .stream import Event, Stream, release


class Context(Owned):
    """The device's primary context, retained and made current on this thread."""

    def __init__(self, device: Device):
        self.device = device.handle  # the CUdevice, for attribute queries
        self._handle = check(driver.cuDevicePrimaryCtxRetain(device.handle), "cuDevicePrimaryCtxRetain",
                             f"retaining the primary context of device {device.ordinal}")
        self._own(release, "cuDevicePrimaryCtxRelease", device.handle, "releasing the primary context")
        check(driver.cuCtxSetCurrent(self._handle), "cuCtxSetCurrent", "making foxc's context current")


class CudaRuntime(RuntimeBase):
    backend = "cuda"
    _device_array, _mapped_array, _stream, _event, _plan, _capture = (DeviceArray, MappedArray, Stream, Event,
                                                                      LaunchPlan, Capture)

    def __init__(self, ordinal: int = 0, reason: str = "", device: Device | None = None):
        device = device or probe_device(ordinal)
        self.ctx = Context(device)
        super().__init__(reason or f"found {device.describe()}", device.describe(), Stream("main"))
        self._arch = device.arch
        self._modules: dict[str, Module] = {}
        self._own(_close, self.stream, self._kernels, self._modules, self.ctx)

    def _load_kernel(self, spec: KernelSpec) -> Kernel:
        module = self._modules.get(spec.module)
        if module is None:
            module = self._modules[spec.module] = Module(self._arch, spec.module, self.stream)
        return module.kernel(spec)

    def copy_dtod(self, dst, src, nbytes: int, stream: Stream | None = None):
        stream = stream or self.stream
        if stream.capture_log is not None:
            stream.capture_log.append((dst, src))  # the graph keeps both buffers alive
        check(driver.cuMemcpyDtoDAsync(int(dst), int(src), nbytes, stream._handle), "cuMemcpyDtoDAsync",
              f"copying {nbytes} B on the device")

    def free_bytes(self) -> int:
        free, _ = check(driver.cuMemGetInfo(), "cuMemGetInfo", "reading the device's free memory")
        return int(free)

    def synchronize(self):
        check(driver.cuCtxSynchronize(), "cuCtxSynchronize", "waiting for the device")

    def profiler_start(self):
        check(driver.cuProfilerStart(), "cuProfilerStart", "opening the profiler capture window")
        super().profiler_start()

    def profiler_stop(self):
        check(driver.cuProfilerStop(), "cuProfilerStop", "closing the profiler capture window")
        super().profiler_stop()


def _close(stream: Stream, kernels: dict, modules: dict, ctx: Context):
    stream.close()  # waits for the runtime's work: every launch of it went to this stream
    kernels.clear()
    for module in modules.values():
        module.close()
    modules.clear()
    ctx.close()
