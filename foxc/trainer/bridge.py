"""The trainer's backtest step (cuda/trainer/bridge.cu): the simulator's step, the bridges between the trainer's
components, the reward; its numpy reference calls each part's in the kernel's order."""
from __future__ import annotations

import numpy as np

from ..data.features import HORIZONS, LABEL_PLANES
from ..agent.kernels import agent_reward, trade_drawdown
from ..driver import KernelSpec, f32, ptr, reference
from ..lobsim.kernels import LOBSIM_STEP, LOBSIM_STEP_PASSIVE, lobsim_step, lobsim_step_passive
from ..lobsim.layout import POSITION_DTYPE, TRADE_DTYPE

PERCEPTION_LOGITS = 3 * HORIZONS

BACKTEST_STEP = KernelSpec("backtest_step", "trainer/bridge", (
    *LOBSIM_STEP.params,
    ptr("prev_trades"), ptr("closed"), ptr("closed_pnl"), ptr("drawdown"), f32("money_scale"),
    ptr("isv"), ptr("reward_raw"), ptr("reward_scaled"), ptr("clipped"),
    ptr("labels_out"), ptr("labels"), ptr("mask")),
    doc="lobsim_step's parts, then closed trades and drawdown, the reward and the perception targets, for each "
        "backtest (one thread each; lobsim_step's arguments first)")
TRAINER_PARAMS = BACKTEST_STEP.params[len(LOBSIM_STEP.params):]
BACKTEST_STEP_PASSIVE = KernelSpec("backtest_step_passive", "trainer/bridge_passive",
                                   (*LOBSIM_STEP_PASSIVE.params, *TRAINER_PARAMS),
                                   doc="backtest_step with lobsim_step_passive's parts (--orders passive)")


def closed_trades(pos, trade_log, prev_trades, closed, closed_pnl, drawdown, money_scale, trade_cap, B):
    """Trades closed this step, their net PnL and the open trade's drawdown (closed_trades in bridge.cu)."""
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


def perception_targets(labels_out, labels, mask, B):
    """The perception head's targets and weights from the gathered label planes (perception_targets in bridge.cu)."""
    B = int(B)
    planes = labels_out.f32(LABEL_PLANES * B * HORIZONS).reshape(LABEL_PLANES, B, HORIZONS)
    lab = labels.f32(B * PERCEPTION_LOGITS).reshape(B, 3, HORIZONS)
    msk = mask.f32(B * PERCEPTION_LOGITS).reshape(B, 3, HORIZONS)
    lab[:] = planes[0:3].transpose(1, 0, 2)
    msk[:, 0] = planes[5]
    msk[:, 1] = planes[6]
    msk[:, 2] = planes[6]


def after_step(pos, trade_log, rewards, trade_cap, n, prev_trades, closed, closed_pnl, drawdown, money_scale, isv,
               reward_raw, reward_scaled, clipped, labels_out, labels, mask):
    """What backtest_step and backtest_step_passive do after the simulator's step, in the kernels' order."""
    closed_trades(pos, trade_log, prev_trades, closed, closed_pnl, drawdown, money_scale, trade_cap, n)
    B = int(n)
    out = agent_reward(rewards.f32(B), drawdown.f32(B), isv.f32())
    for mem, values in zip((reward_raw.f32(B), reward_scaled.f32(B), clipped.u32(B)), out):
        mem[:] = values
    perception_targets(labels_out, labels, mask, B)


@reference(BACKTEST_STEP)
def _backtest_step(launch, *args):
    sim = dict(zip((p.name for p in LOBSIM_STEP.params), args))
    lobsim_step(launch, *args[:len(LOBSIM_STEP.params)])
    after_step(sim["pos"], sim["trade_log"], sim["rewards"], sim["trade_cap"], sim["n"], *args[len(LOBSIM_STEP.params):])


@reference(BACKTEST_STEP_PASSIVE)
def _backtest_step_passive(launch, *args):
    k = len(LOBSIM_STEP_PASSIVE.params)
    sim = dict(zip((p.name for p in LOBSIM_STEP_PASSIVE.params), args))
    lobsim_step_passive(launch, *args[:k])
    after_step(sim["pos"], sim["trade_log"], sim["rewards"], sim["trade_cap"], sim["n"], *args[k:])
