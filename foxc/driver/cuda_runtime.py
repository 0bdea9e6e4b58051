"""The CUDA backend: the device's primary context, streams and events, memory, cubins loaded on first use,
pre-packed launch plans and graphs. Each class owns one handle (lifecycle.Owned); every driver call goes
through `check`. A free waits for the runtime's stream first (`release`): all of a runtime's work goes to its
one stream, so nothing a launch or graph may use is freed, and other runtimes' work keeps running."""
from __future__ import annotations

import ctypes
import gc

import numpy as np
from cuda.bindings import driver

from .device import Device, device_attribute, probe_device
from .cubins import check_spec, cubin_path, shipped_archs, verify_params
from .errors import CudaError, check, raise_for
from .kernel_spec import KernelSpec, pack_slot
from .lifecycle import Owned
from .runtime import ArrayBase, CaptureBase, DeviceArrayBase, GraphBase, PlanBase, Runtime


_contexts = 0  # the primary contexts foxc holds retained: at 0 the driver has freed every resource they held


def release(call: str, handle, doing: str, after: Stream | None = None):
    """`call(handle)`, checked, after waiting for `after` (while open), the stream that used the resource.
    Nothing once every context is released: the driver freed it then, and a call on a stale handle (a
    finalizer run after the runtime closed) may crash the process."""
    if not _contexts:
        return
    if after is not None and not after._closed:
        after.synchronize(f"waiting for stream '{after.name}' before {doing}")
    check(getattr(driver, call)(handle), call, doing)


class Context(Owned):
    """The device's primary context, retained and made current on this thread."""

    def __init__(self, device: Device):
        self.device = device.handle  # the CUdevice, for attribute queries
        self._handle = check(driver.cuDevicePrimaryCtxRetain(device.handle), "cuDevicePrimaryCtxRetain",
                             f"retaining the primary context of device {device.ordinal}")
        global _contexts
        _contexts += 1
        self._own(_release_context, device.handle)
        check(driver.cuCtxSetCurrent(self._handle), "cuCtxSetCurrent", "making foxc's context current")


def _release_context(device):
    global _contexts
    _contexts -= 1
    check(driver.cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease", "releasing the primary context")


class Stream(Owned):
    """A non-blocking stream; `urgent`: at the context's greatest priority (the default is the least)."""

    def __init__(self, name: str, urgent: bool = False):
        self.name, self.urgent = name, urgent
        self.capture_log = None
        _, greatest = check(driver.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange",
                            f"creating stream '{name}'") if urgent else (0, 0)
        self._handle = check(driver.cuStreamCreateWithPriority(driver.CUstream_flags.CU_STREAM_NON_BLOCKING, greatest),
                             "cuStreamCreateWithPriority", f"creating stream '{name}'")
        self._own(_destroy_stream, self._handle, name)

    def synchronize(self, doing: str | None = None):
        check(driver.cuStreamSynchronize(self._handle), "cuStreamSynchronize",
              doing or f"waiting for stream '{self.name}'")

    def wait(self, event: Event):
        check(driver.cuStreamWaitEvent(self._handle, event._handle, 0), "cuStreamWaitEvent",
              f"ordering stream '{self.name}' after event '{event.name}'")


def _destroy_stream(handle, name: str):
    if not _contexts:  # freed with the context (see release)
        return
    check(driver.cuStreamSynchronize(handle), "cuStreamSynchronize",
          f"waiting for stream '{name}' before destroying it")
    release("cuStreamDestroy", handle, f"destroying stream '{name}'")


class Event(Owned):
    def __init__(self, name: str = "event"):
        self.name = name
        self._handle = check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate",
                             f"creating event '{name}'")
        # an event still pending when destroyed is released by the driver once it completes
        self._own(release, "cuEventDestroy", self._handle, f"destroying event '{name}'")

    def record(self, stream: Stream):
        check(driver.cuEventRecord(self._handle, stream._handle), "cuEventRecord",
              f"recording event '{self.name}' on stream '{stream.name}'")

    def synchronize(self):
        check(driver.cuEventSynchronize(self._handle), "cuEventSynchronize", f"waiting for event '{self.name}'")

    def elapsed_ms(self, end: Event) -> float:
        end.synchronize()
        return float(check(driver.cuEventElapsedTime(self._handle, end._handle), "cuEventElapsedTime",
                           f"timing '{self.name}' to '{end.name}'"))


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
    """Pinned host memory mapped into the device's address space (DEVICEMAP | PORTABLE); `host` sees device
    writes once the writing work has completed."""

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


