"""ISV kernels: the device-resident step counter."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, ptr, reference
from .registry import STEP_WRAP, slot_index

ISV_STEP_INCREMENT = KernelSpec(
    "isv_step_increment", "isv/step_counter", (ptr("isv"),),
    doc="step_lo += 1, carrying into step_hi at 2^24; grid 1, block 1")


@reference(ISV_STEP_INCREMENT)
def _isv_step_increment(launch, isv):
    slots = isv.f32()
    lo, hi = slot_index("step_lo"), slot_index("step_hi")
    nxt = slots[lo] + np.float32(1.0)
    if nxt >= np.float32(STEP_WRAP):
        slots[lo] = np.float32(0.0)
        slots[hi] += np.float32(1.0)
    else:
        slots[lo] = nxt


def plan_step_increment(rt, bus):
    return rt.plan(ISV_STEP_INCREMENT, 1, 1, (bus,))
