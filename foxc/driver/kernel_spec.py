"""Kernel declarations: a name, the cubin that holds it, and typed parameters.

Declared once, beside the kernel's numpy reference; both backends check the declaration against the kernel at
load (cubins.py) and convert launch arguments through it, so a Python int is never packed as a pointer and a
float never passed where the kernel expects an integer.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


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
    layout: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)  # (offset, size) each

    def __post_init__(self):
        offsets, offset = [], 0
        for p in self.params:
            offset = (offset + p.kind.size - 1) // p.kind.size * p.kind.size  # natural alignment
            offsets.append((offset, p.kind.size))
            offset += p.kind.size
        object.__setattr__(self, "layout", tuple(offsets))

    def describe_param(self, index: int) -> str:
        p, (off, size) = self.params[index], self.layout[index]
        return f"{self.name} parameter {index} '{p.name}' {p.kind.name} (offset {off}, size {size})"


class DevPtr:
    """A device address and the object owning the memory behind it, kept alive as long as a launch plan (and any
    graph captured from it) may use the address."""

    __slots__ = ("addr", "owner")

    def __init__(self, addr: int, owner=None):
        self.addr, self.owner = int(addr), owner

    def __int__(self):
        return self.addr

    def __repr__(self):
        return f"DevPtr(0x{self.addr:x})"


def pointer_of(value, spec: KernelSpec, index: int) -> DevPtr:
    """A DevPtr, or an array's `.ptr`; a plain int is refused."""
    dev = value if isinstance(value, DevPtr) else getattr(value, "ptr", None)
    if not isinstance(dev, DevPtr):
        raise TypeError(f"{spec.describe_param(index)}: {type(value).__name__} is no DevPtr")
    return dev


def scalar_of(value, spec: KernelSpec, index: int):
    """The numpy scalar the kernel sees, of the parameter's type (a bool, or a float for an integer, refused)."""
    kind = spec.params[index].kind
    number = (int, float, np.integer, np.floating) if kind is F32 else (int, np.integer)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, number):
        raise TypeError(f"{spec.describe_param(index)}: {type(value).__name__} {value!r}")
    if kind is F32:
        return np.float32(value)
    limits = np.iinfo(kind.numpy_type)
    if not limits.min <= int(value) <= limits.max:
        raise ValueError(f"{spec.describe_param(index)}: {value} is out of range")
    return kind.numpy_type(value)


def convert_args(spec: KernelSpec, args) -> list:
    """Launch arguments through the declaration: DevPtrs for pointers, numpy scalars otherwise. `args` in the
    declaration's order, or a mapping from parameter names to values (each bound by its name)."""
    names = [p.name for p in spec.params]
    if isinstance(args, Mapping):
        if set(args) != set(names):
            raise TypeError(f"{spec.name}: unknown {sorted(set(args) - set(names))}, "
                            f"missing {[n for n in names if n not in args]}")
        args = [args[n] for n in names]
    if len(args) != len(names):
        raise TypeError(f"{spec.name} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    return [pointer_of(a, spec, i) if p.kind is PTR else scalar_of(a, spec, i)
            for i, (p, a) in enumerate(zip(spec.params, args))]


def pack_slot(kind: ParamKind, value) -> bytes:
    """One 8-byte argument slot, little-endian, the value at its start."""
    return struct.pack(kind.struct_code, int(value) if kind is PTR else value).ljust(8, b"\0")