class Module(Owned):
    """The cubin `cubins/<arch>/<name>.cubin`, loaded with `cuModuleLoadData`; its kernels keep it loaded."""

    def __init__(self, arch: str, name: str, stream: Stream):
        path = cubin_path(arch, name)
        if not path.is_file():
            raise CudaError(f"{path} is missing (shipped: {', '.join(shipped_archs())}); run tools/build_cubins.py")
        self.label = f"{arch}/{name}.cubin"
        self._handle = check(driver.cuModuleLoadData(path.read_bytes()), "cuModuleLoadData",
                             f"loading cubin {self.label}")
        self._own(release, "cuModuleUnload", self._handle, f"unloading {self.label}", stream)

    def kernel(self, spec: KernelSpec) -> Kernel:
        check_spec(spec)  # by name and type; the cubin's layout then checks offsets and sizes
        return Kernel(self, spec, check(driver.cuModuleGetFunction(self._handle, spec.name.encode()),
                                        "cuModuleGetFunction", f"looking up kernel {spec.name} in {self.label}"))


class Kernel:
    """A function whose parameter layout `cuFuncGetParamInfo` confirmed."""

    def __init__(self, module: Module, spec: KernelSpec, handle):
        self.name, self.spec = spec.name, spec
        self._module, self._handle = module, handle  # the module stays loaded while the kernel lives
        verify_params(spec, self._param_info, self._param_count())

    def _param_count(self) -> int | None:
        try:
            err, n = driver.cuFuncGetParamCount(self._handle)
        except (AttributeError, RuntimeError):  # bindings without it, or a driver without it (580 has none)
            return None
        return int(n) if err == driver.CUresult.CUDA_SUCCESS else None

    def _param_info(self, index: int):
        err, offset, size = driver.cuFuncGetParamInfo(self._handle, index)
        if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
            return None
        check((err,), "cuFuncGetParamInfo", f"reading parameter {index} of kernel {self.name}")
        return int(offset), int(size)


class LaunchPlan(PlanBase):
    """The arguments packed once into a persistent buffer, an 8-byte slot each, the `void**` pointing into it:
    a launch is one `cuLaunchKernel` with no Python work per argument."""

    def __init__(self, rt, kernel, grid, block, args, shared_bytes: int = 0):
        super().__init__(kernel, grid, block, args, shared_bytes)
        n = max(len(self.values), 1)
        self._slots = ctypes.create_string_buffer(8 * n)
        packed = b"".join(pack_slot(p.kind, v) for p, v in zip(kernel.spec.params, self.values))
        ctypes.memmove(self._slots, packed, len(packed))
        base = ctypes.addressof(self._slots)
        self._pointers = (ctypes.c_void_p * n)(*(base + 8 * i for i in range(n)))
        self._address = ctypes.addressof(self._pointers)
        self._launch = driver.cuLaunchKernel
        self._func = kernel._handle
        self._dims = (*self._grid, *self._block, self._shared_bytes)

    def launch(self, stream):
        log = stream.capture_log
        if log is not None:
            log.append(self)
        gx, gy, gz, bx, by, bz, shm = self._dims
        (err,) = self._launch(self._func, gx, gy, gz, bx, by, bz, shm, stream._handle, self._address, 0)
        if err:
            raise_for(err, "cuLaunchKernel", f"launching {self.name} with grid {self._grid}, block {self._block}, "
                                             f"{shm} B shared on stream '{stream.name}'")


class Graph(GraphBase):
    """An instantiated graph, holding the launch plans and copies it captured."""

    def __init__(self, graph, exec_handle, plans: list, name: str):
        super().__init__(plans, name)
        self._graph, self._exec = graph, exec_handle
        self._launch = driver.cuGraphLaunch
        self._own(_destroy_graph, exec_handle, graph, name)

    def node_count(self) -> int:
        _, n = check(driver.cuGraphGetNodes(self._graph, 0), "cuGraphGetNodes", f"counting nodes of '{self.name}'")
        return int(n)

    def launch(self, stream):
        if stream.capture_log is not None:  # captured into another graph, which then holds these plans too
            stream.capture_log.extend(self.plans)
        (err,) = self._launch(self._exec, stream._handle)
        if err:
            raise_for(err, "cuGraphLaunch", f"launching graph '{self.name}' on stream '{stream.name}'")


