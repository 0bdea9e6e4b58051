"""What every component of a run shares.

`Component`: the arrays (or other components) it owns, listed by `buffers()`, are released by
`close()` or at the end of a `with` block. `Persistent`: what it carries from one step to the next,
declared where it is allocated:

    keep = self.persistent = Persistent()
    self.cursor = keep("cursor", rt.device_array(B, np.int64, "cursors.cursor"))

The checkpoint (foxc.trainer.state) saves and restores every component's `persistent` arrays by
name; scratch that every step rewrites is allocated plainly and never saved."""
from __future__ import annotations


class Component:
    def buffers(self) -> list:
        """What this component owns and releases: device arrays, or components of its own."""
        return []

    def close(self):
        for part in self.buffers():
            part.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Persistent:
    def __init__(self):
        self.arrays: dict = {}

    def __call__(self, name: str, array):
        if name in self.arrays:
            raise ValueError(f"persistent array '{name}' declared twice")
        self.arrays[name] = array
        return array
