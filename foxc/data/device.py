"""The device dataset: records and labels uploaded once, and the window gather at each backtest's cursor.

    ds = DeviceDataset(rt, data, labels, n_backtests=1024, seq_len=32, seed=7, max_episode_steps=2000)
    ds.gather(stream)   # features [K, B, F] (time-major) and labels_out [planes, B, H] at each cursor
    ds.advance(stream)  # the cursors move on, or start new episodes (foxc.data.cursors)

The cursors are a `Cursors` it owns (history K − 1), or another component's int64 [B] array it only reads (`cursor=`).
Every buffer and plan is made here, so a step's launches can be captured. With `budget_bytes` smaller than the data
the device holds a rotating set of its segments (`rotation`, foxc.data.resident)."""
from __future__ import annotations

import numpy as np

from ..component import Component
from . import gather
from .cursors import Cursors, episode_rows, no_episode_start
from .features import FEATURES, GATHER_BLOCK, GATHER_MAX_K, HORIZONS, LABEL_PLANES
from .record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE
from .resident import ShardRotation, copy_staged, resident_slots, staging_pair
from .market import MarketData


def _reader(data: MarketData, labels: np.ndarray):
    """read(segment, records, labels) for rows held in memory (what CacheRows.read does from disk)."""
    first, end = data.segment_bounds()

    def read(k: int, records: np.ndarray, planes: np.ndarray):
        a, b = int(first[k]), int(end[k])
        records.view(np.uint8)[:(b - a) * SNAPSHOT_BYTES] = data.records[a:b].view(np.uint8).reshape(-1)
        planes[:, :, :b - a] = labels[:, :, a:b]
    return read


