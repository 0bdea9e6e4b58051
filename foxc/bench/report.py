"""A benchmark's JSON record: its rows with backend, device, host, commit and time."""
from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path


def git_commit() -> str:
    """$FOXC_COMMIT when set (a copied tree without .git), else git's short HEAD."""
    if os.environ.get("FOXC_COMMIT"):
        return os.environ["FOXC_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def write_json(path: str | None, name: str, rt, rows: list[dict], extra: dict | None = None):
    if path:
        Path(path).write_text(json.dumps(
            {"benchmark": name, "backend": rt.backend, "device": rt.device_name, "host": platform.node(),
             "commit": git_commit(), "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "rows": rows,
             **(extra or {})}, indent=1) + "\n")
