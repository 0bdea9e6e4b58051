"""The batch's priorities into the sum-tree and the tree's sums in one launch (cuda/replay/priority.cu), with its
numpy reference."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from .layout import PRIORITY_EPS, SUBTREE_BLOCK, SUBTREE_SPAN

MODULE = "replay/priority"

UPDATE_TREE = KernelSpec(
    "replay_update_tree", MODULE,
    (ptr("tree"), ptr("max_priority"), ptr("ticket"), ptr("index"), ptr("td"), ptr("isv"), i32("batch"),
     i32("capacity")),
    doc="leaf = (|td| + eps)^alpha (the last of each run of equal indices writes), running max; then block g sums "
        "its SUBTREE_SPAN leaves up to their subtree's root and the last block the roots up to the root; "
        "grid capacity / span, block SUBTREE_BLOCK")

_ALPHA = slot_index("per_alpha")


def priorities_of(td: np.ndarray, alpha) -> np.ndarray:
    """(|td| + eps)^alpha in float32, as the kernel computes it."""
    e = np.abs(np.asarray(td, np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        return np.power(e + np.float32(PRIORITY_EPS), np.float32(alpha))


def subtree_sums(tree: np.ndarray, level: int, span: int):
    """The internal nodes of the level // span subtrees over tree[level .. 2*level), level by level.

    Every node is tree[2k] + tree[2k+1], computed once: the same bits as any other
    bottom-up order of the same adds.
    """
    top = level // span
    w = span // 2
    while w >= 1:
        lo, hi = top * w, 2 * top * w
        tree[lo:hi] = tree[2 * lo:2 * hi:2] + tree[2 * lo + 1:2 * hi:2]
        w //= 2


def grid(capacity: int) -> int:
    """replay_update_tree's blocks: one a subtree of SUBTREE_SPAN leaves."""
    return capacity // min(capacity, SUBTREE_SPAN)


@reference(UPDATE_TREE)
def _update_tree(launch, tree, max_priority, ticket, index, td, isv, batch, capacity):
    nb, cap = int(batch), int(capacity)
    span = min(cap, SUBTREE_SPAN)
    top = cap // span
    if launch.grid[0] != top:
        return
    idx = index.i32(nb)
    e = np.abs(td.f32(nb))
    valid = (idx >= 0) & (idx < cap) & np.isfinite(e)
    p = priorities_of(e, isv.f32()[_ALPHA])
    last = np.ones(nb, bool)
    last[:-1] = idx[1:] != idx[:-1]
    write = valid & last
    nodes = tree.f64(2 * cap)
    nodes[cap + idx[write]] = p[write].astype(np.float64)
    mp = max_priority.f32(1)
    largest = np.float32(np.fmax.reduce(p[valid], initial=np.float32(0.0)))
    mp[0] = np.fmax(mp[0], largest)
    subtree_sums(nodes, cap, span)
    if 2 <= top <= SUBTREE_SPAN:  # the last block sums the roots
        subtree_sums(nodes, top, top)


def plan_update_tree(rt, capacity: int, batch: int, **args):
    """`batch` = 0: the tree's sums alone (leaves written some other way). The buffers by their parameter names."""
    return rt.plan(UPDATE_TREE, grid(capacity), SUBTREE_BLOCK, dict(args, batch=batch, capacity=capacity))
