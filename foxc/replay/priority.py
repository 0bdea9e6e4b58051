"""Priority updates and the per-level sum-tree rebuild (cuda/replay/priority.cu) with numpy references."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from .layout import PRIORITY_EPS

MODULE = "replay/priority"
LEVEL_BLOCK = 256
LEVEL_MAX_BLOCKS = 1024

UPDATE_PRIORITIES = KernelSpec(
    "replay_update_priorities", MODULE,
    (ptr("tree"), ptr("index"), ptr("td"), ptr("isv"), ptr("max_priority"), i32("batch"), i32("capacity")),
    doc="leaf = (|td| + eps)^alpha, last of each run of equal indices writes; running max; grid 1, block 1024")
TREE_LEVEL = KernelSpec(
    "replay_tree_level", MODULE, (ptr("tree"), i32("first"), i32("count")),
    doc="tree[k] = tree[2k] + tree[2k+1] for k in [first, first+count); block 256, grid-stride")

_ALPHA = slot_index("per_alpha")


def priorities_of(td: np.ndarray, alpha) -> np.ndarray:
    """(|td| + eps)^alpha in float32, as the kernel computes it."""
    e = np.abs(np.asarray(td, np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        return np.power(e + np.float32(PRIORITY_EPS), np.float32(alpha))


@reference(UPDATE_PRIORITIES)
def _update_priorities(launch, tree, index, td, isv, max_priority, batch, capacity):
    nb, cap = int(batch), int(capacity)
    idx = index.i32(nb)
    e = np.abs(td.f32(nb))
    valid = (idx >= 0) & (idx < cap) & np.isfinite(e)
    p = priorities_of(e, isv.f32()[_ALPHA])
    last = np.ones(nb, bool)
    last[:-1] = idx[1:] != idx[:-1]
    write = valid & last
    tree.f64(2 * cap)[cap + idx[write]] = p[write].astype(np.float64)
    mp = max_priority.f32(1)
    largest = np.float32(np.fmax.reduce(p[valid], initial=np.float32(0.0)))
    mp[0] = np.fmax(mp[0], largest)


@reference(TREE_LEVEL)
def _tree_level(launch, tree, first, count):
    f, c = int(first), int(count)
    t = tree.f64(2 * (f + c))
    t[f:f + c] = t[2 * f:2 * (f + c):2] + t[2 * f + 1:2 * (f + c):2]


def level_plans(rt, tree, capacity: int) -> list:
    """log2(capacity) launches, the leaves' parents first: stream order is the barrier between levels."""
    plans, first = [], capacity // 2
    while first >= 1:
        grid = max(1, min((first + LEVEL_BLOCK - 1) // LEVEL_BLOCK, LEVEL_MAX_BLOCKS))
        plans.append(rt.plan(TREE_LEVEL, grid, LEVEL_BLOCK, (tree, first, first)))
        first //= 2
    return plans
