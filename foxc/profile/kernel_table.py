"""`--profile`: a per-kernel time table from CUDA events around every launch (the summary nsys gives).

`KernelProfiler(rt, window)` launches a step's plan list eagerly with an event recorded
before the first launch and after each one, so launch i's GPU time is the interval
between events i and i+1. It also times, on the host, each launch call (with the event
record after it): the "host gap", how long the host took before it could issue the next
launch. Both are summed per name over the steps of the window, then `report(out)` prints
the table and writes `out/profile.json`.

Reading it: when a row's host gap is larger than its mean GPU time, the GPU waited for
the host, and the event interval includes that wait (the step is launch-bound there:
graph mode removes it). On the reference backend events are host timestamps and launches
run the numpy references at once, so the same table gives CPU times.

Entries of the plan list need only `.launch(stream)`: composite entries (GradClip, a
split matmul, a captured graph) are timed as one row named by their `.name`, else by
their class name.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..component import Component
from .window import parse_window
from ..cli import text_table as table

PROFILE_FORMAT = "foxc-kernel-profile"
PROFILE_VERSION = 1
COLUMNS = ["kernel", "launches", "total_ms", "mean_us", "share", "host_gap_us"]
LAUNCH_BOUND_RATIO = 0.9


def launch_bound(row: dict) -> bool:
    """The host's gap is close to or above the kernel's time: the GPU likely idled waiting for it."""
    return row["host_gap_us"] >= LAUNCH_BOUND_RATIO * row["mean_us"]


class KernelProfiler(Component):
    """Per-name launch counts and GPU/host times of eagerly launched plan lists over a step window."""

    def __init__(self, rt, window=None):
        self.rt = rt
        self.window = None if window is None else parse_window(window)
        self.stream = rt.stream
        self._events = []
        self._stats: dict[str, list] = {}  # name -> [launches, gpu ms, host ms]
        self.steps = 0
        self.gpu_ms = 0.0
        self.host_ms = 0.0
        self.launches_per_step = 0

    def wants(self, step: int) -> bool:
        """True when `step` is inside the window (always, without one)."""
        return self.window is None or step in self.window

    def launch(self, step: int, plans):
        """The trainer's hook: profile the step's plans inside the window, launch them plainly outside it."""
        if self.wants(step):
            self.profile_step(plans)
        else:
            for entry in plans:
                entry.launch(self.stream)

    def profile_step(self, plans):
        """Launch `plans` once in order with events between the launches; waits for them, then adds up."""
        stream = self.stream
        if stream.capture_log is not None:
            raise RuntimeError(f"stream '{stream.name}' is capturing a graph: the kernel profile launches eagerly")
        plans = list(plans)
        while len(self._events) <= len(plans):
            self._events.append(self.rt.event(f"profile_{len(self._events)}"))
        events = self._events[:len(plans) + 1]
        host = [0.0] * len(plans)
        clock = time.perf_counter
        before = clock()
        events[0].record(stream)
        for i, entry in enumerate(plans):
            entry.launch(stream)
            events[i + 1].record(stream)
            now = clock()
            host[i] = (now - before) * 1e3
            before = now
        events[-1].synchronize()
        for i, entry in enumerate(plans):
            gpu = events[i].elapsed_ms(events[i + 1])
            name = getattr(entry, "name", None) or type(entry).__name__
            row = self._stats.setdefault(name, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += gpu
            row[2] += host[i]
            self.gpu_ms += gpu
        self.host_ms += sum(host)
        self.steps += 1
        self.launches_per_step = len(plans)

    def rows(self) -> list[dict]:
        """One row per name, the largest total GPU time first; shares sum to 1."""
        total = sum(s[1] for s in self._stats.values())
        rows = [{"kernel": name, "launches": n, "total_ms": gpu, "mean_us": 1e3 * gpu / n,
                 "share": gpu / total if total > 0 else 0.0, "host_gap_us": 1e3 * host / n}
                for name, (n, gpu, host) in self._stats.items()]
        rows.sort(key=lambda r: -r["total_ms"])
        return rows

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
        file = file or sys.stdout
        s = self.summary()
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
