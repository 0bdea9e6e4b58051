"""Releasing driver handles from finalizers, safely.

A finalizer can run at any moment the garbage collector chooses, including
while a stream capture is open, where a synchronize or free would invalidate
the capture. So finalizer releases made during a capture wait in a queue that
the capture drains when it ends; every release waits for the device first, so
nothing is freed while a stream may still use it; and none of it raises during
interpreter shutdown.
"""
from __future__ import annotations

_open_captures = 0
_deferred: list[tuple[str, object]] = []


def capture_opened():
    global _open_captures
    _open_captures += 1


def capture_closed():
    global _open_captures
    _open_captures -= 1
    if _open_captures == 0:
        while _deferred:
            release(*_deferred.pop())


def release(free_fn_name: str, handle):
    """Finalizer body: wait for the device, then call `free_fn_name(handle)`; never raises."""
    if _open_captures:
        _deferred.append((free_fn_name, handle))
        return
    try:
        from cuda.bindings import driver
        driver.cuCtxSynchronize()
        getattr(driver, free_fn_name)(handle)
    except Exception:
        pass
