"""Streams and events (CUDA backend), and `release`, the checked call that ends every CUDA handle."""
from __future__ import annotations

from cuda.bindings import driver

from .errors import check
from .lifecycle import Owned


def release(call: str, handle, doing: str, after: Stream | None = None):
    """`call(handle)`, checked, after waiting for `after` (while it is open): the stream that used the resource.

    foxc issues all of a runtime's work on its one stream, so waiting for that stream, not the whole
    context, is enough, and leaves other runtimes' work running.
    """
    if after is not None and not after._closed:
        after.synchronize(f"waiting for stream '{after.name}' before {doing}")
    check(getattr(driver, call)(handle), call, doing)


class Stream(Owned):
    """A non-blocking stream."""

    def __init__(self, name: str):
        self.name = name
        self.capture_log = None
        self._handle = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate",
                             f"creating stream '{name}'")
        self._own(_destroy_stream, self._handle, name)

    def synchronize(self, doing: str | None = None):
        check(driver.cuStreamSynchronize(self._handle), "cuStreamSynchronize",
              doing or f"waiting for stream '{self.name}'")

    def wait(self, event: Event):
        check(driver.cuStreamWaitEvent(self._handle, event._handle, 0), "cuStreamWaitEvent",
              f"ordering stream '{self.name}' after event '{event.name}'")


def _destroy_stream(handle, name: str):
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
