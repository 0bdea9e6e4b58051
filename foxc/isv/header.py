"""Generates cuda/include/foxc/isv_slots.h from the registry.

    python -m foxc.isv.header --write   # regenerate
    python -m foxc.isv.header --check   # exit 1 when the header is out of date
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .registry import N_SLOTS, SLOTS, STEP_WRAP

HEADER_PATH = Path(__file__).resolve().parents[2] / "cuda" / "include" / "foxc" / "isv_slots.h"


def render() -> str:
    width = max(len(s.macro) for s in SLOTS)
    lines = [
        "// Generated from foxc/isv/registry.py by `python -m foxc.isv.header --write`. Do not edit.",
        "#ifndef FOXC_ISV_SLOTS_H",
        "#define FOXC_ISV_SLOTS_H",
        "",
        f"#define ISV_N_SLOTS {N_SLOTS}",
        f"#define ISV_STEP_WRAP {STEP_WRAP}.0f",
        "",
    ]
    for s in SLOTS:
        lines.append(f"#define {s.macro:<{width}} {s.index:>3}  // {s.doc}")
    lines += ["", "#endif  // FOXC_ISV_SLOTS_H", ""]
    return "\n".join(lines)


def is_current(path: Path = HEADER_PATH) -> bool:
    return path.is_file() and path.read_text() == render()


def write(path: Path = HEADER_PATH) -> bool:
    """Write the header if it differs; True when it changed."""
    if is_current(path):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render())
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m foxc.isv.header", description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="regenerate the header")
    group.add_argument("--check", action="store_true", help="exit 1 when the header is out of date")
    args = ap.parse_args(argv)
    if args.write:
        print(f"{HEADER_PATH}: {'written' if write() else 'already current'}")
        return 0
    if is_current():
        return 0
    print(f"{HEADER_PATH} is out of date with foxc/isv/registry.py: run python -m foxc.isv.header --write",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
