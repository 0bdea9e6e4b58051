"""Per-backtest cursors: the snapshot each backtest acts on, where its episode ends, and the draws.

    cursors = Cursors(rt, records["segment"], n_backtests=B, history=K - 1, episode_len=2000, seed=7)
    cursors.cursor, cursors.episode_end  # int64 [B] device arrays the gather and the simulator read
    cursors.advance(stream)              # after the simulator stepped: cursor + 1, or the next episode

One component for the trainer's dataset, the simulator and the standalone environment (`LobEnv`).
An episode starts at a row drawn uniformly among the valid starts — rows with `history` earlier
rows in their segment (the rest of a window) and at least one row after them (a step to mark to)
— and ends at its segment's last row or after `episode_len` rows (0: no limit), whichever comes
first. `episode_end` is that last row, inclusive: the simulator forces a flat exit when
cursor >= episode_end, and the next advance draws a new episode there.

The valid starts are computed once on the host, each with its segment's last row, so the kernel
needs no segment lookup. Every buffer and the launch plan are built here: `advance` reads no host
state and can be captured into a CUDA graph.
"""
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
    (ptr("cursor"), ptr("episode_end"), ptr("rng"), ptr("starts"), ptr("segment_last"), i64("episode_len"),
     i32("n_starts"), i32("B")),
    doc="cursor += 1, or a new episode where the cursor is unset or at its episode's end; "
        "grid ceil(B/256), block 256")


def valid_starts(segment: np.ndarray, history: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, segment_last), int64: the rows with `history` earlier rows in their segment (a run of
    equal `segment` values) and at least one row after, and each one's segment's last row."""
    first, last = segment_runs(segment)
    span = np.maximum(last - first - int(history), 0)  # starts per segment: first + history .. last - 1
    run = np.repeat(np.arange(first.size), span)
    offset = np.arange(run.size, dtype=np.int64) - np.repeat(np.cumsum(span) - span, span)
    return first[run] + int(history) + offset, last[run]


def grid(B: int) -> int:
    return (int(B) + BLOCK - 1) // BLOCK


@reference(CURSOR_ADVANCE)
def _cursor_advance(launch, cursor, episode_end, rng, starts, segment_last, episode_len, n_starts, B):
    nb, n, length = int(B), int(n_starts), int(episode_len)
    cur, end, state = cursor.i64(nb), episode_end.i64(nb), rng.u32(nb)
    draw = (cur < 0) | (cur >= end)
    cur[~draw] += 1
    x = xorshift32(state[draw])
    state[draw] = x
    i = ((x.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int64)
    start, last = starts.i64(n)[i], segment_last.i64(n)[i]
    cur[draw] = start
    end[draw] = np.minimum(last, start + length - 1) if length > 0 else last


class Cursors(Component):
    def __init__(self, rt, segment: np.ndarray, n_backtests: int, *, history: int = 0, episode_len: int = 0,
                 seed: int = 0, stream: str = "data"):
        """`segment`: the records' segment column; `history`: earlier rows in its segment a start needs
        (K − 1 for a window of K); `episode_len`: rows per episode at most (0: to the segment's end);
        `stream`: the foxc.rng stream the generator states are seeded from."""
        if history < 0 or episode_len < 0:
            raise ValueError(f"history and episode_len must be >= 0, got {history} and {episode_len}")
        if not 1 <= n_backtests < 2**31:
            raise ValueError(f"n_backtests must be 1 to 2^31 - 1, got {n_backtests}")
        starts, last = valid_starts(segment, history)
        if starts.size == 0:
            raise ValueError(f"no segment holds {history + 2} snapshots: an episode starts at a snapshot with "
                             f"{history} earlier ones in its segment and at least one after it")
        if starts.size >= 2**31:
            raise ValueError(f"{starts.size} episode starts exceed the int32 range")
        self.rt, self.B, self.history, self.episode_len = rt, int(n_backtests), int(history), int(episode_len)
        self.stream, self.n_starts = stream, int(starts.size)
        dev = rt.device_array
        self.starts = dev(starts.size, np.int64, "cursors.starts")
        self.segment_last = dev(starts.size, np.int64, "cursors.segment_last")
        self.starts.upload(starts)
        self.segment_last.upload(last)
        keep = self.persistent = Persistent()
        self.cursor = keep("cursor", dev(self.B, np.int64, "cursors.cursor"))
        self.episode_end = keep("episode_end", dev(self.B, np.int64, "cursors.episode_end"))
        self.rng = keep("rng", dev(self.B, np.uint32, "cursors.rng"))
        self.advance_plan = rt.plan(CURSOR_ADVANCE, grid(self.B), BLOCK, (
            self.cursor, self.episode_end, self.rng, self.starts, self.segment_last, self.episode_len,
            self.n_starts, self.B))
        self.reset(seed)

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
        return [self.starts, self.segment_last, self.cursor, self.episode_end, self.rng]

