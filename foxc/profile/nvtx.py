"""NVTX ranges for nsys timelines: real ranges when the optional `nvtx` package is installed, free when not.

    with nvtx_range("replay.sample"):
        ...

    @nvtx_annotate("checkpoint.save")
    def save(...): ...

Ranges go to the NVTX domain "foxc". Without the package, with NVTX_DISABLE set, or
with no profiler attached (the package then hands out a dummy domain; the check is
made once, at import, which is when nsys has already injected itself),
`nvtx_range` returns one shared do-nothing context and `nvtx_annotate` returns the
function unchanged, so leaving the ranges in the trainer's hot loop costs a call
and an attribute lookup (tests/test_profile_nvtx.py measures it).
"""
from __future__ import annotations

import functools
import os

DOMAIN = "foxc"


def _load_domain():
    """The `nvtx` package's domain object for foxc, or None when ranges cannot be recorded."""
    if os.environ.get("NVTX_DISABLE"):
        return None
    try:
        import nvtx
    except ImportError:
        return None
    domain = nvtx.get_domain(DOMAIN)
    # with no tool attached (not under nsys) the package hands out a dummy domain: skip it entirely
    return domain if isinstance(domain, nvtx.Domain) else None


_domain = _load_domain()


def available() -> bool:
    """True when ranges are recorded: the `nvtx` package is installed, not disabled, and a tool (nsys) is attached."""
    return _domain is not None


class _NoRange:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NO_RANGE = _NoRange()


class _Range:
    """One pushed range; the event attributes are built once per (name, color) and reused."""

    __slots__ = ("domain", "attributes")
    _attributes: dict = {}

    def __init__(self, domain, name: str, color):
        self.domain = domain
        key = (name, color)
        found = _Range._attributes.get(key)
        if found is None:
            found = _Range._attributes[key] = domain.get_event_attributes(message=name, color=color)
        self.attributes = found

    def __enter__(self):
        self.domain.push_range(self.attributes)
        return self

    def __exit__(self, *exc):
        self.domain.pop_range()
        return False


def nvtx_range(name: str, color=None):
    """A context manager that brackets its block with an NVTX range called `name` (nested ranges nest)."""
    domain = _domain
    if domain is None:
        return _NO_RANGE
    return _Range(domain, name, color)


def nvtx_annotate(name: str | None = None, color=None):
    """Decorator: every call of the function runs inside `nvtx_range(name or the function's qualified name)`.

    Without NVTX the function is returned as it is, so a decorated function costs nothing extra.
    """
    def wrap(fn):
        if _domain is None:
            return fn
        label = name or fn.__qualname__

        @functools.wraps(fn)
        def ranged(*args, **kwargs):
            with nvtx_range(label, color):
                return fn(*args, **kwargs)
        return ranged
    return wrap


def nvtx_mark(name: str, color=None):
    """An instantaneous NVTX marker (e.g. 'checkpoint written')."""
    if _domain is not None:
        _domain.mark(message=name, color=color)
