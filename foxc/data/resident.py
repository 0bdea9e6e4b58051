"""A rotating resident set: training on more segments (day-shards) than the device budget holds.

    slots = resident_slots(shard_rows, budget_bytes)   # 0: everything fits (the plain layout)
    rotation = ShardRotation(rt, shards, read, records, label_planes, cursors, slots, slot_rows, every=1000, seed=7,
                             rewritten=dataset.forget)
    rotation.before_step(step); <the step's launches>; rotation.after_step()

The device holds `slots` slots of the largest shard's rows; slot s's records carry `segment` = s, so the gather's
`segment_first[s]` = s·slot_rows and nothing past its shard is read; cursors draw only in drawable slots. Every
`every` steps the slot loaded longest ago is refilled with the next shard of a seeded cyclic order, never while a
backtest can read it: (1) at the boundary the refill begun one rotation ago is fenced and its slot drawable again;
(2) the slot to refill leaves the draw table and its backtests exit flat (cursor_evict); (3) after that step, the
side stream waits for it and copies the shard from pinned staging (two buffers: a host thread fills one with the
next rotation's shard while the other's copy runs). All of it is a function of the step count, so a run and its
resume (the slot table, count and pending refill are checkpointed) have the same bits; the captured step reads only
device tables at fixed addresses. On the reference backend the side stream's copies run at once, in order."""
from __future__ import annotations

import threading

import numpy as np

from ..errors import UserError
from ..component import Component, Persistent
from ..rng import generator
from .features import HORIZONS, LABEL_PLANES
from .record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE

LABEL_BYTES = LABEL_PLANES * HORIZONS * 4
ROW_BYTES = SNAPSHOT_BYTES + LABEL_BYTES  # one snapshot on the device: its record and its label planes
MIN_SLOTS = 2  # one slot drawable while another is refilled


class ResidencyError(UserError):
    """The device budget cannot hold even the smallest rotating set."""


def gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.3g} GB"


