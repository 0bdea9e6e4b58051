"""The window gather and cursor advance kernels (cuda/data/gather.cu) and their numpy references."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, i64, ptr, reference
from ..rng import xorshift32
from .features import FEATURES, HORIZONS, LABEL_PLANES, window_features
from .record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE

MODULE = "data/gather"
ADVANCE_BLOCK = 256

SAMPLE_AND_GATHER = KernelSpec(
    "gpu_sample_and_gather", MODULE,
    (ptr("records"), ptr("labels"), ptr("segment_end"), ptr("valid_cursors"),
     ptr("cursors"), ptr("episode_steps"), ptr("done"), ptr("last"), ptr("rng"),
     ptr("features"), ptr("labels_out"),
     i32("n_records"), i32("n_valid"), i32("B"), i32("K"), i64("tick"), i32("max_episode_steps")),
    doc="redraw finished cursors, gather time-major [K,B,F] window features and the label planes at the cursor; "
        "grid B, block 128, shared K*352 bytes")
ADVANCE_CURSORS = KernelSpec(
    "gpu_advance_cursors", MODULE,
    (ptr("cursors"), ptr("episode_steps"), ptr("last"), ptr("done"), i32("B")),
    doc="cursor += 1 per backtest, or done = 1 at the episode's last snapshot; grid ceil(B/256), block 256")


def shared_bytes(K: int) -> int:
    return int(K) * SNAPSHOT_BYTES


@reference(SAMPLE_AND_GATHER)
def _sample_and_gather(launch, records, labels, segment_end, valid_cursors, cursors, episode_steps, done, last,
                       rng, features, labels_out, n_records, n_valid, B, K, tick, max_episode_steps):
    n, nb, k = int(n_records), int(B), int(K)
    assert launch.shared_bytes >= shared_bytes(k), "gpu_sample_and_gather needs K * 352 bytes of shared memory"
    rec = records.view(SNAPSHOT_DTYPE, n)
    cur, steps, dn, lst, state = cursors.i32(nb), episode_steps.i32(nb), done.i32(nb), last.i32(nb), rng.u32(nb)
    redraw = (cur < 0) | (dn != 0)
    drawn = xorshift32(state[redraw])
    state[redraw] = drawn
    cur[redraw] = valid_cursors.i32(int(n_valid))[drawn % np.uint32(n_valid)]
    steps[redraw] = 0
    dn[redraw] = 0
    c = cur.astype(np.int64)
    end = segment_end.i32()[rec["segment"][c]]
    lst[:] = (c + 1 >= end) | ((max_episode_steps > 0) & (steps + 1 >= max_episode_steps))
    features.f32(k * nb * FEATURES).reshape(k, nb, FEATURES)[:] = \
        window_features(rec, c, k, int(tick)).transpose(1, 0, 2)
    planes = labels.f32(LABEL_PLANES * HORIZONS * n).reshape(LABEL_PLANES, HORIZONS, n)
    labels_out.f32(LABEL_PLANES * nb * HORIZONS).reshape(LABEL_PLANES, nb, HORIZONS)[:] = \
        planes[:, :, c].transpose(0, 2, 1)


@reference(ADVANCE_CURSORS)
def _advance_cursors(launch, cursors, episode_steps, last, done, B):
    nb = int(B)
    cur, steps, lst, dn = cursors.i32(nb), episode_steps.i32(nb), last.i32(nb), done.i32(nb)
    moving = lst == 0
    cur[moving] += 1
    steps[moving] += 1
    dn[:] = ~moving


def advance_grid(B: int) -> int:
    return (int(B) + ADVANCE_BLOCK - 1) // ADVANCE_BLOCK
