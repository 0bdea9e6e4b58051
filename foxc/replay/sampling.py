"""Stratified proportional sampling, one kernel (cuda/replay/sample.cu), its numpy reference, and the importance
weights' arithmetic (replay_next_state writes them from the per-block smallest probs that the sample leaves)."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..rng import xorshift32
from .layout import (CTR_LENGTH, ROW_WARPS, TR_ACTION, TR_COLS, TR_DONE, TR_GAMMA_N, TR_LOG_PI, TR_RETURN,
                     TR_RETURN_RAW, warp_grid)

MODULE = "replay/sample"

SAMPLE = KernelSpec(
    "replay_sample", MODULE,
    (ptr("tree"), ptr("counters"), ptr("store_h_t"), ptr("store_h_tp1"), ptr("store_rows"), ptr("pending"),
     ptr("rng"), ptr("out_h_t"), ptr("out_h_tp1"), ptr("out_action"), ptr("out_return"),
     ptr("out_return_raw"), ptr("out_done"), ptr("out_log_pi"), ptr("out_gamma_n"), ptr("out_index"),
     ptr("out_prob"), ptr("out_next"), ptr("block_min"), i32("batch"), i32("capacity"), i32("width")),
    doc="one stratified proportional draw per warp, a coalesced gather (a pending next state: out_next = its "
        "backtest, the row left to replay_next_state); each block's smallest positive prob into block_min "
        "(replay_next_state takes their min and writes the weights); grid warp_grid(batch), block ROW_BLOCK")

def tree_walk(tree: np.ndarray, u: np.ndarray, capacity: int) -> np.ndarray:
    """Leaf reached by each u (float64), as replay_sample walks: never into a subtree whose sum is 0."""
    u = np.array(u, np.float64)
    node = np.ones(u.shape, np.int64)
    while capacity > 1 and node.size and node[0] < capacity:
        left, right = tree[2 * node], tree[2 * node + 1]
        go_left = ((u < left) & (left > 0.0)) | ~(right > 0.0)
        u = np.where(go_left, u, u - left)
        node = 2 * node + (~go_left).astype(np.int64)
    return node - capacity


@reference(SAMPLE)
def _sample(launch, tree, counters, store_h_t, store_h_tp1, store_rows, pending, rng, out_h_t, out_h_tp1,
            out_action, out_return, out_return_raw, out_done, out_log_pi, out_gamma_n, out_index, out_prob,
            out_next, block_min, batch, capacity, width):
    nb, cap, w = int(batch), int(capacity), int(width)
    t = tree.f64(2 * cap)
    length = int(counters.u32(4)[CTR_LENGTH])
    root = t[1]
    h_t = out_h_t.f32(nb * w).reshape(nb, w)
    h_tp1 = out_h_tp1.f32(nb * w).reshape(nb, w)
    outs = [(out_return, TR_RETURN), (out_return_raw, TR_RETURN_RAW), (out_done, TR_DONE),
            (out_log_pi, TR_LOG_PI), (out_gamma_n, TR_GAMMA_N)]
    if length == 0 or not root > 0.0:
        h_t[:] = 0.0
        h_tp1[:] = 0.0
        out_action.i32(nb)[:] = 0
        for arr, _ in outs:
            arr.f32(nb)[:] = 0.0
        out_index.i32(nb)[:] = -1
        out_next.i32(nb)[:] = -1
        out_prob.f64(nb)[:] = 0.0
        block_min.f64(warp_grid(nb))[:] = np.inf
        return
    state = rng.u32(nb)
    x = xorshift32(state)
    state[:] = x
    frac = (x >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    u = (np.arange(nb, dtype=np.float64) + frac) * (root / np.float64(nb))
    leaf = np.minimum(tree_walk(t, u, cap), length - 1)
    rows = store_rows.f32(cap * TR_COLS).reshape(cap, TR_COLS)[leaf]
    out_action.i32(nb)[:] = rows[:, TR_ACTION].astype(np.int32)
    for arr, col in outs:
        arr.f32(nb)[:] = rows[:, col]
    out_index.i32(nb)[:] = leaf
    out_prob.f64(nb)[:] = t[cap + leaf] / root
    h_t[:] = store_h_t.f32(cap * w).reshape(cap, w)[leaf]
    awaits = pending.i32(cap)[leaf] - 1
    out_next.i32(nb)[:] = awaits
    h_tp1[awaits < 0] = store_h_tp1.f32(cap * w).reshape(cap, w)[leaf[awaits < 0]]
    prob = out_prob.f64(nb)
    by_block = np.full(warp_grid(nb) * ROW_WARPS, np.inf)
    by_block[:nb] = np.where(prob > 0.0, prob, np.inf)
    block_min.f64(warp_grid(nb))[:] = by_block.reshape(-1, ROW_WARPS).min(axis=1)


def is_weights(prob: np.ndarray, beta, p_min: float | None = None) -> np.ndarray:
    """(P_min / P)^beta in float32, 0 where prob is not positive: replay_next_state's arithmetic. P_min is the
    smallest positive prob (infinity when none) unless given."""
    positive = prob > 0.0
    if p_min is None:
        p_min = prob[positive].min() if positive.any() else np.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (p_min / np.where(positive, prob, 1.0)).astype(np.float32)
    return np.where(positive, np.power(ratio, np.float32(beta)), np.float32(0.0))
