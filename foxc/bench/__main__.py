"""`python -m foxc.bench NAME ...`: one benchmark, a module foxc/bench/<name>.py with `main(argv)` whose
docstring's first line describes it; `--list` names them, no NAME lists them with their descriptions."""
from __future__ import annotations

import importlib
import pkgutil
import sys

import foxc.bench as _pkg
from foxc.cli import fail

NOT_BENCHES = {"harness", "report", "cupti"}  # what the benchmarks share


def names() -> list[str]:
    return sorted(i.name for i in pkgutil.iter_modules(_pkg.__path__)
                  if i.name not in NOT_BENCHES and not i.name.startswith("_"))


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--list"]:
        print(" ".join(names()))
        return 0
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m foxc.bench NAME [--backend auto|cuda|reference] [--json FILE] ...")
        for name in names():
            doc = importlib.import_module(f"foxc.bench.{name}").__doc__ or ""
            print(f"  {name:<10} {doc.strip().splitlines()[0]}")
        return 0
    if argv[0] not in names():
        return fail("foxc.bench", f"unknown benchmark '{argv[0]}' (choose from {', '.join(names())})")
    return importlib.import_module(f"foxc.bench.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