def _destroy_graph(exec_handle, graph, name: str):
    release("cuGraphExecDestroy", exec_handle, f"destroying graph '{name}'")  # an in-flight one ends first
    release("cuGraphDestroy", graph, f"destroying graph '{name}'")


DEFAULT_DYNAMIC_SHARED = 48 * 1024  # what a kernel may have without opting in (cuFuncSetAttribute)
_USE_NODE_PRIORITY = int(driver.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)


class Capture(CaptureBase):
    def _begin(self):
        gc.collect()  # run pending finalizers now rather than inside the capture
        check(driver.cuStreamBeginCapture(self._stream._handle,
                                          driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture", f"starting capture of '{self._name}' on stream '{self._stream.name}'")

    def _end(self, log: list, failed: bool) -> Graph | None:
        err, graph = driver.cuStreamEndCapture(self._stream._handle)
        if failed:
            if not err:
                driver.cuGraphDestroy(graph)
            return None
        check((err,), "cuStreamEndCapture", f"ending capture of '{self._name}'")
        try:
            # each kernel node at the priority of the stream it was captured from (an urgent side lane stays urgent)
            exec_handle = check(driver.cuGraphInstantiate(graph, _USE_NODE_PRIORITY), "cuGraphInstantiate",
                                f"instantiating '{self._name}'")
        except CudaError:
            driver.cuGraphDestroy(graph)
            raise
        done = Graph(graph, exec_handle, log, self._name)
        check(driver.cuGraphUpload(exec_handle, self._stream._handle), "cuGraphUpload", f"uploading '{self._name}'")
        return done


class CudaRuntime(Runtime):
    backend = "cuda"
    _device_array, _mapped_array, _stream, _event, _plan, _capture = (DeviceArray, MappedArray, Stream, Event,
                                                                      LaunchPlan, Capture)

    def __init__(self, ordinal: int = 0, reason: str = "", device: Device | None = None):
        device = device or probe_device(ordinal)
        self.ctx = Context(device)
        super().__init__(reason or f"found {device.describe()}", device.describe(), Stream("main"),
                         device.multiprocessors)
        self._arch = device.arch
        self._modules: dict[str, Module] = {}
        self._own(_close, self.stream, self._kernels, self._modules, self.ctx)

    def _load_kernel(self, spec: KernelSpec) -> Kernel:
        module = self._modules.get(spec.module)
        if module is None:
            module = self._modules[spec.module] = Module(self._arch, spec.module, self.stream)
        return module.kernel(spec)

    def _residency_shared(self, kernel: Kernel, shared_bytes: int, per_sm: int) -> int:
        """The block's dynamic shared memory padded past 1 / (per_sm + 1) of an SM's (less its static and the
        driver's reserved share), so per_sm + 1 blocks never fit; above 48 KB the kernel is allowed it."""
        attr, dev = driver.CUfunction_attribute, self.ctx.device
        static = check(driver.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel._handle),
                       "cuFuncGetAttribute", f"reading {kernel.name}'s shared memory")
        per_block = device_attribute(dev, "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR") // (per_sm + 1) + 1
        dynamic = max(shared_bytes, per_block - static - device_attribute(dev, "RESERVED_SHARED_MEMORY_PER_BLOCK"))
        if static + dynamic > device_attribute(dev, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"):
            raise CudaError(f"{kernel.name}: shared memory cannot hold it to {per_sm} blocks an SM on this device")
        check(driver.cuFuncSetAttribute(kernel._handle, attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic),
              "cuFuncSetAttribute", f"allowing {kernel.name} {dynamic} B of dynamic shared memory")
        return dynamic

    def _allow_shared(self, kernel: Kernel, shared_bytes: int):
        if shared_bytes <= DEFAULT_DYNAMIC_SHARED:
            return
        attr, dev = driver.CUfunction_attribute, self.ctx.device
        allowed = check(driver.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kernel._handle),
                        "cuFuncGetAttribute", f"reading {kernel.name}'s dynamic shared memory limit")
        if shared_bytes <= allowed:
            return
        static = check(driver.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, kernel._handle),
                       "cuFuncGetAttribute", f"reading {kernel.name}'s shared memory")
        if static + shared_bytes > device_attribute(dev, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"):
            return  # more than a block can have: the launch fails, the driver naming why
        check(driver.cuFuncSetAttribute(kernel._handle, attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        shared_bytes),
              "cuFuncSetAttribute", f"allowing {kernel.name} {shared_bytes} B of dynamic shared memory")

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
