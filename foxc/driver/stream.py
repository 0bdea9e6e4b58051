"""Streams and events (CUDA backend)."""
from __future__ import annotations

import weakref

from .errors import check
from .release import release


def _driver():
    from cuda.bindings import driver
    return driver


class Stream:
    """A non-blocking stream. `capture_log` is the list of launches while a capture is open on it."""

    def __init__(self, ctx, name: str = "stream"):
        drv = _driver()
        self.name = name
        self.handle = check(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate",
                            f"creating stream '{name}'")
        self.capture_log = None
        self._closed = False
        self._finalizer = weakref.finalize(self, release, "cuStreamDestroy", self.handle)

    def synchronize(self, doing: str | None = None):
        check(_driver().cuStreamSynchronize(self.handle), "cuStreamSynchronize",
              doing or f"waiting for stream '{self.name}'")

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self.synchronize(f"waiting for stream '{self.name}' before destroying it")
        check(_driver().cuStreamDestroy(self.handle), "cuStreamDestroy", f"destroying stream '{self.name}'")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Event:
    """A timing event: `record` on a stream, then `elapsed_ms` between two recorded events."""

    def __init__(self, name: str = "event"):
        drv = _driver()
        self.name = name
        self.handle = check(drv.cuEventCreate(drv.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate",
                            f"creating event '{name}'")
        self._closed = False
        self._finalizer = weakref.finalize(self, release, "cuEventDestroy", self.handle)

    def record(self, stream):
        check(_driver().cuEventRecord(self.handle, stream.handle), "cuEventRecord",
              f"recording event '{self.name}' on stream '{stream.name}'")

    def synchronize(self):
        check(_driver().cuEventSynchronize(self.handle), "cuEventSynchronize", f"waiting for event '{self.name}'")

    def query(self) -> bool:
        """True when the work before the event has completed, without waiting."""
        drv = _driver()
        (err,) = drv.cuEventQuery(self.handle)
        if err == drv.CUresult.CUDA_ERROR_NOT_READY:
            return False
        check((err,), "cuEventQuery", f"querying event '{self.name}'")
        return True

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event to `end`; waits for `end`."""
        end.synchronize()
        return float(check(_driver().cuEventElapsedTime(self.handle, end.handle), "cuEventElapsedTime",
                           f"timing '{self.name}' to '{end.name}'"))

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self.synchronize()
        check(_driver().cuEventDestroy(self.handle), "cuEventDestroy", f"destroying event '{self.name}'")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
