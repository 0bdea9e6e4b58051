"""Priority updates and the sum-tree rebuild in shared-memory subtrees, one kernel (cuda/replay/priority.cu), with its numpy reference."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from .layout import PRIORITY_EPS, SUBTREE_BLOCK, SUBTREE_SPAN

MODULE = "replay/priority"

UPDATE_TREE = KernelSpec(
    "replay_update_tree", MODULE,
    (ptr("tree"), ptr("index"), ptr("td"), ptr("isv"), ptr("max_priority"), ptr("ticket"), i32("batch"),
     i32("capacity")),
    doc="leaf = (|td| + eps)^alpha (index non-decreasing; last of each run of equal indices writes), block g "
        "sums its run of SUBTREE_SPAN leaves up to its subtree root, the last block (integer ticket) the top and "
        "the running max; grid capacity/span, block SUBTREE_BLOCK")

_ALPHA = slot_index("per_alpha")


def priorities_of(td: np.ndarray, alpha) -> np.ndarray:
    """(|td| + eps)^alpha in float32, as the kernel computes it."""
    e = np.abs(np.asarray(td, np.float32))
    with np.errstate(invalid="ignore", over="ignore"):
        return np.power(e + np.float32(PRIORITY_EPS), np.float32(alpha))


def _update_priorities(tree, index, td, isv, max_priority, batch, capacity):
    """replay_update_tree's priorities: the leaves every block writes, and the last block's running max."""
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


def subtree_sums(tree: np.ndarray, level: int, span: int, blocks: int | None = None):
    """What `blocks` runs of `span` nodes at `level` sum up to their subtree roots (all level // span by
    default), level by level.

    Every node is tree[2k] + tree[2k+1], computed once: the same bits as any other
    bottom-up order of the same adds.
    """
    top = level // span
    blocks = top if blocks is None else min(int(blocks), top)
    w = span // 2
    while w >= 1:
        lo, hi = top * w, (top + blocks) * w
        tree[lo:hi] = tree[2 * lo:2 * hi:2] + tree[2 * lo + 1:2 * hi:2]
        w //= 2


@reference(UPDATE_TREE)
def _update_tree(launch, tree, index, td, isv, max_priority, ticket, batch, capacity):
    cap = int(capacity)
    span = min(cap, SUBTREE_SPAN)
    _update_priorities(tree, index, td, isv, max_priority, batch, cap)
    t = tree.f64(2 * cap)
    subtree_sums(t, cap, span)  # every block: its run up to its subtree root
    if cap // span > 1:  # the last block: the top; ticket stays 0
        subtree_sums(t, cap // span, cap // span)


def plan_update_tree(rt, tree, index, td, isv, max_priority, ticket, batch: int, capacity: int):
    """The priority update and the whole rebuild, one launch; batch 0 is the rebuild alone."""
    return rt.plan(UPDATE_TREE, capacity // min(capacity, SUBTREE_SPAN), SUBTREE_BLOCK,
                   (tree, index, td, isv, max_priority, ticket, batch, capacity))
