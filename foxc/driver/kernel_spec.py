"""Kernel declarations: a name, the cubin that holds it, and typed parameters.

A kernel is declared once, next to its numpy reference; both backends check the declaration at load
(cubins.py) and convert launch arguments through it, so a Python int is never silently packed as a
pointer and a float is never passed where the kernel expects an integer.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .errors import CudaError


@dataclass(frozen=True)
class ParamKind:
    name: str
    size: int
    struct_code: str  # how the value is packed into its 8-byte argument slot
    numpy_type: type | None  # the scalar type references receive; None for pointers


PTR = ParamKind("ptr", 8, "<Q", None)
I32 = ParamKind("i32", 4, "<i", np.int32)
U32 = ParamKind("u32", 4, "<I", np.uint32)
I64 = ParamKind("i64", 8, "<q", np.int64)
U64 = ParamKind("u64", 8, "<Q", np.uint64)
F32 = ParamKind("f32", 4, "<f", np.float32)


@dataclass(frozen=True)
class Param:
    name: str
    kind: ParamKind


def ptr(name: str) -> Param: return Param(name, PTR)
def i32(name: str) -> Param: return Param(name, I32)
def u32(name: str) -> Param: return Param(name, U32)
def i64(name: str) -> Param: return Param(name, I64)
def u64(name: str) -> Param: return Param(name, U64)
def f32(name: str) -> Param: return Param(name, F32)


@dataclass(frozen=True)
class KernelSpec:
    """`name` is the extern "C" symbol; `module` the cubin path under cubins/sm_XY without .cubin."""

    name: str
    module: str
    params: tuple[Param, ...]
    doc: str = ""
    layout: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        offsets, offset = [], 0
        for p in self.params:
            offset = (offset + p.kind.size - 1) // p.kind.size * p.kind.size  # natural alignment
            offsets.append((offset, p.kind.size))
            offset += p.kind.size
        object.__setattr__(self, "layout", tuple(offsets))

    def describe_param(self, index: int) -> str:
        p = self.params[index]
        off, size = self.layout[index]
        return f"parameter {index} '{p.name}' declared {p.kind.name} (offset {off}, size {size})"


class DevPtr:
    """A device address and the object owning the memory behind it, kept alive as long as a launch plan
    (and any graph captured from it) may use the address."""

    __slots__ = ("addr", "owner")

    def __init__(self, addr: int, owner=None):
        self.addr = int(addr)
        self.owner = owner

    def __int__(self):
        return self.addr

    def __repr__(self):
        return f"DevPtr(0x{self.addr:x})"


def pointer_of(value, spec: KernelSpec, index: int) -> DevPtr:
    if isinstance(value, DevPtr):
        return value
    dev = getattr(value, "ptr", None)
    if isinstance(dev, DevPtr):
        return dev
    raise CudaError(
        f"kernel {spec.name}: {spec.describe_param(index)} needs a device buffer or DevPtr, "
        f"got {type(value).__name__} (plain ints are never taken as pointers)")


def scalar_of(value, spec: KernelSpec, index: int):
    """Validate a scalar launch argument; returns the numpy scalar the kernel will see."""
    kind = spec.params[index].kind
    if isinstance(value, (bool, np.bool_)):
        raise CudaError(f"kernel {spec.name}: {spec.describe_param(index)} got a bool; pass an int")
    if kind is F32:
        if not isinstance(value, (int, float, np.integer, np.floating)):
            raise CudaError(f"kernel {spec.name}: {spec.describe_param(index)} got {type(value).__name__}")
        return np.float32(value)
    if not isinstance(value, (int, np.integer)):
        raise CudaError(
            f"kernel {spec.name}: {spec.describe_param(index)} needs an integer, got {type(value).__name__} {value!r}")
    limits = np.iinfo(kind.numpy_type)
    if not limits.min <= int(value) <= limits.max:
        raise CudaError(f"kernel {spec.name}: {spec.describe_param(index)}: {value} is out of range")
    return kind.numpy_type(value)


def convert_args(spec: KernelSpec, args) -> list:
    """Launch arguments checked against the declaration: DevPtr for pointers, numpy scalars otherwise.
    `args` is the values in the declaration's order, or a mapping from each parameter's name to its value
    (what a call site with many parameters should pass: an argument is then bound by its name)."""
    if isinstance(args, Mapping):
        names = [p.name for p in spec.params]
        unknown, missing = sorted(set(args) - set(names)), [n for n in names if n not in args]
        if unknown or missing:
            raise CudaError(f"kernel {spec.name}: " + "; ".join(
                f"{what} argument(s) {', '.join(found)}" for what, found in (("unknown", unknown),
                                                                             ("missing", missing)) if found))
        args = [args[n] for n in names]
    if len(args) != len(spec.params):
        names = ", ".join(p.name for p in spec.params)
        raise CudaError(f"kernel {spec.name} takes {len(spec.params)} arguments ({names}), got {len(args)}")
    return [pointer_of(a, spec, i) if p.kind is PTR else scalar_of(a, spec, i)
            for i, (p, a) in enumerate(zip(spec.params, args))]


def pack_slot(kind: ParamKind, value) -> bytes:
    """One 8-byte argument slot, little-endian, the value at its start."""
    raw = struct.pack(kind.struct_code, int(value) if kind is PTR else value)
    return raw.ljust(8, b"\0")