def resident_slots(shard_rows, budget_bytes: int) -> int:
    """Slots of the largest shard's size that the budget holds; 0 when every shard fits as it is."""
    rows = np.asarray(shard_rows, np.int64)
    total = int(rows.sum()) * ROW_BYTES
    if total <= budget_bytes:
        return 0
    slot = int(rows.max()) * ROW_BYTES
    slots = int(budget_bytes // slot)
    if slots < MIN_SLOTS:
        raise ResidencyError(
            f"the training data ({int(rows.sum()):,} snapshots in {rows.size} shard(s), {gb(total)} on the device) "
            f"does not fit in {gb(budget_bytes)}, and rotating shards needs at least {MIN_SLOTS} slots of the largest "
            f"shard ({int(rows.max()):,} snapshots, {gb(slot)} each, {gb(MIN_SLOTS * slot)} in all)")
    return slots


def copy_staged(rt, staging, records, labels, row0: int, n: int, stream):
    """n rows of a staging pair (mapped records [P], labels [planes, horizons, P]) into rows row0.. of the
    device `records` and of each label plane of `labels` ([planes, horizons, rows]), on `stream`."""
    staged_records, staged_labels = staging
    P, width = staged_records.shape[0], labels.shape[-1]
    rt.copy_dtod(records.at(row0), staged_records.ptr, n * SNAPSHOT_BYTES, stream)
    for plane in range(LABEL_PLANES * HORIZONS):
        rt.copy_dtod(labels.at(plane * width + row0), staged_labels.at(plane * P), n * 4, stream)


def staging_pair(rt, rows: int, name: str):
    """Mapped host buffers for `rows` rows of records and of label planes, as copy_staged reads them."""
    return (rt.mapped_array(rows, SNAPSHOT_DTYPE, f"{name}_records"),
            rt.mapped_array((LABEL_PLANES, HORIZONS, rows), np.float32, f"{name}_labels"))


class ShardRotation(Component):
    def __init__(self, rt, shards: tuple[np.ndarray, np.ndarray, np.ndarray], read, records, labels, cursors,
                 slots: int, slot_rows: int, every: int, seed: int, rewritten):
        """`shards`: (segment, first, end) of each shard that holds an episode start, its rows in the data
        first..end-1; `read(segment, records, labels)`: a segment's rows into records[:n] and labels[:, :, :n]
        (host arrays: the staging buffers); `records`, `labels`: the device arrays of `slots` × `slot_rows`
        rows (labels [planes, horizons, rows]); `cursors`: the foxc.data.cursors.Cursors that draw in them;
        `every`: steps between rotations (0: never); `rewritten(stream)`: called, in the stream's order, once slots
        were refilled (the gather's held windows are forgotten)."""
        segment, first, end = (np.asarray(a, np.int64) for a in shards)
        self.rt, self.cursors, self.every, self.read, self.rewritten = rt, cursors, int(every), read, rewritten
        self.segment, self.first, self.rows = segment, first, end - first
        self.records, self.labels = records, labels
        self.S, self.P, self.n = int(slots), int(slot_rows), int(first.size)
        # the cyclic order every shard is visited in; with no more shards than slots all stay resident
        self.order = generator(seed, "rotation").permutation(self.n).astype(np.int64)
        self.rotating = self.every > 0 and self.n > self.S
        keep = self.persistent = Persistent()
        # slot -> shard, then the rotations done, then the slot being refilled (-1: none)
        self.state = keep("slots", rt.device_array(self.S + 2, np.int64, "resident.slots"))
        self.slot_shard = np.full(self.S, -2, np.int64)  # nothing loaded yet
        self.rotations, self.pending = 0, -1
        self.side = rt.side_stream("data_refill")
        self.staging = [staging_pair(rt, self.P, f"resident.staging{i}") for i in range(2)]
        self.copied = [rt.event(f"resident.copied{i}") for i in range(2)]  # each staging buffer's last copy
        self.stepped = rt.event("resident.stepped")
        self._prefetch: tuple[int, threading.Thread, list] | None = None  # (rotation, filler, its error)
        self.reset()

    # --- the schedule ------------------------------------------------------------
    def due(self, step: int) -> bool:
        return self.rotating and step > 0 and step % self.every == 0

    def before_step(self, step: int):
        """At a rotation boundary: fence the last refill, take the next slot out of the draws, evict it."""
        if not self.due(step):
            return
        if self.pending >= 0:
            self.rt.stream.wait(self.copied[(self.rotations - 1) % 2])
            self.rewritten(self.rt.stream)
            self.pending = -1
        slot, shard = self.rotations % self.S, int(self.order[(self.S + self.rotations) % self.n])
        self.pending, self.slot_shard[slot] = slot, shard
        self.rotations += 1
        self._publish()
        self.cursors.evict(slot * self.P, (slot + 1) * self.P)
        if not self._join_prefetch(self.rotations - 1):
            self._stage(shard, slot, (self.rotations - 1) % 2)

    def after_step(self, step: int):
        """After the boundary's step is issued: the side stream copies the staged shard behind it."""
        if not self.due(step):
            return
        self.stepped.record(self.rt.stream)
        self.side.wait(self.stepped)
        self._copy(self.pending, (self.rotations - 1) % 2, self.side)
        self._start_prefetch(self.rotations)

    # --- the next shard's host copy, in a thread between boundaries ------------------
    def _start_prefetch(self, k: int):
        """Stage rotation k's shard (slot k % S, buffer k % 2) in a host thread; the buffer's last copy,
        rotation k - 2's, is waited for first, inside the thread."""
        slot, shard, error = k % self.S, int(self.order[(self.S + k) % self.n]), []

        def fill():
            try:
                self._stage(shard, slot, k % 2)
            except BaseException as e:  # raised again where the boundary joins it
                error.append(e)
        thread = threading.Thread(target=fill, name=f"foxc-shard-stage-{k}", daemon=True)
        thread.start()
        self._prefetch = (k, thread, error)

    def _join_prefetch(self, k: int | None = None) -> bool:
        """Wait for the staging thread; whether it staged rotation k (None: any, to discard it)."""
        if self._prefetch is None:
            return False
        staged, thread, error = self._prefetch
        self._prefetch = None
        thread.join()
        if error:
            raise error[0]
        return staged == k

    # --- slots -----------------------------------------------------------------
    def reset(self):
        """The first `slots` shards of the order resident, no rotation done (loaded only if not so already)."""
        self._join_prefetch()
        initial = self._expected(0)[0]
        if self.rotations == 0 and np.array_equal(self.slot_shard, initial):
            return
        self.slot_shard[:], self.rotations, self.pending = initial, 0, -1
        self._load_all()

    def restore(self):
        """After a checkpoint's `slots` array was loaded into `state`: the same shards in the same slots,
        the refill that was pending still out of the draws (its data is in place by its boundary)."""
        self._join_prefetch()
        saved = self.state.download()
        slot_shard, rotations, pending = saved[:self.S], int(saved[self.S]), int(saved[self.S + 1])
        expected = self._expected(rotations)
        if rotations < 0 or not np.array_equal(slot_shard, expected[0]) or pending != expected[1]:
            raise ValueError(f"section resident.slots: slots {slot_shard.tolist()}, {rotations} rotation(s), pending "
                             f"{pending} is not a state this run's rotation of {self.n} shards through {self.S} slots "
                             "reaches (another --device-data-gb, --rotate-every or data?)")
        self.slot_shard[:], self.rotations, self.pending = slot_shard, rotations, pending
        self._load_all()

    def _expected(self, rotations: int) -> tuple[np.ndarray, int]:
        """(slot -> shard, pending slot) after `rotations` rotations."""
        shards = np.full(self.S, -1, np.int64)
        m = min(self.S, self.n)
        shards[:m] = self.order[:m]
        for k in range(min(rotations, self.S)):  # slot k % S last took shard S + k', the latest k' of its class
            last = k + (rotations - 1 - k) // self.S * self.S
            shards[k] = self.order[(self.S + last) % self.n]
        return shards, (rotations - 1) % self.S if rotations > 0 else -1

    def _load_all(self):
        """Every slot's shard copied in now (synchronously, through staging), and the draw table published."""
        for slot, shard in enumerate(self.slot_shard):
            if shard >= 0:
                self._stage(int(shard), slot, 0)
                self._copy(slot, 0, self.rt.stream)
                self.rt.stream.synchronize()
        self.rewritten(self.rt.stream)
        self._publish()

    def _publish(self):
        """The state array (what a checkpoint saves) and the draw table: the resident slots but the pending one."""
        self.state.upload(np.r_[self.slot_shard, self.rotations, self.pending].astype(np.int64))
        self.cursors.draw_from(*np.array(self.drawable_rows(), np.int64).reshape(-1, 2).T)

    def _stage(self, shard: int, slot: int, buffer: int):
        """Shard `shard`'s rows into staging buffer `buffer`, their segment set to `slot` (the gather's window
        stops at the slot's first row). Waits for that buffer's previous copy first."""
        self.copied[buffer].synchronize()
        records, labels = self.staging[buffer]
        self.read(int(self.segment[shard]), records.host, labels.host)
        records.host["segment"][:int(self.rows[shard])] = slot

    def _copy(self, slot: int, buffer: int, stream):
        """Staging buffer `buffer` into slot `slot` on `stream` (records, then each label plane's run of rows)."""
        copy_staged(self.rt, self.staging[buffer], self.records, self.labels, slot * self.P,
                    int(self.rows[self.slot_shard[slot]]), stream)
        self.copied[buffer].record(stream)

    # --- what a run reports ------------------------------------------------------
    def rotations_by(self, steps_done: int) -> int:
        """Rotations begun once `steps_done` steps have run (one before each step t > 0 with t % every == 0)."""
        return (steps_done - 1) // self.every if self.rotating and steps_done > 0 else 0

    def describe(self) -> dict:
        return {"slots": self.S, "slot_rows": self.P, "shards": self.n, "rotate_every": self.every,
                "rotations": self.rotations, "resident": [int(s) for s in self.slot_shard if s >= 0],
                "refilling": int(self.slot_shard[self.pending]) if self.pending >= 0 else None}

    def drawable_rows(self) -> list[tuple[int, int]]:
        """(first, last) device rows of each slot cursors may point into now, last inclusive."""
        return [(s * self.P, s * self.P + int(self.rows[self.slot_shard[s]]) - 1)
                for s in range(self.S) if self.slot_shard[s] >= 0 and s != self.pending]

    def close(self):
        self._join_prefetch()  # the filler writes staging: it ends before staging is freed
        super().close()

    def buffers(self):  # the side stream first: closing it waits for the copies that read staging
        return [self.side, self.state, *(a for pair in self.staging for a in pair), *self.copied, self.stepped, self.side]
