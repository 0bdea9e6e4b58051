"""Profiling a run: `--profile-steps A:B` (the cuProfilerStart/Stop window for nsys and ncu), `--profile` (the
per-kernel event table) and NVTX ranges (the benchmarks' CUPTI records are foxc.bench.cupti)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..cli import text_table as table
from ..component import Component

DEFAULT_PROFILE_STEPS = "10:29"  # --profile without --profile-steps: 20 steps after a warm-up


@dataclass(frozen=True)
class StepWindow:
    first: int
    last: int  # inclusive

    def __contains__(self, step: int) -> bool:
        return self.first <= step <= self.last

    def __str__(self) -> str:
        return f"{self.first}:{self.last}"

    def outside(self, first: int, end: int) -> str | None:
        """What of the window a run of steps first..end - 1 misses, None when it covers all of it."""
        if first <= self.first and self.last < end:
            return None
        lo, hi = max(self.first, first), min(self.last, end - 1)
        steps = f"this run's steps are {first}..{end - 1}" if end > first else "this run takes no step"
        if lo > hi:
            return f"{self} lies outside the run ({steps}): no step is profiled"
        return f"{self} lies partly outside the run ({steps}): only steps {lo}..{hi} are profiled"


def parse_window(spec) -> StepWindow:
    """`"A:B"` (or a StepWindow): steps A through B inclusive, 0 <= A <= B; the argparse type of --profile-steps."""
    if isinstance(spec, StepWindow):
        return spec
    text = str(spec).strip()
    if text.count(":") != 1:
        raise argparse.ArgumentTypeError(f"step window '{text}' must be A:B (first and last step, inclusive), "
                                         "e.g. 200:210")
    try:
        first, last = (int(part) for part in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"step window '{text}': a step is not an integer") from None
    if first < 0 or last < 0:
        raise argparse.ArgumentTypeError(f"step window '{text}': steps must be non-negative")
    if first > last:
        raise argparse.ArgumentTypeError(f"step window '{text}': the first step {first} is after the last step {last}")
    return StepWindow(first, last)


def add_profile_args(ap):
    """`--profile-steps A:B` and `--profile` (the trainer's and the learn benchmark's)."""
    ap.add_argument("--profile-steps", type=parse_window, default=None, metavar="A:B",
                    help="call cuProfilerStart before step A and cuProfilerStop after step B (inclusive), so "
                         "`nsys profile --capture-range=cudaProfilerApi` or `ncu --profile-from-start off` "
                         "record only those steps (tools/profile.sh, tools/ncu_kernel.sh)")
    ap.add_argument("--profile", action="store_true",
                    help="launch the steps of the window eagerly with CUDA events around every launch; print a "
                         f"per-kernel table and write OUT/profile.json (window: --profile-steps, else "
                         f"{DEFAULT_PROFILE_STEPS})")


def profile_window(args) -> StepWindow | None:
    """The steps `--profile` times: --profile-steps when given, else the default; None without --profile."""
    return (args.profile_steps or parse_window(DEFAULT_PROFILE_STEPS)) if args.profile else None


class ProfilerWindow:
    """`rt.profiler_start()` before step A, `rt.profiler_stop()` after step B or at `close()` (a run that ended
    inside it), each after a synchronize, so the window holds exactly the GPU work of steps A..B. It opens at
    most once (a resumed run inside it at its first step); `spec=None` never opens."""

    def __init__(self, rt, spec):
        self.rt, self.window = rt, None if spec is None else parse_window(spec)
        self.open = self.done = False

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
            self.open, self.done = False, True


def _nvtx_domain():
    """The `nvtx` package's domain "foxc", or None: no package, NVTX_DISABLE set, or no tool attached (the
    package's dummy domain; it is decided at import, when nsys has injected itself already)."""
    if os.environ.get("NVTX_DISABLE"):
        return None
    try:
        import nvtx
    except ImportError:
        return None
    domain = nvtx.get_domain("foxc")
    return domain if isinstance(domain, nvtx.Domain) else None


_domain = _nvtx_domain()
_NO_RANGE = contextlib.nullcontext()  # shared, so a range in the hot loop costs a call (tests/test_profile.py)
_attributes: dict = {}  # the event attributes of each (name, color), built once


class _Range:
    __slots__ = ("domain", "attributes")

    def __init__(self, domain, name: str, color):
        self.domain = domain
        self.attributes = _attributes.get((name, color))
        if self.attributes is None:
            self.attributes = _attributes[name, color] = domain.get_event_attributes(message=name, color=color)

    def __enter__(self):
        self.domain.push_range(self.attributes)
        return self

    def __exit__(self, *exc):
        self.domain.pop_range()
        return False


def nvtx_range(name: str, color=None):
    """A context manager that brackets its block with an NVTX range `name` (nested ranges nest)."""
    return _NO_RANGE if _domain is None else _Range(_domain, name, color)


PROFILE_FORMAT = "foxc-kernel-profile"
PROFILE_VERSION = 1
COLUMNS = ["kernel", "launches", "total_ms", "mean_us", "share", "host_gap_us"]
LAUNCH_BOUND_RATIO = 0.9  # a host gap above this share of the kernel's time: the GPU likely idled waiting


def launch_bound(row: dict) -> bool:
    return row["host_gap_us"] >= LAUNCH_BOUND_RATIO * row["mean_us"]


