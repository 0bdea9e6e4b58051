"""The ISV bus in mapped-pinned memory: kernels address it, the host reads it with no copy."""
from __future__ import annotations

import numpy as np

from .registry import N_SLOTS, SLOTS, STEP_WRAP, slot_index


class IsvBus:
    def __init__(self, rt, name: str = "isv"):
        self.array = rt.mapped_array((N_SLOTS,), np.float32, name)
        self.reset()

    @property
    def ptr(self):
        return self.array.ptr

    @property
    def values(self) -> np.ndarray:
        """The live slots (host view of mapped-pinned memory; synchronize before reading device writes)."""
        return self.array.host

    def reset(self):
        """Every slot to its bootstrap value."""
        self.array.host[:] = np.array([s.bootstrap for s in SLOTS], np.float32)

    def __getitem__(self, name: str) -> float:
        return float(self.array.host[slot_index(name)])

    def __setitem__(self, name: str, value: float):
        self.array.host[slot_index(name)] = value

    @property
    def step(self) -> int:
        return int(self["step_hi"]) * STEP_WRAP + int(self["step_lo"])

    def as_dict(self) -> dict[str, float]:
        return {s.name: float(self.array.host[s.index]) for s in SLOTS}

    def close(self):
        self.array.close()
