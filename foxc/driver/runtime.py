"""What both backends share: the runtime, arrays, launch plans, graphs and captures, each checked once here;
a backend subclass adds the calls that touch its device. api.py is the contract they implement."""
from __future__ import annotations

import math

import numpy as np

from .api import Capture, DeviceArray, Event, Kernel, LaunchPlan, MappedArray, Stream
from .errors import CudaError
from .kernel_spec import DevPtr, KernelSpec, convert_args
from .lifecycle import Owned, capture_closed, capture_opened

MAX_THREADS_PER_BLOCK = 1024


class RuntimeBase(Owned):
    """A backend names the classes it makes and adds `_load_kernel(spec)`, `copy_dtod`, `free_bytes` and
    `synchronize`."""

    backend = ""
    _device_array = _mapped_array = _stream = _event = _plan = _capture = None

    def __init__(self, reason: str, device_name: str, stream: Stream, multiprocessors: int = 1):
        self.reason, self.device_name, self.stream = reason, device_name, stream
        self.multiprocessors = multiprocessors
        self.profiling = False
        self._kernels: dict[str, Kernel] = {}

    def _check_open(self, doing: str):
        """Refuse to make anything once closed: a CUDA runtime's context is released (its calls could crash)."""
        if self._closed:
            raise ValueError(f"{self.backend} runtime is closed ({doing}): open another (foxc.driver.open_runtime)")

    def device_array(self, shape, dtype, name: str) -> DeviceArray:
        self._check_open(f"allocating '{name}'")
        return self._device_array(self, shape, dtype, name)

    def mapped_array(self, shape, dtype, name: str) -> MappedArray:
        self._check_open(f"allocating '{name}'")
        return self._mapped_array(self, shape, dtype, name)

    def side_stream(self, name: str, urgent: bool = False) -> Stream:
        self._check_open(f"creating stream '{name}'")
        return self._stream(name, urgent)

    def event(self, name: str = "event") -> Event:
        self._check_open(f"creating event '{name}'")
        return self._event(name)

    def kernel(self, spec: KernelSpec) -> Kernel:
        self._check_open(f"loading kernel {spec.name}")
        found = self._kernels.get(spec.name)
        if found is not None and found.spec == spec:
            return found
        kernel = self._load_kernel(spec)  # checks the declaration first, so a wrong one says what is wrong
        if found is not None:
            raise CudaError(f"kernel {spec.name} declared twice with different parameters")
        self._kernels[spec.name] = kernel
        return kernel

    def plan(self, spec: KernelSpec, grid, block, args, shared_bytes: int = 0,
             max_blocks_per_sm: int | None = None) -> LaunchPlan:
        self._check_open(f"planning {spec.name}")  # here, not in launch(): a launch is the hot path
        kernel = self.kernel(spec)
        if max_blocks_per_sm is not None:
            if max_blocks_per_sm < 1:
                raise ValueError(f"{spec.name}: max_blocks_per_sm must be at least 1, got {max_blocks_per_sm}")
            shared_bytes = self._residency_shared(kernel, shared_bytes, max_blocks_per_sm)
        return self._plan(self, kernel, grid, block, args, shared_bytes)

    def _residency_shared(self, kernel, shared_bytes: int, per_sm: int) -> int:
        """The dynamic shared bytes that let at most `per_sm` blocks of `kernel` reside on an SM: a backend
        without SMs runs every block the same way."""
        return shared_bytes

    def capture(self, stream: Stream | None = None, name: str = "graph") -> Capture:
        self._check_open(f"capturing '{name}'")
        return self._capture(stream or self.stream, name, self.event)

    def profiler_start(self):
        self.profiling = True

    def profiler_stop(self):
        self.profiling = False


class ArrayBase(Owned):
    """A typed allocation with a stable device address for its whole life; a backend sets `_addr`."""

    _kind = "array"

    def __init__(self, rt, shape, dtype, name: str):
        sizes = (shape,) if isinstance(shape, (int, np.integer)) else shape
        if not isinstance(sizes, (tuple, list)) or not all(  # (2.5, 3) was cut to (2, 3)
                isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in sizes):
            raise ValueError(f"'{name}': shape must be a size or a tuple of sizes, whole numbers >= 0, got {shape!r}")
        self.shape = tuple(int(s) for s in sizes)
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject or self.dtype.kind in "US":  # a pointer's bytes, or text: nothing a kernel reads
            raise ValueError(f"'{name}': dtype {self.dtype} cannot live in device memory (numbers, bools, or records "
                             "of them)")
        self.name = name
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._stream = rt.stream  # where host copies go by default, and what a free waits for
        self._addr = 0

    @property
    def ptr(self) -> DevPtr:
        return self.at(0)

    def at(self, index: int) -> DevPtr:
        self._check_open()
        if not 0 <= index <= self.size:
            raise IndexError(f"{self._kind} '{self.name}': element {index} outside 0..{self.size}")
        return DevPtr(self._addr + index * self.dtype.itemsize, self)

    def _check_open(self):
        if self._closed:
            raise ValueError(f"{self._kind} '{self.name}' is closed")

    def __repr__(self):
        state = "closed" if self._closed else f"0x{self._addr:x}"
        return f"<{type(self).__name__} '{self.name}' {self.shape} {self.dtype} at {state}>"


