"""Stream capture into a CUDA graph: capture, instantiate, upload, launch, destroy."""
from __future__ import annotations

import gc
import weakref

from .errors import CudaError, check
from .release import capture_opened, capture_closed, release


def _driver():
    from cuda.bindings import driver
    return driver


def _release_graph(exec_handle, graph_handle):
    release("cuGraphExecDestroy", exec_handle)
    release("cuGraphDestroy", graph_handle)


class Graph:
    """An instantiated graph. It holds the launch plans it captured, and with them every buffer they use."""

    def __init__(self, graph_handle, exec_handle, plans: list, name: str):
        self._graph = graph_handle
        self._exec = exec_handle
        self.plans = plans
        self.name = name
        self._closed = False
        self._finalizer = weakref.finalize(self, _release_graph, exec_handle, graph_handle)
        self._launch = _driver().cuGraphLaunch

    @property
    def kernel_count(self) -> int:
        return sum(1 for p in self.plans if hasattr(p, "kernel"))

    def node_count(self) -> int:
        _, n = check(_driver().cuGraphGetNodes(self._graph, 0), "cuGraphGetNodes", f"counting nodes of '{self.name}'")
        return int(n)

    def upload(self, stream):
        check(_driver().cuGraphUpload(self._exec, stream.handle), "cuGraphUpload", f"uploading graph '{self.name}'")

    def launch(self, stream):
        (err,) = self._launch(self._exec, stream.handle)
        if err:
            check((err,), "cuGraphLaunch", f"launching graph '{self.name}' on stream '{stream.name}'")

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        drv = _driver()
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize", f"waiting for the device before destroying '{self.name}'")
        check(drv.cuGraphExecDestroy(self._exec), "cuGraphExecDestroy", f"destroying graph '{self.name}'")
        check(drv.cuGraphDestroy(self._graph), "cuGraphDestroy", f"destroying graph '{self.name}'")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Capture:
    """`with rt.capture(stream) as cap:` launches on `stream` are recorded; `cap.graph` is ready after the block.

    Warm up on the same stream first, and allocate everything before: nothing
    may allocate, synchronize or read the device while the capture is open.
    """

    def __init__(self, stream, name: str = "graph"):
        self.stream = stream
        self.name = name
        self.graph: Graph | None = None

    def __enter__(self):
        drv = _driver()
        if self.stream.capture_log is not None:
            raise CudaError(f"stream '{self.stream.name}' is already capturing")
        gc.collect()  # run pending finalizers now rather than inside the capture
        check(drv.cuStreamBeginCapture(self.stream.handle, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture", f"starting capture of '{self.name}' on stream '{self.stream.name}'")
        capture_opened()
        self.stream.capture_log = []
        return self

    def __exit__(self, exc_type, exc, tb):
        drv = _driver()
        plans, self.stream.capture_log = self.stream.capture_log, None
        err, graph = drv.cuStreamEndCapture(self.stream.handle)
        capture_closed()
        if exc_type is not None:
            if not err:
                drv.cuGraphDestroy(graph)
            return False
        check((err,), "cuStreamEndCapture", f"ending capture of '{self.name}'")
        try:
            exec_handle = check(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate", f"instantiating '{self.name}'")
        except CudaError:
            drv.cuGraphDestroy(graph)
            raise
        self.graph = Graph(graph, exec_handle, plans, self.name)
        self.graph.upload(self.stream)
        return False
