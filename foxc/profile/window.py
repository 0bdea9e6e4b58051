"""`--profile-steps A:B`: a window of training steps, and the cuProfilerStart/Stop calls around it.

nsys (`--capture-range=cudaProfilerApi --capture-range-end=stop`) and ncu
(`--profile-from-start off`) record only what is launched between the two calls,
so a run profiles steps A..B (inclusive, as the trainer numbers them) and nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from ..errors import UserError


class WindowError(UserError):
    """A step window spec that is not `A:B` with 0 <= A <= B."""


@dataclass(frozen=True)
class StepWindow:
    first: int
    last: int  # inclusive

    def __contains__(self, step: int) -> bool:
        return self.first <= step <= self.last

    def __str__(self) -> str:
        return f"{self.first}:{self.last}"

    def outside(self, first: int, end: int) -> str | None:
        """What of the window a run of steps first..end - 1 covers, when not all of it (None when it does)."""
        if first <= self.first and self.last < end:
            return None
        lo, hi = max(self.first, first), min(self.last, end - 1)
        steps = f"this run's steps are {first}..{end - 1}" if end > first else "this run takes no step"
        if lo > hi:
            return f"{self} lies outside the run ({steps}): no step is profiled"
        return f"{self} lies partly outside the run ({steps}): only steps {lo}..{hi} are profiled"


def parse_window(spec) -> StepWindow:
    """`"A:B"` (or a StepWindow) -> StepWindow; steps A through B inclusive, 0 <= A <= B."""
    if isinstance(spec, StepWindow):
        return spec
    text = str(spec).strip()
    parts = text.split(":")
    if len(parts) != 2:
        raise WindowError(f"step window '{text}' must be A:B (first and last step, inclusive), e.g. 200:210")
    bounds = []
    for what, part in zip(("first", "last"), parts):
        try:
            bounds.append(int(part.strip()))
        except ValueError:
            raise WindowError(f"step window '{text}': the {what} step '{part}' is not an integer") from None
    first, last = bounds
    if first < 0 or last < 0:
        raise WindowError(f"step window '{text}': steps must be non-negative")
    if first > last:
        raise WindowError(f"step window '{text}': the first step {first} is after the last step {last}")
    return StepWindow(first, last)


def window_arg(spec: str) -> StepWindow:
    """argparse `type=`: turns a WindowError into argparse's usage error."""
    import argparse
    try:
        return parse_window(spec)
    except WindowError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class ProfilerWindow:
    """Calls `rt.profiler_start()` before step A and `rt.profiler_stop()` after step B.

    The trainer calls `before_step(step)` and `after_step(step)` around every step, and
    `close()` at the end (it stops a window the run ended inside). The stream is
    synchronized at both edges, so the window holds exactly the GPU work of steps A..B
    and not the tail of step A-1. A run resumed inside the window opens it at its first
    step. `spec=None` makes a window that never opens (the trainer can always call it).
    """

    def __init__(self, rt, spec):
        self.rt = rt
        self.window = None if spec is None else parse_window(spec)
        self.open = False
        self.done = False

    def before_step(self, step: int):
        if self.window is not None and not self.open and not self.done and step in self.window:
            self.rt.synchronize()
            self.rt.profiler_start()
            self.open = True

    def after_step(self, step: int):
        if self.open and step >= self.window.last:
            self.close()

    def close(self):
        if self.open:
            self.rt.synchronize()
            self.rt.profiler_stop()
            self.open = False
            self.done = True