class DeviceArrayBase(ArrayBase):
    """Device memory; a backend adds `_write(host, stream)` and `_read(out, stream)`."""

    _kind = "device array"

    def upload(self, host: np.ndarray, stream=None):
        stream = self._host_copy_stream(stream, "uploading")
        host = np.ascontiguousarray(host)
        if host.dtype != self.dtype:
            raise TypeError(f"'{self.name}' holds {self.dtype}, got {host.dtype}")
        if host.nbytes > self.nbytes:
            raise ValueError(f"'{self.name}' holds {self.nbytes} bytes, got {host.nbytes}")
        self._write(host, stream)

    def download(self, stream=None) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self._read(out, self._host_copy_stream(stream, "downloading"))
        return out

    def _host_copy_stream(self, stream, doing: str):
        self._check_open()
        stream = stream or self._stream
        if stream.capture_log is not None:  # a replay would copy from or to host memory that may be gone by then
            raise CudaError(f"{doing} '{self.name}' while stream '{stream.name}' is capturing a graph: a graph "
                            f"cannot hold a host copy. Copy before the capture, or from a device buffer (copy_dtod)")
        return stream


def _dims(dims, what: str, kernel_name: str) -> tuple[int, int, int]:
    dims = (dims,) if isinstance(dims, int) else tuple(int(d) for d in dims)
    dims += (1,) * (3 - len(dims))
    if len(dims) != 3 or any(d < 1 for d in dims):
        raise CudaError(f"kernel {kernel_name}: {what} {dims} must be 1 to 3 positive sizes")
    return dims


class PlanBase:
    """A plan's grid, block, shared memory and arguments, checked once at creation; a backend adds `launch`."""

    def __init__(self, kernel, grid, block, args, shared_bytes: int):
        self.kernel, self.name = kernel, kernel.name
        self._grid, self._block = _dims(grid, "grid", kernel.name), _dims(block, "block", kernel.name)
        if math.prod(self._block) > MAX_THREADS_PER_BLOCK:
            raise CudaError(f"kernel {kernel.name}: block {self._block} has more than {MAX_THREADS_PER_BLOCK} threads")
        self._shared_bytes = int(shared_bytes)
        self.values = convert_args(kernel.spec, args)  # DevPtrs keep their buffers alive

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} grid={self._grid} block={self._block}>"


class GraphBase(Owned):
    """What a capture recorded: `plans` lists its launch plans and copies, and so holds every buffer used."""

    def __init__(self, plans: list, name: str):
        self.plans, self.name = plans, name

    @property
    def kernel_count(self) -> int:
        return sum(hasattr(p, "kernel") for p in self.plans)


class CaptureBase:
    """While open, the stream's `capture_log` lists what is launched on it; host copies are refused then,
    and nothing may synchronize. A backend adds `_begin()` and `_end(log, failed)`, which returns the graph
    (None when failed). `fork(side)` / `join(side)` record work on a second stream into the same graph, as a
    branch that runs beside the capture stream's (ordered by events; the reference backend runs everything in
    the order it was issued)."""

    def __init__(self, stream, name: str, event):
        self._stream, self._name, self._event = stream, name, event
        self._sides, self._events = [], []
        self.graph = None

    def __enter__(self):
        if self._stream.capture_log is not None:
            raise CudaError(f"stream '{self._stream.name}' is already capturing")
        self._begin()
        capture_opened()
        self._stream.capture_log = []
        return self

    def fork(self, side):
        """`side` joins the capture after what its stream has issued so far; what is launched on `side` from
        now on may run concurrently with the stream's later launches, until `join(side)`."""
        if side.capture_log is not None or side is self._stream:
            raise CudaError(f"stream '{side.name}' is already capturing")
        self._order(self._stream, side, "fork")
        side.capture_log = self._stream.capture_log
        self._sides.append(side)

    def join(self, side):
        """The capture's stream goes on only after everything launched on `side` since its fork."""
        if side not in self._sides:
            raise CudaError(f"stream '{side.name}' was not forked from the capture '{self._name}'")
        self._order(side, self._stream, "join")
        side.capture_log = None
        self._sides.remove(side)

    def _order(self, first, then, what: str):
        event = self._event(f"{self._name} {what}")
        self._events.append(event)  # kept open until the capture ends
        event.record(first)
        then.wait(event)

    def __exit__(self, exc_type, exc, tb):
        log, self._stream.capture_log = self._stream.capture_log, None
        unjoined = [f"'{s.name}'" for s in self._sides]
        for side in self._sides:
            side.capture_log = None
        self._sides.clear()
        try:
            self.graph = self._end(log, failed=exc_type is not None or bool(unjoined))
        finally:
            capture_closed()
            for event in self._events:
                event.close()
            self._events.clear()
        if unjoined and exc_type is None:
            raise CudaError(f"capture '{self._name}' ended with stream(s) {', '.join(unjoined)} forked and not joined")
        return False
