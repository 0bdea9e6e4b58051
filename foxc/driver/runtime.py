"""The runtime contract, and what both backends share of it: the runtime, arrays, launch plans, graphs and
captures, each checked once here. A backend (`cuda_runtime`, `reference.runtime`) subclasses these and adds
the calls that touch its device, and its own Stream, Event and Kernel (`name`, and a Kernel's `spec`);
tests/test_runtime_parity.py fails when one backend offers a public member the other lacks.

Every object has an idempotent `close()` and is a context manager; one never closed is released when collected
(after any open capture); a free waits for the runtime's stream first. A pointer argument is a `DevPtr` or
anything with a `.ptr` DevPtr (an array); holding a DevPtr keeps its memory alive.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import CudaError
from .kernel_spec import DevPtr, KernelSpec, convert_args
from .lifecycle import Owned, capture_closed, capture_opened

MAX_THREADS_PER_BLOCK = 1024


class Runtime(Owned):
    """One device (or its numpy reference), its stream `stream`, and the kernels loaded so far. `backend`:
    "cuda" or "reference"; `reason`: why; `multiprocessors`: the device's SMs (1 on the reference); `profiling`:
    between profiler_start and profiler_stop. A backend names the classes it makes and adds
    `_load_kernel(spec)`, `copy_dtod(dst, src, nbytes, stream=None)` (in stream order, recorded into an open
    capture), `free_bytes()` (the reference reports a fixed REFERENCE_FREE_BYTES) and `synchronize()`."""

    backend = ""
    _device_array = _mapped_array = _stream = _event = _plan = _capture = None

    def __init__(self, reason: str, device_name: str, stream, multiprocessors: int = 1):
        self.reason, self.device_name, self.stream = reason, device_name, stream
        self.multiprocessors = multiprocessors
        self.profiling = False
        self._kernels: dict = {}

    def _check_open(self):
        """Nothing is made once closed: a CUDA runtime's context is released (its calls could crash)."""
        if self._closed:
            raise ValueError(f"{self.backend} runtime is closed")

    def device_array(self, shape, dtype, name: str):
        """Device memory, not zero until written."""
        self._check_open()
        return self._device_array(self, shape, dtype, name)

    def mapped_array(self, shape, dtype, name: str):
        """Host memory kernels address directly (mapped-pinned on CUDA): `.host`, with no copy either way."""
        self._check_open()
        return self._mapped_array(self, shape, dtype, name)

    def side_stream(self, name: str, urgent: bool = False):
        """A second stream for work beside the step's, ordered by events and `wait`; its work must be done
        before the runtime closes. `urgent`: the device's highest priority (kept by captured kernels); it
        changes when work runs, never what it computes."""
        self._check_open()
        return self._stream(name, urgent)

    def event(self, name: str = "event"):
        """A point in a stream: device time on CUDA, host time on the reference backend."""
        self._check_open()
        return self._event(name)

    def kernel(self, spec: KernelSpec):
        """`spec`'s kernel, checked against its source and loaded once."""
        self._check_open()
        found = self._kernels.get(spec.name)
        if found is not None and found.spec == spec:
            return found
        kernel = self._load_kernel(spec)  # checks the declaration first, so a wrong one says what is wrong
        if found is not None:
            raise ValueError(f"kernel {spec.name} declared twice with different parameters")
        self._kernels[spec.name] = kernel
        return kernel

    def plan(self, spec: KernelSpec, grid, block, args, shared_bytes: int = 0, max_blocks_per_sm: int | None = None):
        """A launch with everything fixed and checked now (convert_args). `max_blocks_per_sm`: at most that many
        blocks resident on an SM (CUDA pads the dynamic shared memory); where blocks run, never what they
        compute."""
        self._check_open()  # here, not in launch(): a launch is the hot path
        kernel = self.kernel(spec)
        if max_blocks_per_sm is not None:
            if max_blocks_per_sm < 1:
                raise ValueError(f"{spec.name}: max_blocks_per_sm must be at least 1, got {max_blocks_per_sm}")
            shared_bytes = self._residency_shared(kernel, shared_bytes, max_blocks_per_sm)
        else:
            self._allow_shared(kernel, shared_bytes)
        return self._plan(self, kernel, grid, block, args, shared_bytes)

    def _residency_shared(self, kernel, shared_bytes: int, per_sm: int) -> int:
        return shared_bytes  # a backend without SMs runs every block the same way

    def _allow_shared(self, kernel, shared_bytes: int):
        """Let `kernel` have `shared_bytes` of dynamic shared memory (CUDA: past 48 KB a kernel must opt in)."""

    def capture(self, stream=None, name: str = "graph"):
        """`with rt.capture() as cap:` records what is launched on the stream; `cap.graph` after the block."""
        self._check_open()
        return self._capture(stream or self.stream, name, self.event)

    def profiler_start(self):
        """Open the window of `nsys --capture-range=cudaProfilerApi` or `ncu --profile-from-start off`."""
        self.profiling = True

    def profiler_stop(self):
        self.profiling = False


