"""Per-interval metrics from the diagnostics frames: metrics.jsonl records, the progress line, and TensorBoard.

TensorBoard (optional: pip install 'foxc[tensorboard]', tensorboardX) gets every numeric field of each record under
`train/` (`eval_*` under `eval/`), live ISV changes under `isv_set/` at the step they took effect, and the slots a
kernel reads under `isv/` as the bus was last published, in RUN_DIR/tensorboard/. A resumed run purges the events a
stopped run wrote past its checkpoint (`purge_step`), as metrics.jsonl moves their records aside."""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

from ..checkpoint.atomic import atomic_write, fsync_directory, remove_stale_temp_files
from ..isv.registry import SLOTS
from ..jsonfile import parse_json

# beside metrics.jsonl: the records a resumed run logs again (supersede_records), appended, never overwritten
SUPERSEDED = "metrics.superseded.jsonl"


def _mean(frames, key):
    vals = [f[key] for f in frames if math.isfinite(f[key])]
    return sum(vals) / len(vals) if vals else None


def device_span(frames: list[dict]) -> float:
    """Seconds of device time from the first frame to the last: len(frames) - 1 steps."""
    return (frames[-1]["t_ns"] - frames[0]["t_ns"]) * 1e-9 if len(frames) > 1 else 0.0


def interval_record(frames: list[dict]) -> dict:
    """One metrics.jsonl record over the frames of a block of consecutive steps. steps/s come from
    the frames' device time stamps (the rate the device completed them at, whatever the host did)."""
    trades = sum(f["closed_trades"] for f in frames)
    wins = sum(f["closed_wins"] for f in frames)
    last, span = frames[-1], device_span(frames)
    return {
        "step": int(last["step"]) + 1,
        "steps": len(frames),
        "sps": round((len(frames) - 1) / span, 2) if span > 0 else None,
        **{k: _mean(frames, k) for k in ("l_q", "l_pi", "l_v", "l_bce")},
        "wr": wins / trades if trades else None,
        "trades": int(trades),
        "pnl": sum(f["closed_pnl_sum"] for f in frames),
        **{k: _mean(frames, field) for k, field in (
            ("hold_frac", "hold_frac"), ("in_market", "in_market_frac"), ("entropy", "entropy_mean"),
            ("reward", "reward_raw_mean"), ("stopped_frac", "stopped_frac"), ("gated_frac", "gated_frac"))},
        **{k: last[k] for k in ("lr_q", "lr_policy", "lr_value", "lr_perception", "lr_encoder", "entropy_coef",
                                "per_beta")},
    }


