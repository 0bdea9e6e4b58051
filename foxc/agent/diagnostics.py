"""The per-step diagnostics frame: written by a kernel into a mapped-pinned ring, read by the host
without synchronising the step (cuda/agent/diagnostics.cu)."""
from __future__ import annotations

import time

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import STEP_WRAP, slot_index
from .layout import FRAME_FIELDS, FRAME_INDEX, FRAME_ISV, FRAME_LEN, LOSS_NAMES, N_FRAME_EXTRAS, N_STATS

AGENT_DIAGNOSTICS_FRAME = KernelSpec("agent_diagnostics_frame", "agent/diagnostics", (
    ptr("stats"), ptr("losses"), ptr("isv"), ptr("extras"), ptr("isv_slots"), i32("n_isv"), ptr("ring"),
    i32("ring_len")))


@reference(AGENT_DIAGNOSTICS_FRAME)
def _agent_diagnostics_frame(launch, stats, losses, isv, extras, isv_slots, n_isv, ring, ring_len):
    v = isv.f32()
    step = float(v[slot_index("step_hi")]) * STEP_WRAP + float(v[slot_index("step_lo")])
    frame = ring.f64(int(ring_len) * FRAME_LEN).reshape(int(ring_len), FRAME_LEN)[int(step % int(ring_len))]
    frame[FRAME_INDEX["step"]] = step
    frame[2:2 + N_STATS] = stats.f64(N_STATS)
    at = FRAME_INDEX[LOSS_NAMES[0]]
    frame[at:at + len(LOSS_NAMES)] = losses.f32(len(LOSS_NAMES))
    at = FRAME_INDEX[FRAME_ISV[0]]
    frame[at:at + int(n_isv)] = v[isv_slots.i32(int(n_isv))]
    at = FRAME_INDEX["extra0"]
    frame[at:at + N_FRAME_EXTRAS] = extras.f64(N_FRAME_EXTRAS)
    frame[FRAME_INDEX["t_ns"]] = float(time.monotonic_ns())  # this backend's device clock is the host's
    frame[FRAME_INDEX["seq"]] = step + 1.0


class DiagnosticsRing:
    """Owns the ring and the frame kernel's plan; `poll()` returns the frames completed since the last call.

    `poll` never waits for the device: a frame counts once its sequence number (written last,
    after a system-wide fence) reads step + 1. A writer that launches no step more than
    `lead_limit` steps past `next_step` (the trainer's back-pressure) can never lap the reader;
    frames overwritten before the host got to them would be counted in `dropped`.
    """

    def __init__(self, rt, isv, stats, losses, ring_len: int = 1024, extras=None):
        self.ring = rt.mapped_array((ring_len, FRAME_LEN), np.float64, "diagnostics")
        self.ring.host[:] = 0.0
        self.extras = extras if extras is not None else rt.mapped_array(N_FRAME_EXTRAS, np.float64, "diag_extras")
        if extras is None:
            self.extras.host[:] = 0.0
        self._slots = rt.device_array(len(FRAME_ISV), np.int32, "diag_isv_slots")
        self._slots.upload(np.array([slot_index(n) for n in FRAME_ISV], np.int32))
        self.plan = rt.plan(AGENT_DIAGNOSTICS_FRAME, 1, 1,
                            (stats, losses, isv, self.extras, self._slots, len(FRAME_ISV), self.ring, ring_len))
        self.ring_len = ring_len
        self.lead_limit = ring_len // 2  # steps the host may launch past the next unread frame
        self.next_step = 0
        self.dropped = 0

    def launch(self, stream):
        self.plan.launch(stream)

    def start_at(self, step: int):
        """The first step whose frame `poll` should expect (after a resume)."""
        self.next_step = step

    def poll(self) -> list[dict]:
        frames = []
        host = self.ring.host
        while True:
            frame = host[self.next_step % self.ring_len]
            seq = frame[0]
            if seq < self.next_step + 1:
                break  # not written yet
            if seq > self.next_step + 1:  # the device lapped the host: this step's frame is gone
                self.dropped += 1
                self.next_step += 1
                continue
            copy = frame.copy()
            if copy[0] != seq:  # overwritten while copying
                self.dropped += 1
            else:
                frames.append(dict(zip(FRAME_FIELDS, copy.tolist())))
            self.next_step += 1
        return frames
