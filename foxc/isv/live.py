"""Live ISV changes: `python -m foxc.isv set RUN_DIR NAME=VALUE` asks a running trainer to set slots.

A request is a JSON file written atomically into RUN_DIR/isv_requests/. Between steps (at most every POLL_S), the
trainer applies each as a one-slot write on the training stream into the device copy the captured graph reads
(nothing recaptured; the change takes effect at one exact step), records it in metrics.jsonl and moves the file to
applied/, so that a resume never applies it twice. While it trains it keeps isv_requests/trainer.live (host, pid):
requests go only to a live trainer, and one that waited from before the trainer started is rejected.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path

from ..errors import UserError
from ..jsonfile import JsonFileError, read_json, shape_problem
from ..numbers import whole
from ..paths import process_alive
from .registry import setting_problem

REQUESTS = "isv_requests"
MARKER = "trainer.live"  # not *.json: requests are the *.json files
POLL_S = 0.25  # a directory listing every quarter second costs nothing next to the steps between
REQUEST = {"set": list[tuple[str, float]]}


def request(run_dir, settings: list[tuple[str, float]]) -> Path:
    """Write one request for a trainer running in `run_dir`; returns the request's path."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise UserError(f"{run_dir}: not a training run directory (no config.json)")
    if running_trainer(run_dir) is None:
        raise UserError(f"{run_dir}: no trainer is running there; to go on with other values, resume the run: "
                        "python -m foxc.train --resume-from CHECKPOINT --set NAME=VALUE")
    for name, value in settings:
        if problem := setting_problem(name, value):
            raise UserError(f"{name}: {problem}")
    folder = run_dir / REQUESTS
    folder.mkdir(exist_ok=True)
    stem = f"{time.time_ns():020d}-{os.getpid()}"
    tmp, path = folder / f".{stem}.tmp", folder / f"{stem}.json"
    tmp.write_text(json.dumps({"set": [[n, float(v)] for n, v in settings]}) + "\n")
    os.replace(tmp, path)
    return path


def running_trainer(run_dir) -> str | None:
    """Who trains in `run_dir` now ("pid N on HOST"), from its marker; None where no trainer runs: no marker, one
    damaged, or one of this host naming a process that is gone (a crashed trainer leaves its marker behind)."""
    try:
        who = read_json(Path(run_dir) / REQUESTS / MARKER)
    except (OSError, JsonFileError):
        return None
    here = who.get("host") == socket.gethostname() and whole(who.get("pid"))  # else nothing to ask about
    return f"pid {who.get('pid')} on {who.get('host')}" if not here or process_alive(int(who["pid"])) else None


class LiveRequests:
    """The trainer's side: marks the run as live, lists the requests not yet applied, oldest first."""

    def __init__(self, run_dir):
        self.folder = Path(run_dir) / REQUESTS
        self.next_poll = 0.0
        self.folder.mkdir(parents=True, exist_ok=True)
        for path, _, _ in self.pending():  # made before this trainer started: meant for another run
            self.file(path, 0, "rejected")
        (self.folder / MARKER).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}) + "\n")

    def close(self):
        (self.folder / MARKER).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.folder.rmdir()  # a run without live requests leaves no trace; one with them keeps their record

    def due(self) -> bool:
        now = time.monotonic()
        if now < self.next_poll:
            return False
        self.next_poll = now + POLL_S
        return True

    def pending(self) -> list[tuple[Path, list[tuple[str, float]] | None, str]]:
        """(path, settings, problem) of each waiting request; settings None when the file is unreadable."""
        out = []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                doc = read_json(path)
                problem = shape_problem(doc, REQUEST)
            except OSError as e:
                problem = e.strerror or str(e)
            except JsonFileError as e:
                problem = e.problem
            if problem:
                out.append((path, None, f"unreadable request: {problem}"))
                continue
            settings = [(name, float(value)) for name, value in doc["set"]]
            out.append((path, settings, "; ".join(f"{n}: {p}" for n, v in settings if (p := setting_problem(n, v)))))
        return out

    def file(self, path: Path, step: int, outcome: str) -> Path:
        """Move a handled request to applied/ or rejected/ (`outcome`), its name led by the step."""
        folder = self.folder / outcome
        folder.mkdir(exist_ok=True)
        moved = folder / f"step{step:012d}-{path.name}"
        os.replace(path, moved)
        return moved
