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

NOT_BENCHES = {"report", "__main__"}


def benches() -> dict[str, str]:
    found = {}
    for info in pkgutil.iter_modules(_pkg.__path__):
        if info.name not in NOT_BENCHES and not info.name.startswith("_"):
            module = importlib.import_module(f"foxc.bench.{info.name}")
            found[info.name] = (module.__doc__ or "").strip().splitlines()[0]
    return found


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    known = benches()
    if argv and argv[0] == "--list":
        print(" ".join(sorted(known)))
        return 0
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in known:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"unknown benchmark '{argv[0]}'", file=sys.stderr)
        print("usage: python -m foxc.bench NAME [--backend auto|cuda|reference] [--json FILE] ...")
        for name, doc in sorted(known.items()):
            print(f"  {name:<10} {doc}")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return importlib.import_module(f"foxc.bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
