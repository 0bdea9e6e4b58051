"""`python -m foxc.bench NAME ...` — run one benchmark; `python -m foxc.bench` lists them.

A benchmark is a module foxc/bench/<name>.py with a docstring (its first line is
the description) and `main(argv) -> int`; it prints a table whose last line starts
with `summary:`.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

import foxc.bench as _pkg
from foxc.cli import fail

NOT_BENCHES = {"harness", "report", "cupti", "__main__"}  # what the benchmarks share


def names() -> list[str]:
    """The benchmarks' names (their modules are not imported)."""
    return sorted(info.name for info in pkgutil.iter_modules(_pkg.__path__)
                  if info.name not in NOT_BENCHES and not info.name.startswith("_"))


def benches() -> dict[str, str]:
    found = {}
    for name in names():
        module = importlib.import_module(f"foxc.bench.{name}")
        found[name] = (module.__doc__ or "").strip().splitlines()[0]
    return found


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--list":
        print(" ".join(names()))
        return 0
    if argv and argv[0] not in ("-h", "--help") and argv[0] not in names():
        return fail("foxc.bench", f"unknown benchmark '{argv[0]}' (choose from {', '.join(names())})")
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m foxc.bench NAME [--backend auto|cuda|reference] [--json FILE] ...")
        for name, doc in sorted(benches().items()):
            print(f"  {name:<10} {doc}")
        return 0
    return importlib.import_module(f"foxc.bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
