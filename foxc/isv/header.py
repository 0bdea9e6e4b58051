"""Generates cuda/include/foxc/isv_slots.h from the registry.

    python -m foxc.isv.header --write   # regenerate
    python -m foxc.isv.header --check   # exit 1 when the header is out of date
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..cgen import GeneratedHeader
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





HEADER = GeneratedHeader(HEADER_PATH, render, "foxc.isv.header", "foxc/isv/registry.py")
is_current, write, main = HEADER.is_current, HEADER.write, HEADER.main

if __name__ == "__main__":
    sys.exit(main())
