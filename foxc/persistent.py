"""What a component carries from one step to the next, declared where it is allocated.

    keep = self.persistent = Persistent()
    self.cursor = keep("cursor", rt.device_array(B, np.int64, "cursors.cursor"))

The checkpoint (foxc.trainer.state) saves and restores every component's `persistent` arrays by
name; scratch that every step rewrites is allocated plainly and never saved."""
from __future__ import annotations


class Persistent:
    def __init__(self):
        self.arrays: dict = {}

    def __call__(self, name: str, array):
        if name in self.arrays:
            raise ValueError(f"persistent array '{name}' declared twice")
        self.arrays[name] = array
        return array
