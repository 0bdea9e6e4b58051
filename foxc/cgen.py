"""C headers generated from Python definitions (ISV slots, records, layouts): one way to check,
write and offer them on the command line (`python -m <module> --write|--check`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

CUDA_INCLUDE = Path(__file__).resolve().parents[1] / "cuda" / "include" / "foxc"  # where every header goes
C_TYPES = {np.dtype(np.int64): "long long", np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int"}

# Lets a host compiler (the layout tests use g++) check a struct's static_asserts too.
HOST_CHECKABLE = ["#include <cstddef>", "#ifndef __CUDACC__",
                  "#define __align__(n) alignas(n)  // lets a host compiler check the layout too", "#endif", ""]


def header_text(guard: str, module: str, source: str, body: list[str]) -> str:
    """A generated header: the provenance line, the include guard around `body`."""
    return "\n".join([f"// Generated from {source} by `python -m {module} --write`. Do not edit.",
                      f"#ifndef {guard}", f"#define {guard}", "", *body, "", f"#endif  // {guard}", ""])


def c_struct(name: str, fields, dtype: np.dtype, doc: str, align: int, dim_names: dict | None = None) -> list[str]:
    """The C struct mirroring a numpy structured dtype, with static_asserts on its size and every offset.

    `fields`: (name, dtype, doc) or (name, dtype, shape, doc); `dim_names` spells array sizes by macro."""
    dim_names = dim_names or {}
    lines = [f"// {doc}", f"struct __align__({align}) {name} {{"]
    for field in fields:
        fname, dt, *rest = field
        shape, text = (rest[0], rest[1]) if len(rest) == 2 else ((), rest[0])
        dims = "".join(f"[{dim_names.get(d, d)}]" for d in shape)
        lines.append(f"    {C_TYPES[np.dtype(dt)]} {fname}{dims};  // {text}")
    lines += ["};", f"static_assert(sizeof({name}) == {dtype.itemsize}, \"{name} size\");"]
    lines += [f"static_assert(offsetof({name}, {f[0]}) == {dtype.fields[f[0]][1]}, \"{name}.{f[0]} offset\");"
              for f in fields]
    return lines


def c_literal(value) -> str:
    """A macro's value: integers as written, floats as float literals (`1e-06f`)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError("a header constant is an int or a float")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value)!r}f".replace("e-0", "e-").replace("e+0", "e+")


def defines(entries) -> list[str]:
    """`#define NAME VALUE  // why` lines from (name, value, why) (why may be empty), values aligned."""
    width = max(len(name) for name, _, _ in entries) + 1
    lines = []
    for name, value, why in entries:
        line = f"#define {name:<{width}}{c_literal(value)}"
        lines.append(f"{line:<{width + 20}}// {why}" if why else line)
    return lines


class GeneratedHeader:
    def __init__(self, path: Path, render, module: str, source: str):
        self.path, self.render, self.module, self.source = Path(path), render, module, source

    @classmethod
    def of(cls, name: str, lines, module: str, source: str | None = None) -> GeneratedHeader:
        """CUDA_INCLUDE/<name>: `lines()` in header_text's frame, guard FOXC_<NAME>_H, written by `python -m
        <module>` from `source` (default: the module's file)."""
        source = source or module.replace(".", "/") + ".py"
        guard = "FOXC_" + name.upper().replace(".", "_")
        return cls(CUDA_INCLUDE / name, lambda: header_text(guard, module, source, lines()), module, source)

    def is_current(self, path: Path | None = None) -> bool:
        path = Path(path or self.path)
        return path.is_file() and path.read_text() == self.render()

    def write(self, path: Path | None = None) -> bool:
        """Write the header if it differs; True when it changed."""
        path = Path(path or self.path)
        if self.is_current(path):
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.render())
        return True

    def main(self, argv=None) -> int:
        ap = argparse.ArgumentParser(prog=f"python -m {self.module}",
                                     description=f"Generate {self.path.name} from {self.source}.")
        group = ap.add_mutually_exclusive_group(required=True)
        group.add_argument("--write", action="store_true", help="regenerate the header")
        group.add_argument("--check", action="store_true", help="exit 1 when the header is out of date")
        args = ap.parse_args(argv)
        if args.write:
            print(f"{self.path}: {'written' if self.write() else 'already current'}")
            return 0
        if self.is_current():
            return 0
        print(f"{self.path} is out of date with {self.source}: run python -m {self.module} --write", file=sys.stderr)
        return 1
