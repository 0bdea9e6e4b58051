"""Stream capture into a CUDA graph: capture, instantiate, upload, launch, destroy."""
from __future__ import annotations

import gc

from cuda.bindings import driver

from .runtime import CaptureBase, GraphBase
from .errors import CudaError, check, raise_for
from .stream import release


class Graph(GraphBase):
    """An instantiated graph, holding the launch plans and copies it captured."""

    def __init__(self, graph, exec_handle, plans: list, name: str):
        super().__init__(plans, name)
        self._graph, self._exec = graph, exec_handle
        self._launch = driver.cuGraphLaunch
        self._own(_destroy, exec_handle, graph, name)

    def node_count(self) -> int:
        _, n = check(driver.cuGraphGetNodes(self._graph, 0), "cuGraphGetNodes", f"counting nodes of '{self.name}'")
        return int(n)

    def launch(self, stream):
        if stream.capture_log is not None:  # captured into another graph, which then holds these plans too
            stream.capture_log.extend(self.plans)
        (err,) = self._launch(self._exec, stream._handle)
        if err:
            raise_for(err, "cuGraphLaunch", f"launching graph '{self.name}' on stream '{stream.name}'")


def _destroy(exec_handle, graph, name: str):
    release("cuGraphExecDestroy", exec_handle, f"destroying graph '{name}'")  # an in-flight one ends first
    release("cuGraphDestroy", graph, f"destroying graph '{name}'")


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
            exec_handle = check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate",
                                f"instantiating '{self._name}'")
        except CudaError:
            driver.cuGraphDestroy(graph)
            raise
        done = Graph(graph, exec_handle, log, self._name)
        check(driver.cuGraphUpload(exec_handle, self._stream._handle), "cuGraphUpload", f"uploading '{self._name}'")
        return done
