"""Every handle owns one resource: `close()` releases it once, `with` closes it, a finalizer releases it if
nobody did. The collector may run a finalizer while a stream capture is open, where a synchronize or a free
would invalidate the capture: releases asked for then wait until the last capture closes. A finalizer never
raises (the interpreter may be shutting down); `close()` raises what the release raised."""
from __future__ import annotations

import weakref

_open_captures = 0
_deferred: list[tuple] = []


def capture_opened():
    global _open_captures
    _open_captures += 1


def capture_closed():
    global _open_captures
    _open_captures -= 1
    while not _open_captures and _deferred:
        _collected(*_deferred.pop())


def _collected(free, args):
    if _open_captures:
        _deferred.append((free, args))
        return
    try:
        free(*args)
    except Exception:
        pass


class Owned:
    """A class that owns nothing gets a `close()` that does nothing."""

    _finalizer = None

    def _own(self, free, *args, holder=None):
        """`free(*args)` releases the resource, also when `holder` (default self) is collected: `args` must not
        reference the holder."""
        self._finalizer = weakref.finalize(self if holder is None else holder, _collected, free, args)

    @property
    def _closed(self) -> bool:
        return self._finalizer is not None and not self._finalizer.alive

    def close(self):
        found = self._finalizer.detach() if self._finalizer is not None else None
        if found is not None:
            free, args = found[2]
            if _open_captures:
                _deferred.append((free, args))
            else:
                free(*args)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
