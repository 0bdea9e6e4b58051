"""Priority updates and the sum-tree rebuild in shared-memory subtrees (cuda/replay/priority.cu) with numpy references."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from .layout import PRIORITY_EPS, SUBTREE_BLOCK, SUBTREE_SPAN

MODULE = "replay/priority"

UPDATE_PRIORITIES = KernelSpec(
    "replay_update_priorities", MODULE,
    (ptr("tree"), ptr("index"), ptr("td"), ptr("isv"), ptr("max_priority"), i32("batch"), i32("capacity")),
    doc="leaf = (|td| + eps)^alpha, last of each run of equal indices writes; running max; grid 1, block 1024")
TREE_SUBTREES = KernelSpec(
    "replay_tree_subtrees", MODULE, (ptr("tree"), ptr("ticket"), i32("level"), i32("span")),
    doc="block g sums nodes [level + g*span, +span) up to their subtree root in shared memory, and with the "
        "whole grid the last block the level / span roots up to the root; grid level/span, block SUBTREE_BLOCK")

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


def subtree_sums(tree: np.ndarray, level: int, span: int, blocks: int | None = None):
    """What `blocks` blocks of replay_tree_subtrees write (all level // span by default), level by level.

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


@reference(TREE_SUBTREES)
def _tree_subtrees(launch, tree, ticket, level, span):
    lv, sp = int(level), int(span)
    if sp < 2 or sp > SUBTREE_SPAN:
        return
    nodes, top = tree.f64(2 * lv), lv // sp
    subtree_sums(nodes, lv, sp, launch.grid[0])
    if 2 <= top <= SUBTREE_SPAN and launch.grid[0] == top:  # the last block sums the roots
        subtree_sums(nodes, top, top)


def rebuild_plans(rt, tree, ticket, capacity: int) -> list:
    """One launch: the subtrees of SUBTREE_SPAN leaves, and (when capacity exceeds that) their top."""
    span = min(capacity, SUBTREE_SPAN)
    return [rt.plan(TREE_SUBTREES, capacity // span, SUBTREE_BLOCK, (tree, ticket, capacity, span))]
