"""`python -m foxc.bench NAME ...` — run one benchmark; `python -m foxc.bench` lists them."""
from __future__ import annotations

import importlib
import sys

BENCHES = {
    "driver": ("foxc.bench.driver", "host cost per eager launch and per kernel in a replayed graph"),
}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in BENCHES:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"unknown benchmark '{argv[0]}'", file=sys.stderr)
        print("usage: python -m foxc.bench NAME [--backend auto|cuda|reference] [--json FILE] ...")
        for name, (_, doc) in BENCHES.items():
            print(f"  {name:<10} {doc}")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    module = importlib.import_module(BENCHES[argv[0]][0])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