class DeviceDataset(Component):
    def __init__(self, rt, data: MarketData, labels: np.ndarray | None, n_backtests: int, seq_len: int,
                 seed: int = 0, max_episode_steps: int = 0, *, cursor=None, budget_bytes: int | None = None,
                 rotate_every: int = 0, unit: int | None = None):
        """`data`: MarketData with `labels` its label planes, or rows left on disk with labels None (a
        foxc.data.cache.CacheRows: each segment is read, verified, when it is uploaded, so the host never
        holds more than one); its records must number their segments from 0; `seed` and
        `max_episode_steps` are the owned cursors' (unused with `cursor`); `budget_bytes`: device memory
        for the records and labels (None: no limit), `rotate_every`: steps between refills when they do
        not fit (foxc.data.resident; a ResidencyError when not even two slots do); `unit`: the price unit the
        features count prices and spreads in (the agent's, foxc.data.market.spread_unit_ticks; default the tick)."""
        n = data.n_rows
        if not 1 <= seq_len <= GATHER_MAX_K:
            raise ValueError(f"seq_len K must be in 1..{GATHER_MAX_K}, got {seq_len}")
        if not 1 <= n < 2**31:
            raise ValueError(f"the records must number 1 to 2^31 - 1, got {n}")
        if labels is not None and (labels.shape != (LABEL_PLANES, HORIZONS, n) or labels.dtype != np.float32):
            raise ValueError(f"labels must be float32 {(LABEL_PLANES, HORIZONS, n)}, got {labels.dtype} {labels.shape}")
        if cursor is not None and (cursor.dtype != np.int64 or cursor.shape != (n_backtests,)):
            raise ValueError(f"cursor must be an int64 [{n_backtests}] device array, got {cursor.dtype} {cursor.shape}")
        self.rt, self.B, self.K = rt, int(n_backtests), int(seq_len)
        self.tick = int(data.tick if unit is None else unit)  # the gather's unit of price
        # the cursor whose window `features` holds, per backtest (gather_windows moves a window that slid by one)
        self.held = rt.device_array(self.B, np.int64, "held")
        self.forget()
        first, end = data.segment_bounds()
        read = data.read if labels is None else _reader(data, labels)
        slots, usable = 0, np.ones(len(first), bool)
        if budget_bytes is not None:
            if cursor is not None:
                raise ValueError("a dataset that gathers at another component's cursors cannot rotate its data")
            usable = end - first >= episode_rows(self.K - 1)  # a shard too short for an episode start is never drawn
            if not usable.any():
                raise ValueError(no_episode_start(self.K - 1))
            slots = resident_slots(end - first, budget_bytes)
        self.rotation = None
        if slots:
            segments, first, end = np.flatnonzero(usable), first[usable], end[usable]
            P = int((end - first).max())
            n = slots * P
            if n >= 2**31:
                raise ValueError(f"{slots} slots of {P:,} snapshots exceed the 2^31 - 1 rows the gather indexes")
            self.records = rt.device_array(n, SNAPSHOT_DTYPE, "records")
            self.labels = rt.device_array((LABEL_PLANES, HORIZONS, n), np.float32, "labels")
            self.segment_first = rt.device_array(slots, np.int64, "segment_first")
            self.segment_first.upload(np.arange(slots, dtype=np.int64) * P)  # a slot's records carry its index
            self.cursors = Cursors(rt, None, self.B, history=self.K - 1, episode_len=max_episode_steps, seed=seed,
                                   bounds=(np.zeros(1, np.int64), np.full(1, P - 1)), capacity=slots)
            self.rotation = ShardRotation(rt, (segments, first, end), read, self.records, self.labels,
                                          self.cursors, slots, P, rotate_every, seed, self.forget)
            self.cursors.reset(seed)  # the first draws in the resident slots
        else:
            self.records = rt.device_array(n, SNAPSHOT_DTYPE, "records")
            self.labels = rt.device_array((LABEL_PLANES, HORIZONS, n), np.float32, "labels")
            self.segment_first = rt.device_array(len(first), np.int64, "segment_first")
            if labels is None:
                self._upload_segments(read, first, end)
            else:
                self.records.upload(data.records)
                self.labels.upload(labels)
            self.segment_first.upload(first)
            segment = data.records["segment"] if labels is not None else None  # on disk: segments are its shards
            self.cursors = None if cursor is not None else Cursors(
                rt, segment, self.B, history=self.K - 1, episode_len=max_episode_steps, seed=seed,
                bounds=None if segment is not None else (first, end - 1))
        self.cursor = cursor if cursor is not None else self.cursors.cursor
        self.n_records = n
        self.features = rt.device_array((self.K, self.B, FEATURES), np.float32, "features")
        self.labels_out = rt.device_array((LABEL_PLANES, self.B, HORIZONS), np.float32, "labels_out")
        self.gather_plan = rt.plan(
            gather.GATHER_WINDOWS, self.B, GATHER_BLOCK,
            dict(records=self.records, labels=self.labels, segment_first=self.segment_first, cursor=self.cursor,
                 held=self.held, features=self.features, labels_out=self.labels_out, n_records=n, B=self.B, K=self.K,
                 tick=self.tick),
            shared_bytes=gather.shared_bytes(self.K))

    def _upload_segments(self, read, first, end):
        """Every segment's rows through one staging pair, a segment at a time."""
        staging = staging_pair(self.rt, int((end - first).max()), "dataset.staging")
        try:
            for k, (a, b) in enumerate(zip(first, end)):
                read(k, staging[0].host, staging[1].host)
                copy_staged(self.rt, staging, self.records, self.labels, int(a), int(b - a), self.rt.stream)
                self.rt.stream.synchronize("uploading the data a segment at a time")
        finally:
            for a in staging:
                a.close()

    def forget(self, stream=None):
        """No window held: the next gather reads every snapshot of its windows (rows were rewritten)."""
        self.held.upload(np.full(self.B, -1, np.int64), stream)

    def _owned(self) -> Cursors:
        if self.cursors is None:
            raise RuntimeError("this dataset gathers at another component's cursors: advance or reset them there")
        return self.cursors

    def reset(self, seed: int):
        """New episodes for every backtest, drawn from `seed` (foxc.data.cursors.Cursors.reset)."""
        self._owned().reset(seed)

    def gather(self, stream=None):
        self.gather_plan.launch(stream or self.rt.stream)

    def advance(self, stream=None):
        self._owned().advance(stream)

    @property
    def plans(self):
        return [self.gather_plan] + ([self.cursors.advance_plan] if self.cursors is not None else [])

    def buffers(self):  # the rotation first: its side stream may still be copying into the records
        own = self.cursors.buffers() if self.cursors is not None else []
        rotation = [self.rotation] if self.rotation is not None else []
        return [*rotation, self.records, self.labels, self.segment_first, *own, self.features, self.labels_out,
                self.held]
