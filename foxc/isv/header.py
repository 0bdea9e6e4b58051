"""Generates cuda/include/foxc/isv_slots.h from the registry: `python -m foxc.isv.header --write` (or `--check`:
exit 1 when the header is out of date)."""
from __future__ import annotations

import sys

from ..cgen import GeneratedHeader
from .registry import N_SLOTS, SLOTS, STEP_WRAP


def lines() -> list[str]:
    width = max(len(s.macro) for s in SLOTS)
    return [f"#define ISV_N_SLOTS {N_SLOTS}", f"#define ISV_STEP_WRAP {STEP_WRAP}.0f", "",
            *(f"#define {s.macro:<{width}} {s.index:>3}  // {s.doc}" for s in SLOTS)]


HEADER = GeneratedHeader.of("isv_slots.h", lines, "foxc.isv.header", "foxc/isv/registry.py")
render, is_current, write, main = HEADER.render, HEADER.is_current, HEADER.write, HEADER.main

if __name__ == "__main__":
    sys.exit(main())
