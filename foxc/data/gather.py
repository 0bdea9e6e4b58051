"""The window gather kernel (cuda/data/gather.cu) and its numpy reference."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, i64, ptr, reference
from .features import F_MID_REL, FEATURES, HORIZONS, LABEL_PLANES, window_features
from .record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE

MODULE = "data/gather"

GATHER_WINDOWS = KernelSpec(
    "gather_windows", MODULE,
    (ptr("records"), ptr("labels"), ptr("segment_first"), ptr("cursor"), ptr("held"), ptr("features"),
     ptr("labels_out"), i32("n_records"), i32("B"), i32("K"), i64("tick")),
    doc="time-major [K,B,F] features of the K-snapshot window ending at each cursor (rows before the segment's "
        "first repeat it; a window that slid by one since `held` moves its held rows down) and the label planes "
        "at the cursor; grid B, block 128, shared K * sizeof(FoxcSnapshot) bytes")


def shared_bytes(K: int) -> int:
    return int(K) * SNAPSHOT_BYTES


def window_rows(records: np.ndarray, segment_first: np.ndarray, cursor: np.ndarray, K: int) -> np.ndarray:
    """int64 [B, K]: the rows of the window ending at each cursor, oldest first, none before its segment's first."""
    c = np.asarray(cursor, np.int64)
    first = segment_first[records["segment"][c]]
    return np.maximum(c[:, None] - (K - 1) + np.arange(K), first[:, None])


@reference(GATHER_WINDOWS)
def _gather_windows(launch, records, labels, segment_first, cursor, held, features, labels_out, n_records, B, K,
                    tick):
    n, nb, k = int(n_records), int(B), int(K)
    assert launch.shared_bytes >= shared_bytes(k), "gather_windows needs K snapshots of shared memory"
    rec = records.view(SNAPSHOT_DTYPE, n)
    c = cursor.i64(nb)
    first = segment_first.i64()[rec["segment"][c]]
    rows = window_rows(rec, segment_first.i64(), c, k)
    held_c = held.i64(nb)
    out = features.f32(k * nb * FEATURES).reshape(k, nb, FEATURES)
    # as the kernel: a window that slid by one within its segment moves its held rows down and forms the
    # mid relative to the newest again; the others form every feature (the same values either way)
    slide = (held_c == c - 1) & (c - 1 >= first)
    fresh = window_features(rec, rows, int(tick))
    moved = out[1:].copy()
    out[:] = fresh.transpose(1, 0, 2)
    out[:k - 1, slide] = moved[:, slide]
    out[:k - 1, slide, F_MID_REL] = fresh[slide, :k - 1, F_MID_REL].T
    held_c[:] = c
    planes = labels.f32(LABEL_PLANES * HORIZONS * n).reshape(LABEL_PLANES, HORIZONS, n)
    labels_out.f32(LABEL_PLANES * nb * HORIZONS).reshape(LABEL_PLANES, nb, HORIZONS)[:] = \
        planes[:, :, c].transpose(0, 2, 1)