class KernelProfiler(Component):
    """`--profile`: per-name launch counts and times of eagerly launched plan lists over a step window.

    An event before the first launch and after each: launch i's GPU time is between events i and i+1; its
    "host gap" the host's time from one launch call to the next. When a row's host gap exceeds its GPU time,
    the GPU waited for the host (graph mode removes that). On the reference backend the times are CPU times.
    An entry needs only `.launch(stream)`: a composite (GradClip, a graph) is one row, named by its `.name`, else
    by its class."""

    def __init__(self, rt, window=None):
        self.rt, self.stream = rt, rt.stream
        self.window = None if window is None else parse_window(window)
        self._events = []
        self._stats: dict[str, list] = {}  # name -> [launches, gpu ms, host ms]
        self.steps = self.launches_per_step = 0
        self.gpu_ms = self.host_ms = 0.0

    def wants(self, step: int) -> bool:
        """Whether `step` is inside the window (always, without one)."""
        return self.window is None or step in self.window

    def launch(self, step: int, plans):
        """Profile the step's plans inside the window, launch them plainly outside it."""
        if self.wants(step):
            self.profile_step(plans)
        else:
            for entry in plans:
                entry.launch(self.stream)

    def profile_step(self, plans):
        """Launch `plans` once in order with events between the launches; waits for them, then adds up."""
        stream = self.stream
        if stream.capture_log is not None:
            raise RuntimeError(f"stream '{stream.name}' is capturing: the kernel profile launches eagerly")
        plans = list(plans)
        while len(self._events) <= len(plans):
            self._events.append(self.rt.event(f"profile_{len(self._events)}"))
        events, clock = self._events[:len(plans) + 1], [time.perf_counter()]
        events[0].record(stream)
        for entry, after in zip(plans, events[1:]):
            entry.launch(stream)
            after.record(stream)
            clock.append(time.perf_counter())
        events[-1].synchronize()
        for i, entry in enumerate(plans):
            gpu, host = events[i].elapsed_ms(events[i + 1]), (clock[i + 1] - clock[i]) * 1e3
            row = self._stats.setdefault(getattr(entry, "name", None) or type(entry).__name__, [0, 0.0, 0.0])
            row[0], row[1], row[2] = row[0] + 1, row[1] + gpu, row[2] + host
            self.gpu_ms += gpu
        self.host_ms += (clock[-1] - clock[0]) * 1e3
        self.steps += 1
        self.launches_per_step = len(plans)

    def rows(self) -> list[dict]:
        """One row per name, the largest total GPU time first; shares sum to 1."""
        total = sum(s[1] for s in self._stats.values())
        return sorted(({"kernel": name, "launches": n, "total_ms": gpu, "mean_us": 1e3 * gpu / n,
                        "share": gpu / total if total > 0 else 0.0, "host_gap_us": 1e3 * host / n}
                       for name, (n, gpu, host) in self._stats.items()), key=lambda r: -r["total_ms"])

    def summary(self) -> dict:
        steps = max(self.steps, 1)
        return {"format": PROFILE_FORMAT, "version": PROFILE_VERSION, "backend": self.rt.backend,
                "device": self.rt.device_name, "window": None if self.window is None else str(self.window),
                "steps": self.steps, "launches_per_step": self.launches_per_step,
                "gpu_ms_per_step": self.gpu_ms / steps, "host_ms_per_step": self.host_ms / steps,
                "time_unit": "GPU (CUDA events)" if self.rt.backend == "cuda" else "CPU (numpy reference)",
                "kernels": self.rows()}

    def table(self) -> str:
        flag = self.rt.backend == "cuda"  # on the reference backend every launch is synchronous
        shown = [{"kernel": r["kernel"], "launches": r["launches"], "total ms": round(r["total_ms"], 3),
                  "mean µs": round(r["mean_us"], 2), "share": f"{100 * r['share']:.1f}%",
                  "host gap µs": round(r["host_gap_us"], 2),
                  "": "host-bound" if flag and launch_bound(r) else ""} for r in self.rows()]
        return table(shown, ["kernel", "launches", "total ms", "mean µs", "share", "host gap µs"] + [""] * flag)

    def report(self, out_dir, file=None) -> Path:
        """Print the table and a per-step line, write `out_dir/profile.json`; returns its path."""
        file, s = file or sys.stdout, self.summary()
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        path = Path(out_dir) / "profile.json"
        path.write_text(json.dumps(s, indent=1) + "\n")
        print(f"kernel profile: {s['steps']} step(s) ({s['window'] or 'all'}), {s['launches_per_step']} "
              f"launches a step, {s['time_unit']} times", file=file)
        print(self.table(), file=file)
        print(f"per step: {s['gpu_ms_per_step']:.3f} ms from the first event to the last, "
              f"{s['host_ms_per_step']:.3f} ms issuing on the host; written {path}", file=file)
        if self.rt.backend == "cuda" and any(launch_bound(r) for r in s["kernels"]):
            print("host-bound rows: the host took about as long to issue the next launch as the kernel ran, "
                  "so their times include the GPU waiting (graph mode removes that wait)", file=file)
        return path

    def buffers(self) -> list:
        return self._events


__all__ = ["DEFAULT_PROFILE_STEPS", "KernelProfiler", "ProfilerWindow", "StepWindow", "add_profile_args",
           "nvtx_range", "parse_window", "profile_window"]