class FrameBlocks:
    """Completed diagnostics frames cut into blocks of `every` consecutive steps, cut also at each multiple of
    `checkpoint_every` (0: none) so that a resume from any checkpoint starts at a record's end (the last block
    ends at `end`): each block becomes one metrics record once all its frames have arrived, however far the host
    ran ahead of the device."""

    def __init__(self, end: int, every: int, checkpoint_every: int = 0):
        self.end, self.cuts = int(end), [int(e) for e in (every, checkpoint_every) if e]
        self.frames: list[dict] = []

    def add(self, frames: list[dict]):
        self.frames += frames

    def complete(self) -> list[list[dict]]:
        out = []
        while self.frames:
            first = int(self.frames[0]["step"])
            n = min([(first // e + 1) * e for e in self.cuts] + [self.end]) - first
            if len(self.frames) < n:
                break
            out.append(self.frames[:n])
            self.frames = self.frames[n:]
        return out


class MetricsLog:
    """Appends records to metrics.jsonl (and TensorBoard, when given) and shows progress with an ETA:
    a bar on a terminal, plain lines otherwise."""

    def __init__(self, path, total_steps: int, stream=None, label: str = "", start_step: int = 0,
                 tensorboard=None):
        self.path, self.label = path, label  # label: what the progress lines belong to (e.g. "fold 2")
        self.total, self.start = total_steps, start_step
        self.stream = stream or sys.stdout  # looked up now: a caller may have replaced sys.stdout
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()  # stdout too, when no stream is given
        moved = supersede_records(path, start_step)  # the log holds one record per step, a resumed run's too
        if moved:
            print(f"{self.label + ': ' if self.label else ''}{Path(path).name}: {moved} line(s) logged past step "
                  f"{start_step} before this resume moved to {SUPERSEDED} (this run logs those steps again)",
                  file=self.stream, flush=True)
        self.file = open(path, "a", buffering=1)
        if self.file.tell() and not _ends_a_line(path):  # a killed run's torn last record: keep it on a line of
            self.file.write("\n")                          # its own, or the next record would be joined to it
        self.tensorboard = tensorboard
        self.t0 = time.perf_counter()

    def write(self, record: dict):
        self.file.write(json.dumps(record) + "\n")
        if self.tensorboard is not None:
            self.tensorboard.write(record)
        self.show(record)

    def eta(self, step: int) -> str:
        """Time left at the rate since the start (host wall time: evaluations and checkpoints included)."""
        done, left = step - self.start, self.total - step
        if done <= 0 or left <= 0:
            return ""
        seconds = int(left * (time.perf_counter() - self.t0) / done)
        return f"  ETA {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def show(self, record: dict):
        fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        text = (f"{self.label + ': ' if self.label else ''}step {record['step']}/{self.total}  {fmt(record['sps'], '.1f')} steps/s  "
                f"wr {fmt(record['wr'], '.3f')}  l_q {fmt(record['l_q'], '.4f')}  l_pi {fmt(record['l_pi'], '.4f')}  "
                f"l_v {fmt(record['l_v'], '.4f')}  l_bce {fmt(record['l_bce'], '.4f')}  "
                f"in market {fmt(record['in_market'], '.2f')}")
        if "eval_pnl" in record:  # a greedy evaluation on held-out rows ended at this record
            text += f"  | held-out {record['eval_pnl']:+.4f} ticks/snapshot, {record['eval_trades']} trades"
            if record.get("eval_opt_frac") is not None:
                text += f", {record['eval_opt_frac']:.2f} of optimum"
        text += self.eta(record["step"])
        if self.tty:
            width = 24
            done = int(width * min(record["step"], self.total) / max(self.total, 1))
            self.stream.write(f"\r[{'#' * done}{'.' * (width - done)}] {text}")
            self.stream.flush()
        else:
            print(text, file=self.stream, flush=True)

    def close(self):
        if self.tty:
            self.stream.write("\n")
        self.file.close()
        if self.tensorboard is not None:
            self.tensorboard.close()


def supersede_records(path, step: int) -> int:
    """Move every line of the metrics.jsonl at `path` that is not a record of the steps before `step` (the
    records a stopped or crashed run logged past the checkpoint a resumed run starts from, which it logs again,
    and any torn line) to SUPERSEDED beside it, appended; returns how many moved. Crash-safe: the side file is
    written and fsynced before metrics.jsonl is replaced atomically, so a line is always in one of them (in both,
    after a crash between the two: nothing is lost)."""
    path = Path(path)
    if not path.is_file():
        return 0
    kept, moved = [], []
    for line in path.read_bytes().splitlines():
        if line.strip():
            at = _step_of(line)
            (kept if at is not None and at <= step else moved).append(line + b"\n")
    if not moved:
        return 0
    side = path.with_name(SUPERSEDED)
    with open(side, "ab") as f:
        if f.tell() and not _ends_a_line(side):  # its own torn end (a crash while appending): keep lines apart
            f.write(b"\n")
        f.write(b"".join(moved))
        f.flush()
        os.fsync(f.fileno())
    fsync_directory(path.parent)
    remove_stale_temp_files(path.parent, re.compile(re.escape(path.name)))
    atomic_write(path, kept, intact=f"each of its records is in {path.name} or {SUPERSEDED}")
    return len(moved)


def _step_of(line: bytes) -> float | None:
    """The `step` of a metrics record's line; None for a line that is not one (torn, not JSON, no number)."""
    try:
        record = parse_json(line)
    except ValueError:  # not JSON, or absurd JSON
        return None
    step = record.get("step") if isinstance(record, dict) else None
    return step if isinstance(step, (int, float)) and not isinstance(step, bool) else None


def _ends_a_line(path) -> bool:
    """Whether the file at `path` ends with a newline."""
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


TENSORBOARD_INSTALL = "pip install 'foxc[tensorboard]'"


def _writer_class():
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter


def tensorboard_available() -> bool:
    return _writer_class() is not None


class TensorBoardLog:
    def __init__(self, run_dir, isv=None, start_step: int = 0):
        """`isv`: the run's IsvBus (None: no slots logged); `start_step`: a resumed run's, past which TensorBoard
        hides the events logged before (it logs them again)."""
        writer = _writer_class()
        assert writer is not None, "tensorboard_available() first"
        purge = start_step + 1 if start_step else None  # events from this step on are hidden
        self.writer = writer(logdir=str(Path(run_dir) / "tensorboard"), purge_step=purge)
        self.isv = isv
        self.slots = [s.name for s in SLOTS if s.read]

    def write(self, record: dict):
        step = int(record["step"])
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                tag = f"eval/{key.removeprefix('eval_')}" if key.startswith("eval_") else f"train/{key}"
                self.writer.add_scalar(tag, value, step)
        for change in record.get("isv_changes", ()):
            self.writer.add_scalar(f"isv_set/{change['name']}", change["value"], change["step"])
        if self.isv is not None:
            values = self.isv.as_dict()
            for name in self.slots:
                self.writer.add_scalar(f"isv/{name}", values[name], step)
        self.writer.flush()

    def close(self):
        self.writer.close()
