"""The runtime contract: everything domain code may use, written once.

Both backends implement it (`cuda_runtime.CudaRuntime`, `reference.runtime.ReferenceRuntime`);
tests/test_runtime_parity.py fails when either lacks a member listed here or offers a public one
that is not. A pointer argument is a `DevPtr` or anything with a `.ptr` DevPtr (an array); holding
a DevPtr keeps its memory alive.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from .kernel_spec import DevPtr, KernelSpec


class Closeable(Protocol):
    def close(self) -> None:
        """Release what the object owns now; again does nothing. A free waits for the runtime's stream first;
        an object never closed is released when collected (after any open capture)."""
    def __enter__(self): ...
    def __exit__(self, *exc) -> None: ...


class Stream(Closeable, Protocol):
    """Orders work; a runtime's work goes to `rt.stream`, background copies to a stream of `rt.side_stream`."""
    name: str
    urgent: bool  # at the device's highest priority (`Runtime.side_stream`); the reference backend ignores it
    capture_log: list | None  # what was launched since a capture opened on the stream; None when none is open
    def synchronize(self, doing: str | None = None) -> None:
        """Wait for everything issued on the stream; `doing` names the wait in an error."""
    def wait(self, event: Event) -> None:
        """Work issued on this stream from now on starts after `event`'s point in its stream (no host wait)."""


class Event(Closeable, Protocol):
    """A point in a stream: device time on CUDA, host time on the reference backend."""
    name: str
    def record(self, stream: Stream) -> None: ...
    def synchronize(self) -> None: ...
    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds from this event to `end`; waits for `end`."""


class Array(Closeable, Protocol):
    """A typed allocation whose device address holds for its whole life."""
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    size: int
    nbytes: int
    @property
    def ptr(self) -> DevPtr:
        """Element 0's device address; ValueError once closed."""
    def at(self, index: int) -> DevPtr:
        """Flat element `index`'s device address (`size` gives the end)."""


class DeviceArray(Array, Protocol):
    """Device memory, not zero until written. Host copies are refused (CudaError) while a capture is open."""
    def upload(self, host: np.ndarray, stream: Stream | None = None) -> None:
        """Copy `host` (same dtype, at most as many bytes) to the start; returns once `host` may be reused."""
    def download(self, stream: Stream | None = None) -> np.ndarray:
        """A fresh host copy; returns once it holds the data."""


class MappedArray(Array, Protocol):
    """Host memory kernels address directly (mapped-pinned on CUDA)."""
    host: np.ndarray  # no copy either way; device writes show once their work has completed


class Kernel(Protocol):
    """A kernel whose declaration matched its C signature (and, on CUDA, the cubin's parameter layout)."""
    name: str
    spec: KernelSpec


class LaunchPlan(Protocol):
    """A kernel with grid, block, shared memory and arguments checked and fixed at creation."""
    name: str
    kernel: Kernel
    values: list  # the arguments as converted: DevPtrs and numpy scalars
    def launch(self, stream: Stream) -> None:
        """Run on `stream` (CUDA: one cuLaunchKernel, arguments packed in advance); recorded into an open capture."""


class Graph(Closeable, Protocol):
    """What a capture recorded; it holds the plans and copies, and so every buffer they use."""
    name: str
    plans: list
    @property
    def kernel_count(self) -> int: ...
    def node_count(self) -> int:
        """Kernel launches and copies."""
    def launch(self, stream: Stream) -> None:
        """Replay the recording in order; recorded whole into an open capture."""


class Capture(Protocol):
    """`with rt.capture() as cap:` records what is launched on the stream; `cap.graph` is ready after the block.
    Warm up on the stream and allocate everything first; nothing may synchronize while it is open."""
    graph: Graph | None
    def fork(self, side: Stream) -> None:
        """`side` joins the capture as a branch after what the stream has issued so far."""
    def join(self, side: Stream) -> None:
        """The stream goes on only after the branch's work; every fork must be joined before the capture ends."""
    def __enter__(self) -> Capture: ...
    def __exit__(self, *exc) -> bool: ...


class Runtime(Closeable, Protocol):
    """One device (or its numpy reference), its stream, and the kernels loaded so far."""
    backend: str  # "cuda" or "reference"
    reason: str  # why this backend
    device_name: str
    multiprocessors: int  # the device's SMs (the reference backend: 1)
    stream: Stream
    profiling: bool  # between profiler_start and profiler_stop
    def device_array(self, shape, dtype, name: str) -> DeviceArray: ...
    def mapped_array(self, shape, dtype, name: str) -> MappedArray: ...
    def side_stream(self, name: str, urgent: bool = False) -> Stream:
        """A second stream for work beside the step's (background copies); order it with events and `wait`.
        Its work must be done before the runtime closes (synchronize it; its close waits too). `urgent`: the
        device's highest priority, so its blocks are dispatched before the waiting blocks of other streams' kernels
        (captured kernels keep it in the graph); it changes when work runs, never what it computes."""
    def free_bytes(self) -> int:
        """Device memory free now (cuMemGetInfo); the reference backend reports a fixed REFERENCE_FREE_BYTES."""
    def copy_dtod(self, dst, src, nbytes: int, stream: Stream | None = None) -> None:
        """Copy `nbytes` between device addresses, in stream order; recorded into an open capture."""
    def kernel(self, spec: KernelSpec) -> Kernel:
        """`spec`'s kernel, checked and loaded once; another declaration under the same name is refused."""
    def plan(self, spec: KernelSpec, grid, block, args, shared_bytes: int = 0,
             max_blocks_per_sm: int | None = None) -> LaunchPlan:
        """Arguments go through `spec`: pointers as DevPtrs (never plain ints), scalars checked for type and range;
        `args` in the declaration's order, or a mapping from parameter names to values (bound by name).
        `max_blocks_per_sm`: at most that many of the launch's blocks resident on an SM (the CUDA backend pads each
        block's dynamic shared memory so one more does not fit); it changes where blocks run, never what they
        compute."""
    def event(self, name: str = "event") -> Event: ...
    def capture(self, stream: Stream | None = None, name: str = "graph") -> Capture: ...
    def synchronize(self) -> None:
        """Wait for all of the device's work."""
    def profiler_start(self) -> None:
        """Open the window of `nsys --capture-range=cudaProfilerApi` or `ncu --profile-from-start off`."""
    def profiler_stop(self) -> None: ...
