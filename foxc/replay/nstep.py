"""The n-step ring and its flush into storage (cuda/replay/nstep.cu) with numpy references.

Semantics (see the .cu header): entry i of a ring holding `count` entries, with
window end j = min(i + n, count), is the transition (h of i, action of i,
sum_{q=i}^{j-1} gamma^(q-i) r_q, gamma^(j-i), h of j or this step's h_tp1,
done of the newest entry when j == count). It leaves when i + n <= count, or
every entry leaves when the newest is done.
"""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from .layout import (CTR_FLUSH_BASE, CTR_FLUSH_TOTAL, CTR_LENGTH, CTR_WRITE_HEAD, RING_ACTION,
                     RING_COLS, RING_DONE, RING_LOG_PI, RING_REWARD, RING_REWARD_RAW, TR_ACTION,
                     TR_COLS, TR_DONE, TR_GAMMA_N, TR_LOG_PI, TR_RETURN, TR_RETURN_RAW, TR_STEPS, warp_grid)
from .sampling import is_weights

MODULE = "replay/nstep"

RING_PUSH = KernelSpec(
    "replay_ring_push", MODULE,
    (ptr("ring_h"), ptr("ring_rows"), ptr("ring_pos"), ptr("flush"), ptr("offsets"), ptr("counters"), ptr("ticket"),
     ptr("h_t"), ptr("action"), ptr("reward"), ptr("reward_raw"), ptr("done"), ptr("log_pi"), ptr("isv"),
     i32("n_backtests"), i32("n_max"), i32("width"), i32("capacity")),
    doc="append this step's entry (a width-float state row and its scalars) to every ring; flush[2b] = "
        "transitions leaving, flush[2b+1] = n; the last block (integer ticket) gives them slots: offsets, "
        "write head, length; grid warp_grid(n_backtests) (a warp a backtest), block ROW_BLOCK")
FLUSH_WRITE = KernelSpec(
    "replay_flush_write", MODULE,
    (ptr("ring_h"), ptr("ring_rows"), ptr("ring_pos"), ptr("flush"), ptr("offsets"), ptr("counters"), ptr("isv"),
     ptr("max_priority"), ptr("store_h_t"), ptr("store_h_tp1"), ptr("store_rows"), ptr("tree"), ptr("pending"),
     i32("n_backtests"), i32("n_max"), i32("capacity"), i32("width")),
    doc="copy the leaving transitions into their slots at the running max priority; a next state that is this "
        "step's h_tp1 is marked pending[slot] = b + 1; grid warp_grid(n_backtests) (a warp a backtest), "
        "block ROW_BLOCK")
NEXT_STATE = KernelSpec(
    "replay_next_state", MODULE,
    (ptr("ring_pos"), ptr("flush"), ptr("offsets"), ptr("counters"), ptr("h_tp1"), ptr("pending"),
     ptr("store_h_tp1"), ptr("out_next"), ptr("out_prob"), ptr("block_min"), ptr("isv"), ptr("out_h_tp1"),
     ptr("out_weight"), i32("n_backtests"), i32("batch"), i32("capacity"), i32("width")),
    doc="h_tp1 into the pending stored next states (pending back to 0) and into the sampled rows that drew "
        "them; the batch's importance weights (P_min / P)^beta, P_min the min of block_min; grid "
        "warp_grid(n_backtests) + warp_grid(batch) "
        "(a warp a backtest, then a sample), block ROW_BLOCK")


_GAMMA = slot_index("gamma")
_N_STEP = slot_index("n_step")
_BETA = slot_index("per_beta")


def n_step_of(isv_values: np.ndarray, n_max: int) -> int:
    """The n in use: the ISV slot clamped to [1, n_max], NaN read as 1 (as fminf(fmaxf(.)) does)."""
    return int(np.fmin(np.fmax(np.float32(isv_values[_N_STEP]), np.float32(1.0)), np.float32(n_max)))


