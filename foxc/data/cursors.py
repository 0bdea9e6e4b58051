"""Per-backtest cursors: the snapshot each backtest acts on, where its episode ends, and the draws.

    cursors = Cursors(rt, records["segment"], n_backtests=B, history=K - 1, episode_len=2000, seed=7)
    cursors.cursor, cursors.episode_end  # int64 [B] device arrays the gather and the simulator read
    cursors.advance(stream)              # after the simulator stepped: cursor + 1, or the next episode

One component for the trainer's dataset, the simulator and the standalone environment. An episode starts at a row
drawn uniformly among those with `history` earlier rows in their segment and one after, and ends at its segment's
last row or after `episode_len` rows (0: no limit); `episode_end` is inclusive: the simulator exits flat there and
the next advance draws again. The valid starts are a draw table in device memory (`spans`), so `draw_from` can
change the segments drawn between replays of a captured graph (foxc.data.resident) and `evict` ends the episodes in
a range of rows. `advance` reads no host state: it can be captured."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, i64, ptr, reference
from ..component import Component, Persistent
from ..rng import seed_states, xorshift32
from .record import segment_runs

MODULE = "data/cursors"
BLOCK = 256

CURSOR_ADVANCE = KernelSpec(
    "cursor_advance", MODULE,
    (ptr("cursor"), ptr("episode_end"), ptr("rng"), ptr("spans"), i64("episode_len"), i32("B")),
    doc="cursor += 1, or a new episode where the cursor is unset or at its episode's end, drawn from the "
        "draw table; grid ceil(B/256), block 256")
CURSOR_EVICT = KernelSpec(
    "cursor_evict", MODULE, (ptr("cursor"), ptr("episode_end"), i64("lo"), i64("hi"), i32("B")),
    doc="episode_end = cursor for the backtests whose cursor is in rows lo..hi-1; grid ceil(B/256), block 256")


def valid_starts(segment: np.ndarray, history: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, segment_last), int64: the rows with `history` earlier rows in their segment (a run of
    equal `segment` values) and at least one row after, and each one's segment's last row."""
    first, last = segment_runs(segment)
    span = np.maximum(last - first - int(history), 0)  # starts per segment: first + history .. last - 1
    run = np.repeat(np.arange(first.size), span)
    offset = np.arange(run.size, dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
    return first[run] + int(history) + offset, last[run]


def episode_rows(history: int) -> int:
    """The snapshots a segment must hold for an episode to start in it: `history` earlier ones, the start and a step
    after it (what draw_table counts)."""
    return int(history) + 2


def no_episode_start(history: int) -> str:
    return (f"no segment holds {episode_rows(history)} snapshots: an episode starts at a snapshot with {history} "
            "earlier ones in its segment and at least one after it")


def draw_table(first: np.ndarray, last: np.ndarray, history: int, capacity: int | None = None) -> np.ndarray:
    """The int64 draw table cursor_advance reads for the segments of rows first[j]..last[j] (inclusive):
    [n_spans, n_starts, (end, first start, last) per segment with a start], padded with zeros to
    `capacity` spans. The starts are valid_starts' for the same segments, in the same order."""
    first, last = np.asarray(first, np.int64), np.asarray(last, np.int64)
    count = np.maximum(last - first - int(history), 0)
    keep = count > 0
    n_spans, capacity = int(keep.sum()), int(capacity if capacity is not None else keep.sum())
    if n_spans > capacity:
        raise ValueError(f"{n_spans} segments with a start exceed the draw table's {capacity}")
    table = np.zeros(2 + 3 * max(capacity, 1), np.int64)
    table[0], table[1] = n_spans, int(count.sum())
    spans = table[2:2 + 3 * n_spans].reshape(n_spans, 3)
    spans[:, 0], spans[:, 1], spans[:, 2] = np.cumsum(count[keep]), first[keep] + int(history), last[keep]
    return table


def grid(B: int) -> int:
    return (int(B) + BLOCK - 1) // BLOCK


@reference(CURSOR_ADVANCE)
def _cursor_advance(launch, cursor, episode_end, rng, spans, episode_len, B):
    nb, length = int(B), int(episode_len)
    cur, end, state = cursor.i64(nb), episode_end.i64(nb), rng.u32(nb)
    head = spans.i64(2)
    n_spans, n = int(head[0]), int(head[1])
    table = spans.i64(2 + 3 * n_spans)[2:].reshape(n_spans, 3)
    draw = (cur < 0) | (cur >= end)
    cur[~draw] += 1
    x = xorshift32(state[draw])
    state[draw] = x
    i = ((x.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int64)
    j = np.searchsorted(table[:, 0], i, side="right")  # the first span whose end is above i
    before = np.where(j > 0, table[np.maximum(j - 1, 0), 0], 0)
    start, last = table[j, 1] + (i - before), table[j, 2]
    cur[draw] = start
    end[draw] = np.minimum(last, start + length - 1) if length > 0 else last


@reference(CURSOR_EVICT)
def _cursor_evict(launch, cursor, episode_end, lo, hi, B):
    cur, end = cursor.i64(int(B)), episode_end.i64(int(B))
    inside = (cur >= int(lo)) & (cur < int(hi)) & (cur < end)
    end[inside] = cur[inside]


class Cursors(Component):
    def __init__(self, rt, segment: np.ndarray | None, n_backtests: int, *, history: int = 0, episode_len: int = 0,
                 seed: int = 0, stream: str = "data", bounds: tuple | None = None, capacity: int | None = None):
        """`segment`: the records' segment column, or None with `bounds`: (first, last) rows of each segment,
        inclusive; `history`: earlier rows in its segment a start needs (K − 1 for a window of K);
        `episode_len`: rows per episode at most (0: to the segment's end); `stream`: the foxc.rng stream
        the generator states are seeded from; `capacity`: segments the draw table holds (default: those given)."""
        if history < 0 or episode_len < 0:
            raise ValueError(f"history and episode_len must be >= 0, got {history} and {episode_len}")
        if not 1 <= n_backtests < 2**31:
            raise ValueError(f"n_backtests must be 1 to 2^31 - 1, got {n_backtests}")
        first, last = bounds if bounds is not None else segment_runs(segment)
        self.rt, self.B, self.history, self.episode_len = rt, int(n_backtests), int(history), int(episode_len)
        self.stream, self.capacity = stream, int(capacity if capacity is not None else len(first))
        dev = rt.device_array
        self.spans = dev(2 + 3 * max(self.capacity, 1), np.int64, "cursors.spans")
        self.draw_from(first, last)
        keep = self.persistent = Persistent()
        self.cursor = keep("cursor", dev(self.B, np.int64, "cursors.cursor"))
        self.episode_end = keep("episode_end", dev(self.B, np.int64, "cursors.episode_end"))
        self.rng = keep("rng", dev(self.B, np.uint32, "cursors.rng"))
        self.advance_plan = rt.plan(CURSOR_ADVANCE, grid(self.B), BLOCK, dict(
            cursor=self.cursor, episode_end=self.episode_end, rng=self.rng, spans=self.spans,
            episode_len=self.episode_len, B=self.B))
        self.reset(seed)

    def draw_from(self, first, last, stream=None):
        """New episodes start from now on (in stream order) in the segments of rows first[j]..last[j] only."""
        table = draw_table(first, last, self.history, self.capacity)
        if table[1] == 0:
            raise ValueError(no_episode_start(self.history))
        if table[1] >= 2**31:
            raise ValueError(f"{table[1]} episode starts exceed the int32 range")
        self.n_starts = int(table[1])
        self.spans.upload(table, stream)

    def evict(self, lo: int, hi: int, stream=None):
        """The backtests whose cursor is in rows lo..hi-1 end their episode at the next step (a flat exit)."""
        self.rt.plan(CURSOR_EVICT, grid(self.B), BLOCK, dict(cursor=self.cursor, episode_end=self.episode_end,
                                                             lo=int(lo), hi=int(hi), B=self.B)
                     ).launch(stream or self.rt.stream)

    def reset(self, seed: int):
        """Every backtest unset, its generator seeded from (seed, stream), then one advance: all draw an episode."""
        self.cursor.upload(np.full(self.B, -1, np.int64))
        self.episode_end.upload(np.full(self.B, -1, np.int64))
        self.rng.upload(seed_states(seed, self.B, self.stream))
        self.advance()

    def place(self, cursor, episode_end):
        """Put backtest b at row cursor[b] with its episode ending at episode_end[b] (host arrays, an
        evaluation's chunks); the advances go on from there."""
        cursor, episode_end = np.asarray(cursor, np.int64), np.asarray(episode_end, np.int64)
        if cursor.shape != (self.B,) or episode_end.shape != (self.B,) or (cursor < 0).any():
            raise ValueError(f"cursor and episode_end must be [{self.B}] rows, got {cursor.shape} and "
                             f"{episode_end.shape}")
        self.cursor.upload(cursor)
        self.episode_end.upload(episode_end)

    def advance(self, stream=None):
        self.advance_plan.launch(stream or self.rt.stream)

    def buffers(self):
        return [self.spans, self.cursor, self.episode_end, self.rng]
