"""Stream capture on both backends. While a capture is open on a stream, its `capture_log` lists
what is launched on it; the graph made from the capture holds that list, and so every buffer used.

Warm up on the stream and allocate everything first: host copies are refused while a capture is
open, and nothing may synchronize.
"""
from __future__ import annotations

from .errors import CudaError
from .lifecycle import Owned, capture_closed, capture_opened


class GraphBase(Owned):
    def __init__(self, plans: list, name: str):
        self.plans, self.name = plans, name

    @property
    def kernel_count(self) -> int:
        return sum(hasattr(p, "kernel") for p in self.plans)


class CaptureBase:
    """Each backend adds `_begin()` and `_end(log, failed)`, which returns the graph (None when failed)."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name
        self.graph = None

    def __enter__(self):
        if self._stream.capture_log is not None:
            raise CudaError(f"stream '{self._stream.name}' is already capturing")
        self._begin()
        capture_opened()
        self._stream.capture_log = []
        return self

    def __exit__(self, exc_type, exc, tb):
        log, self._stream.capture_log = self._stream.capture_log, None
        try:
            self.graph = self._end(log, failed=exc_type is not None)
        finally:
            capture_closed()
        return False