def _fma32(a, b, c) -> np.float32:
    """fmaf: float64 holds a*b exactly, so this is one rounding up to rare double-rounding ties."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@reference(RING_PUSH)
def _ring_push(launch, ring_h, ring_rows, ring_pos, flush, offsets, counters, ticket, h_t, action, reward, reward_raw,
               done, log_pi, isv, n_backtests, n_max, width, capacity):
    nb, nm, w, cap = int(n_backtests), int(n_max), int(width), int(capacity)
    pos = ring_pos.u32(2 * nb).reshape(nb, 2)
    ring = ring_h.f32(nb * nm * w).reshape(nb, nm, w)
    rows = ring_rows.f32(nb * nm * RING_COLS).reshape(nb, nm, RING_COLS)
    count = pos[:, 1].astype(np.int64)
    slot = (pos[:, 0].astype(np.int64) + count) % nm
    b = np.arange(nb)
    ring[b, slot] = h_t.f32(nb * w).reshape(nb, w)
    d = done.f32(nb)
    rows[b, slot, RING_ACTION] = action.i32(nb).astype(np.float32)
    rows[b, slot, RING_REWARD] = reward.f32(nb)
    rows[b, slot, RING_REWARD_RAW] = reward_raw.f32(nb)
    rows[b, slot, RING_DONE] = d
    rows[b, slot, RING_LOG_PI] = log_pi.f32(nb)
    held = count + 1
    n = n_step_of(isv.f32(), nm)
    out = flush.i32(2 * nb).reshape(nb, 2)
    out[:, 0] = np.where(d > np.float32(0.5), held, np.maximum(0, held - n + 1))
    out[:, 1] = n
    pos[:, 1] = held
    # the last block's slots
    emit = out[:, 0].astype(np.int64)
    offsets.u32(nb)[:] = (np.cumsum(emit) - emit).astype(np.uint32)
    total = int(emit.sum())
    ctr = counters.u32(4)
    base, length = int(ctr[CTR_WRITE_HEAD]), int(ctr[CTR_LENGTH])
    ctr[CTR_FLUSH_BASE] = base
    ctr[CTR_FLUSH_TOTAL] = total
    ctr[CTR_WRITE_HEAD] = (base + total) & (cap - 1)
    ctr[CTR_LENGTH] = min(cap, length + total)


@reference(FLUSH_WRITE)
def _flush_write(launch, ring_h, ring_rows, ring_pos, flush, offsets, counters, isv, max_priority, store_h_t,
                 store_h_tp1, store_rows, tree, pending, n_backtests, n_max, capacity, width):
    nb, nm, cap, w = int(n_backtests), int(n_max), int(capacity), int(width)
    pos = ring_pos.u32(2 * nb).reshape(nb, 2)
    ring = ring_h.f32(nb * nm * w).reshape(nb, nm, w)
    rows = ring_rows.f32(nb * nm * RING_COLS).reshape(nb, nm, RING_COLS)
    fl = flush.i32(2 * nb).reshape(nb, 2)
    first_offset = offsets.u32(nb)
    ctr = counters.u32(4)
    base, total = int(ctr[CTR_FLUSH_BASE]), int(ctr[CTR_FLUSH_TOTAL])
    waiting = pending.i32(cap)
    gamma = isv.f32()[_GAMMA]
    priority = np.float64(max_priority.f32(1)[0])
    out_h_t = store_h_t.f32(cap * w).reshape(cap, w)
    out_h_tp1 = store_h_tp1.f32(cap * w).reshape(cap, w)
    out_rows = store_rows.f32(cap * TR_COLS).reshape(cap, TR_COLS)
    leaves = tree.f64(2 * cap)[cap:]
    for b in np.flatnonzero(fl[:, 0]):
        emit, n = int(fl[b, 0]), int(fl[b, 1])
        start, count = int(pos[b, 0]), int(pos[b, 1])
        entry = [(start + q) % nm for q in range(count)]
        newest_done = rows[b, entry[-1], RING_DONE] > np.float32(0.5)
        for i in range(emit):
            o = int(first_offset[b]) + i
            if total - o > cap:
                continue
            slot = (base + o) & (cap - 1)
            j = min(i + n, count)
            out_h_t[slot] = ring[b, entry[i]]
            if j < count:
                out_h_tp1[slot] = ring[b, entry[j]]
            waiting[slot] = b + 1 if j == count else 0
            ret = ret_raw = np.float32(0.0)
            gamma_n = np.float32(1.0)
            for q in range(j - 1, i - 1, -1):
                ret = _fma32(gamma, ret, rows[b, entry[q], RING_REWARD])
                ret_raw = _fma32(gamma, ret_raw, rows[b, entry[q], RING_REWARD_RAW])
                gamma_n = np.float32(gamma_n * gamma)
            row = out_rows[slot]
            row[TR_ACTION] = rows[b, entry[i], RING_ACTION]
            row[TR_RETURN] = ret
            row[TR_RETURN_RAW] = ret_raw
            row[TR_DONE] = 1.0 if j == count and newest_done else 0.0
            row[TR_LOG_PI] = rows[b, entry[i], RING_LOG_PI]
            row[TR_GAMMA_N] = gamma_n
            row[TR_STEPS] = j - i
            row[TR_COLS - 1] = 0.0
            leaves[slot] = priority
        pos[b, 0] = (start + emit) % nm
        pos[b, 1] = count - emit


@reference(NEXT_STATE)
def _next_state(launch, ring_pos, flush, offsets, counters, h_tp1, pending, store_h_tp1, out_next, out_prob, block_min,
                isv, out_h_tp1, out_weight, n_backtests, batch, capacity, width):
    nb, ns, cap, w = int(n_backtests), int(batch), int(capacity), int(width)
    nxt = h_tp1.f32(nb * w).reshape(nb, w)
    waiting = pending.i32(cap)
    stored = store_h_tp1.f32(cap * w).reshape(cap, w)
    fl = flush.i32(2 * nb).reshape(nb, 2)
    count = ring_pos.u32(2 * nb)[1::2].astype(np.int64) + fl[:, 0]
    first_offset = offsets.u32(nb)
    ctr = counters.u32(4)
    base, total = int(ctr[CTR_FLUSH_BASE]), int(ctr[CTR_FLUSH_TOTAL])
    for b in np.flatnonzero(fl[:, 0]):
        for i in range(max(0, int(count[b]) - int(fl[b, 1])), int(fl[b, 0])):
            o = int(first_offset[b]) + i
            slot = (base + o) & (cap - 1)
            if total - o <= cap and waiting[slot] == b + 1:
                stored[slot] = nxt[b]
                waiting[slot] = 0
    drew = out_next.i32(ns)
    rows = out_h_tp1.f32(ns * w).reshape(ns, w)
    rows[drew >= 0] = nxt[drew[drew >= 0]]
    p_min = block_min.f64(warp_grid(ns)).min()  # the kernel's: exact, in any order
    out_weight.f32(ns)[:] = is_weights(out_prob.f64(ns), isv.f32()[_BETA], p_min)
