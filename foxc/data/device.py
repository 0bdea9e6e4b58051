"""The device dataset: records and labels uploaded once, per-backtest cursors, and the gather plans.

    ds = DeviceDataset(rt, data, labels, n_backtests=1024, window=32, seed=7)
    ds.gather(stream)   # features [K, B, F] (time-major) and labels_out [planes, B, H] at each cursor
    ...                 # the simulator reads records[cursors[b]] and flattens where last[b]
    ds.advance(stream)  # cursor += 1, or done = 1 after an episode's last snapshot

Every buffer is allocated here and every launch plan built here, so a step's launches can be
captured into a CUDA graph: nothing in gather/advance reads the host or allocates.
A cursor is drawn from `valid_cursors`: the snapshots with K − 1 earlier snapshots in their
segment and at least one after it, so a window never crosses a segment and every episode has
a step.
"""
from __future__ import annotations

import numpy as np

from ..persistent import Persistent
from ..rng import seed_states
from . import gather
from .features import FEATURES, GATHER_BLOCK, GATHER_MAX_K, HORIZONS, LABEL_PLANES
from .record import SNAPSHOT_DTYPE
from .source import MarketData


def valid_cursors(data: MarketData, window: int) -> np.ndarray:
    starts, ends = data.segment_bounds()
    seg = data.records["segment"].astype(np.int64)
    idx = np.arange(len(data.records), dtype=np.int64)
    ok = (idx - starts[seg] >= window - 1) & (idx + 1 < ends[seg])
    return np.flatnonzero(ok).astype(np.int32)


class DeviceDataset:
    def __init__(self, rt, data: MarketData, labels: np.ndarray, n_backtests: int, window: int, seed: int = 0,
                 max_episode_steps: int = 0):
        n = len(data.records)
        if not 1 <= window <= GATHER_MAX_K:
            raise ValueError(f"window K must be in 1..{GATHER_MAX_K}, got {window}")
        if n >= 2**31:
            raise ValueError(f"{n} records exceed the int32 cursor range")
        if labels.shape != (LABEL_PLANES, HORIZONS, n) or labels.dtype != np.float32:
            raise ValueError(f"labels must be float32 {(LABEL_PLANES, HORIZONS, n)}, got {labels.dtype} {labels.shape}")
        cursors_ok = valid_cursors(data, window)
        if len(cursors_ok) == 0:
            raise ValueError(f"no segment holds a window of {window} snapshots plus one step")
        self.rt, self.B, self.K, self.tick = rt, int(n_backtests), int(window), int(data.tick)
        self.n_records, self.n_valid = n, len(cursors_ok)
        _, ends = data.segment_bounds()
        self.records = rt.device_array(n, SNAPSHOT_DTYPE, "records")
        self.labels = rt.device_array(labels.shape, np.float32, "labels")
        self.segment_end = rt.device_array(len(ends), np.int32, "segment_end")
        self.valid_cursors = rt.device_array(len(cursors_ok), np.int32, "valid_cursors")
        keep = self.persistent = Persistent()
        self.cursors = keep("cursors", rt.device_array(self.B, np.int32, "cursors"))
        self.episode_steps = keep("episode_steps", rt.device_array(self.B, np.int32, "episode_steps"))
        self.done = keep("done", rt.device_array(self.B, np.int32, "done"))
        self.last = keep("last", rt.device_array(self.B, np.int32, "last"))
        self.rng = keep("rng", rt.device_array(self.B, np.uint32, "cursor_rng"))
        self.features = rt.device_array((self.K, self.B, FEATURES), np.float32, "features")
        self.labels_out = rt.device_array((LABEL_PLANES, self.B, HORIZONS), np.float32, "labels_out")
        self.records.upload(data.records)
        self.labels.upload(labels)
        self.segment_end.upload(ends.astype(np.int32))
        self.valid_cursors.upload(cursors_ok)
        self.reset(seed)
        self.gather_plan = rt.plan(
            gather.SAMPLE_AND_GATHER, self.B, GATHER_BLOCK,
            (self.records, self.labels, self.segment_end, self.valid_cursors, self.cursors, self.episode_steps,
             self.done, self.last, self.rng, self.features, self.labels_out,
             n, self.n_valid, self.B, self.K, self.tick, int(max_episode_steps)),
            shared_bytes=gather.shared_bytes(self.K))
        self.advance_plan = rt.plan(gather.ADVANCE_CURSORS, gather.advance_grid(self.B), gather.ADVANCE_BLOCK,
                                    (self.cursors, self.episode_steps, self.last, self.done, self.B))

    def reset(self, seed: int):
        """Every backtest unset (cursor −1): the next gather draws all cursors from the seeded states."""
        self.cursors.upload(np.full(self.B, -1, np.int32))
        for a in (self.episode_steps, self.done, self.last):
            a.upload(np.zeros(self.B, np.int32))
        self.rng.upload(seed_states(seed, self.B, "data"))

    def gather(self, stream=None):
        self.gather_plan.launch(stream or self.rt.stream)

    def advance(self, stream=None):
        self.advance_plan.launch(stream or self.rt.stream)

    @property
    def plans(self):
        return [self.gather_plan, self.advance_plan]

    def buffers(self):
        return [self.records, self.labels, self.segment_end, self.valid_cursors, self.cursors, self.episode_steps,
                self.done, self.last, self.rng, self.features, self.labels_out]

    def close(self):
        for a in self.buffers():
            a.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
