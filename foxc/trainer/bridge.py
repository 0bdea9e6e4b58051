"""The bridge kernels between the trainer's components (cuda/trainer/bridge.cu) and their references."""
from __future__ import annotations

import numpy as np

from ..data.features import HORIZONS, LABEL_PLANES
from ..agent.kernels import trade_drawdown
from ..driver import KernelSpec, f32, i32, ptr, reference
from ..lobsim.layout import POSITION_DTYPE, TRADE_DTYPE

BLOCK = 256
PERCEPTION_LOGITS = 3 * HORIZONS

BRIDGE_BEFORE_ACT = KernelSpec("bridge_before_act", "trainer/bridge", (
    ptr("labels_out"), ptr("labels"), ptr("mask"), i32("B")))
BRIDGE_AFTER_SIM = KernelSpec("bridge_after_sim", "trainer/bridge", (
    ptr("pos"), ptr("trade_log"), ptr("prev_trades"), ptr("closed"), ptr("closed_pnl"), ptr("drawdown"),
    f32("money_scale"), i32("trade_cap"), i32("B")))


def grid(B: int) -> int:
    return max(1, (int(B) + BLOCK - 1) // BLOCK)


@reference(BRIDGE_BEFORE_ACT)
def _bridge_before_act(launch, labels_out, labels, mask, B):
    B = int(B)
    planes = labels_out.f32(LABEL_PLANES * B * HORIZONS).reshape(LABEL_PLANES, B, HORIZONS)
    lab = labels.f32(B * PERCEPTION_LOGITS).reshape(B, 3, HORIZONS)
    msk = mask.f32(B * PERCEPTION_LOGITS).reshape(B, 3, HORIZONS)
    lab[:] = planes[0:3].transpose(1, 0, 2)
    msk[:, 0] = planes[5]
    msk[:, 1] = planes[6]
    msk[:, 2] = planes[6]


@reference(BRIDGE_AFTER_SIM)
def _bridge_after_sim(launch, pos, trade_log, prev_trades, closed, closed_pnl, drawdown, money_scale, trade_cap, B):
    B, cap = int(B), int(trade_cap)
    p = pos.view(POSITION_DTYPE, B)
    log = trade_log.view(TRADE_DTYPE, B * cap).reshape(B, cap)
    now = p["trades"].astype(np.uint32)
    prev = prev_trades.u32(B)
    n = (now - prev).astype(np.uint32)
    pnl = np.zeros(B, np.int64)
    for k in range(int(min(n.max(initial=0), cap))):  # at most one close a step in practice
        take = n > k
        rows = np.flatnonzero(take)
        pnl[rows] += log[rows, (now[rows] - 1 - k) % cap]["pnl"]
    closed.u32(B)[:] = n
    closed_pnl.f32(B)[:] = (pnl.astype(np.float64) * np.float64(np.float32(money_scale))).astype(np.float32)
    prev[:] = now
    drawdown.f32(B)[:] = trade_drawdown(p, money_scale)
