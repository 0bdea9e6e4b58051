"""The per-step diagnostics frame: written into a mapped-pinned ring by the step's last kernel
(agent_step_end, cuda/agent/step_end.cu), read by the host without synchronising the step."""
from __future__ import annotations

import time

import numpy as np

from ..isv.registry import STEP_WRAP, slot_index
from .layout import FRAME_FIELDS, FRAME_INDEX, FRAME_ISV, FRAME_LEN, LOSS_NAMES, N_FRAME_EXTRAS, N_STATS


def write_frame(ring: np.ndarray, stats, losses, v, extras, isv_slots):
    """The frame of the step the ISV values v name into ring [ring_len, FRAME_LEN] (agent_step_end's)."""
    step = float(v[slot_index("step_hi")]) * STEP_WRAP + float(v[slot_index("step_lo")])
    frame = ring[int(step % len(ring))]
    frame[FRAME_INDEX["step"]] = step
    frame[2:2 + N_STATS] = stats
    at = FRAME_INDEX[LOSS_NAMES[0]]
    frame[at:at + len(LOSS_NAMES)] = losses
    at = FRAME_INDEX[FRAME_ISV[0]]
    frame[at:at + len(isv_slots)] = v[isv_slots]
    at = FRAME_INDEX["extra0"]
    frame[at:at + N_FRAME_EXTRAS] = extras
    frame[FRAME_INDEX["t_ns"]] = float(time.monotonic_ns())  # this backend's device clock is the host's
    frame[FRAME_INDEX["seq"]] = step + 1.0


class DiagnosticsRing:
    """Owns the ring, its extras and the table of the ISV slots a frame records; `frame_args` are what the
    step's last kernel writes the frame with; `poll()` returns the frames completed since the last call.

    `poll` never waits for the device: a frame counts once its sequence number (written last,
    after a system-wide fence) reads step + 1. A writer that launches no step more than
    `lead_limit` steps past `next_step` (the trainer's back-pressure) can never lap the reader;
    frames overwritten before the host got to them would be counted in `dropped`.
    """

    def __init__(self, rt, ring_len: int = 1024, extras=None):
        self.ring = rt.mapped_array((ring_len, FRAME_LEN), np.float64, "diagnostics")
        self.ring.host[:] = 0.0
        self.extras = extras if extras is not None else rt.mapped_array(N_FRAME_EXTRAS, np.float64, "diag_extras")
        if extras is None:
            self.extras.host[:] = 0.0
        self._slots = rt.device_array(len(FRAME_ISV), np.int32, "diag_isv_slots")
        self._slots.upload(np.array([slot_index(n) for n in FRAME_ISV], np.int32))
        self.frame_args = dict(extras=self.extras, isv_slots=self._slots, n_isv=len(FRAME_ISV), ring=self.ring,
                               ring_len=ring_len)  # agent_step_end's, by name
        self.ring_len = ring_len
        self.lead_limit = ring_len // 2  # steps the host may launch past the next unread frame
        self.next_step = 0
        self.dropped = 0

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
