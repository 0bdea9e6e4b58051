#!/usr/bin/env python3
"""Inspect, verify and compare FOXC checkpoints: a wrapper of `foxc-ckpt-inspect` for a source checkout.

    python3 tools/ckpt_inspect.py PATH [--isv | --section NAME | --diff OTHER | --verify] [--json] [--full]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from foxc.checkpoint.inspect_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
