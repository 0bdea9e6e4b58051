"""NVTX ranges for nsys timelines: real ranges when the optional `nvtx` package is installed, free when not.

    with nvtx_range("replay.sample"):
        ...

Ranges go to the NVTX domain "foxc". Without the package, with NVTX_DISABLE set, or with no
profiler attached (the package then hands out a dummy domain; the check is made once, at import,
which is when nsys has already injected itself), `nvtx_range` returns one shared do-nothing
context, so leaving the ranges in the trainer's hot loop costs a call and an attribute lookup
(tests/test_profile.py measures it).
"""
from __future__ import annotations

import contextlib
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
_NO_RANGE = contextlib.nullcontext()


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
