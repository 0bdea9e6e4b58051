"""Numpy implementations of the kernels, registered under the kernels' own names (`@reference(SPEC)`).

A reference receives `(launch, *args)`: `launch` carries grid and block, a pointer argument arrives as a
`RefMem` (a typed window onto the allocation it points into) and a scalar as the numpy scalar of its declared
type, so float32 arithmetic stays float32."""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from ..cubins import check_spec
from ..errors import CudaError
from ..kernel_spec import KernelSpec

_REFERENCES: dict[str, tuple[KernelSpec, object]] = {}


@dataclass(frozen=True)
class LaunchInfo:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    space: object = None  # the AddressSpace, for a kernel that reads addresses from a table in memory

    def resolve(self, addr: int) -> "RefMem":
        """What an address read from device memory points to (a launch argument arrives resolved)."""
        return self.space.resolve(int(addr))


class RefMem:
    """What a device pointer resolves to on the reference backend."""

    __slots__ = ("buf", "offset", "name")

    def __init__(self, buf: np.ndarray, offset: int, name: str):
        self.buf = buf  # the whole allocation, uint8
        self.offset = offset
        self.name = name

    def view(self, dtype, count: int | None = None) -> np.ndarray:
        """`count` elements of `dtype` from the pointer on; writable, no copy."""
        dt = np.dtype(dtype)
        avail = (self.buf.size - self.offset) // dt.itemsize
        if count is None:
            count = avail
        if count > avail:
            raise CudaError(f"reference kernel reads {count} {dt} from '{self.name}' at byte {self.offset}, "
                            f"but only {avail} remain in the allocation")
        return self.buf[self.offset:self.offset + count * dt.itemsize].view(dt)

    def f32(self, count=None): return self.view(np.float32, count)
    def f64(self, count=None): return self.view(np.float64, count)
    def i32(self, count=None): return self.view(np.int32, count)
    def u32(self, count=None): return self.view(np.uint32, count)
    def i64(self, count=None): return self.view(np.int64, count)
    def u64(self, count=None): return self.view(np.uint64, count)
    def u8(self, count=None): return self.view(np.uint8, count)

    def __add__(self, nbytes: int) -> "RefMem":
        return RefMem(self.buf, self.offset + int(nbytes), self.name)


def reference(spec: KernelSpec):
    """Register the decorated function as the numpy implementation of `spec`."""
    def register(fn):
        params = inspect.signature(fn).parameters.values()
        arity = len(params)  # (launch, *args) stands for a family's shared reference (agent_act and _quotes)
        assert arity == len(spec.params) + 1 or [p.kind for p in params][-1:] == [inspect.Parameter.VAR_POSITIONAL], \
            f"reference of {spec.name}: {arity} parameters, not launch + params"
        assert _REFERENCES.get(spec.name, (spec,))[0] == spec, f"{spec.name} registered twice, declared otherwise"
        _REFERENCES[spec.name] = (spec, fn)
        return fn
    return register


def reference_for(spec: KernelSpec):
    found = _REFERENCES.get(spec.name)
    if found is None:
        raise ValueError(f"kernel {spec.name} has no numpy reference registered")
    check_spec(spec)  # the declaration against the kernel's C signature, as the CUDA backend does
    if found[0] != spec:
        raise ValueError(f"kernel {spec.name}: the launch's declaration differs from its reference's")
    return found[1]


def registered_specs() -> list[KernelSpec]:
    return [spec for spec, _ in _REFERENCES.values()]
