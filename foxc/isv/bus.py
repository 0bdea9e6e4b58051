"""The ISV bus in mapped-pinned memory: kernels address it, the host reads it with no copy.

Kernels reach mapped-pinned memory over PCIe, uncached: for a step of many kernels that read the ISV in every
block, `device_resident=True` keeps the working copy in device memory (`ptr`), which the step's last kernel
(agent_step_end) copies into the mapped view the host reads (`array`); host writes wait for the stream and upload.
"""
from __future__ import annotations

import numpy as np

from .. import vec
from ..numbers import finite
from .registry import N_SLOTS, SLOTS, STEP_WRAP, slot_index


class IsvBus:
    def __init__(self, rt, name: str = "isv", device_resident: bool = False):
        self.rt = rt
        self.array = rt.mapped_array((N_SLOTS,), np.float32, name)
        self.device = rt.device_array((N_SLOTS,), np.float32, f"{name}_device") if device_resident else None
        self.closed = False
        self.reset()

    @property
    def ptr(self):
        """What kernels read and write: the device copy when resident, else the mapped memory."""
        return (self.device if self.device is not None else self.array).ptr

    @property
    def values(self) -> np.ndarray:
        """The slots as the host sees them (live mapped memory; with a device copy, as of the last publish).
        Synchronize before reading device writes; write through `bus[name] = v` or `load`."""
        assert not self.closed, f"ISV bus '{self.array.name}' is closed"  # its memory is freed
        return self.array.host

    def load(self, values):
        """Set every slot (the stream is synchronized first when a device copy is in use)."""
        values = np.asarray(values, np.float32)
        assert values.shape == (N_SLOTS,), f"the ISV holds {N_SLOTS} slots, got {values.shape}"
        if self.device is not None:
            self.rt.stream.synchronize()
        self.values[:] = values
        if self.device is not None:
            self.device.upload(values)

    def set_on_stream(self, name: str, value: float, stream):
        """Set one slot in stream order, without waiting: the steps queued before see the old value, every later
        one the new (a device-resident bus; the host view follows at the next publish)."""
        assert self.device is not None, "set_on_stream needs an IsvBus made with device_resident=True"
        vec.plan_elementwise(self.rt, vec.FILL_F32, self.device.at(slot_index(name)), float(value), 1).launch(stream)

    def reset(self):
        """Every slot to its bootstrap value."""
        self.load([s.bootstrap for s in SLOTS])

    def __getitem__(self, name: str) -> float:
        return float(self.values[slot_index(name)])

    def __setitem__(self, name: str, value: float):
        index = slot_index(name)  # an unknown name first
        assert finite(value), f"ISV slot '{name}' must be a finite number, got {value!r}"  # NaN: every reader NaN
        values = self.values.copy()
        values[index] = value
        self.load(values)

    @property
    def step(self) -> int:
        return int(self["step_hi"]) * STEP_WRAP + int(self["step_lo"])

    def as_dict(self) -> dict[str, float]:
        return {s.name: float(self.values[s.index]) for s in SLOTS}

    def close(self):
        self.closed = True
        self.array.close()
        if self.device is not None:
            self.device.close()