class ArrayBase(Owned):
    """A typed allocation whose device address holds for its whole life; a backend sets `_addr`."""

    _kind = "array"

    def __init__(self, rt, shape, dtype, name: str):
        sizes = (shape,) if isinstance(shape, (int, np.integer)) else shape
        if not isinstance(sizes, (tuple, list)) or not all(  # (2.5, 3) was cut to (2, 3)
                isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in sizes):
            raise ValueError(f"'{name}': shape {shape!r}")
        self.shape = tuple(int(s) for s in sizes)
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject or self.dtype.kind in "US":  # a pointer's bytes, or text: nothing a kernel reads
            raise ValueError(f"'{name}': dtype {self.dtype}")
        self.name = name
        self.size = math.prod(self.shape)
        self.nbytes = self.size * self.dtype.itemsize
        self._stream = rt.stream  # where host copies go by default, and what a free waits for
        self._addr = 0

    @property
    def ptr(self) -> DevPtr:
        return self.at(0)

    def at(self, index: int) -> DevPtr:
        """Flat element `index`'s device address (`size` gives the end)."""
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
    """Device memory; a backend adds `_write(host, stream)` and `_read(out, stream)`. Host copies return once
    done, and are refused while a capture is open on the stream (a replay would copy host memory that may be
    gone by then): copy before, or between device buffers (copy_dtod)."""

    _kind = "device array"

    def upload(self, host: np.ndarray, stream=None):
        """`host` (same dtype, at most as many bytes) to the start."""
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
        if stream.capture_log is not None:
            raise CudaError(f"{doing} '{self.name}' while stream '{stream.name}' is capturing a graph")
        return stream


def _dims(dims, what: str, kernel_name: str) -> tuple[int, int, int]:
    dims = (dims,) if isinstance(dims, int) else tuple(int(d) for d in dims)
    dims += (1,) * (3 - len(dims))
    if len(dims) != 3 or any(d < 1 for d in dims) or what == "block" and math.prod(dims) > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"kernel {kernel_name}: {what} {dims}")
    return dims


class PlanBase:
    """A kernel with grid, block, shared memory and arguments (`values`: DevPtrs and numpy scalars) fixed at
    creation; a backend adds `launch(stream)`, recorded into an open capture."""

    def __init__(self, kernel, grid, block, args, shared_bytes: int):
        self.kernel, self.name = kernel, kernel.name
        self._grid, self._block = _dims(grid, "grid", kernel.name), _dims(block, "block", kernel.name)
        self._shared_bytes = int(shared_bytes)
        self.values = convert_args(kernel.spec, args)  # DevPtrs keep their buffers alive

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} grid={self._grid} block={self._block}>"


class GraphBase(Owned):
    """What a capture recorded: `plans` lists its launch plans and copies, and so holds every buffer they use.
    A backend adds `node_count()` (launches and copies) and `launch(stream)` (replayed in order; recorded whole
    into an open capture)."""

    def __init__(self, plans: list, name: str):
        self.plans, self.name = plans, name

    @property
    def kernel_count(self) -> int:
        return sum(hasattr(p, "kernel") for p in self.plans)


class CaptureBase:
    """While open, the stream's `capture_log` lists what is launched on it; warm up on the stream and allocate
    before, nothing may synchronize during. A backend adds `_begin()` and `_end(log, failed)`, the graph (None
    when failed). `fork(side)` / `join(side)` record a second stream's work into the same graph, as a branch
    beside the capture stream's (ordered by events; the reference backend runs everything in issue order)."""

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
        """`side` joins the capture after what the stream has issued so far; its launches may run beside the
        stream's later ones until `join(side)`."""
        if side.capture_log is not None or side is self._stream:
            raise CudaError(f"stream '{side.name}' is already capturing")
        self._order(self._stream, side, "fork")
        side.capture_log = self._stream.capture_log
        self._sides.append(side)

    def join(self, side):
        """The stream goes on only after everything launched on `side` since its fork."""
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
