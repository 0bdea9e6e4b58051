"""Generates cuda/include/foxc/isv_slots.h from the registry.

    python -m foxc.isv.header --write   # regenerate
    python -m foxc.isv.header --check   # exit 1 when the header is out of date
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..cgen import GeneratedHeader, header_text
from .registry import N_SLOTS, SLOTS, STEP_WRAP

HEADER_PATH = Path(__file__).resolve().parents[2] / "cuda" / "include" / "foxc" / "isv_slots.h"


def render() -> str:
    width = max(len(s.macro) for s in SLOTS)
    lines = [f"#define ISV_N_SLOTS {N_SLOTS}", f"#define ISV_STEP_WRAP {STEP_WRAP}.0f", ""]
    lines += [f"#define {s.macro:<{width}} {s.index:>3}  // {s.doc}" for s in SLOTS]
    return header_text("FOXC_ISV_SLOTS_H", "foxc.isv.header", "foxc/isv/registry.py", lines)


HEADER = GeneratedHeader(HEADER_PATH, render, "foxc.isv.header", "foxc/isv/registry.py")
is_current, write, main = HEADER.is_current, HEADER.write, HEADER.main

if __name__ == "__main__":
    sys.exit(main())
