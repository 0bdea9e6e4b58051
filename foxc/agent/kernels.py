"""Declarations and numpy references of the agent kernels (cuda/agent/*.cu)."""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import STEP_WRAP, slot_index as S
from ..rng import uniform24, xorshift32
from .layout import (FLAG_GATED, FLAG_STOPPED, FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, N_ACTIONS,
                     N_STATS, SHORT, STAT_INDEX, STATS_BLOCK)

F = np.float32

AGENT_ACT = KernelSpec("agent_act", "agent/act", (
    ptr("policy_logits"), ptr("rng_state"), ptr("position_lots"), ptr("drawdown"), ptr("isv"),
    ptr("actions"), ptr("log_prob"), ptr("probs"), ptr("flags"), ptr("stop_loss"), i32("B")))
AGENT_REWARD = KernelSpec("agent_reward", "agent/reward", (
    ptr("pnl_delta"), ptr("drawdown"), ptr("isv"), ptr("reward_raw"), ptr("reward_scaled"), ptr("clipped"),
    i32("B")))
AGENT_STEP_STATS = KernelSpec("agent_step_stats", "agent/stats", (
    ptr("probs"), ptr("actions"), ptr("flags"), ptr("reward_raw"), ptr("reward_scaled"), ptr("clipped"),
    ptr("closed"), ptr("closed_pnl"), ptr("stats"), i32("B")))
AGENT_REWARD_CONTROLLER = KernelSpec("agent_reward_controller", "agent/controllers", (ptr("isv"), ptr("stats")))
AGENT_LR_PLATEAU = KernelSpec("agent_lr_plateau", "agent/controllers", (ptr("isv"), ptr("losses")))
AGENT_FUSED_CONTROLLERS = KernelSpec("agent_fused_controllers", "agent/controllers", (ptr("isv"), ptr("stats")))

BLOCK = 256


def per_backtest_grid(B: int) -> int:
    return max(1, (int(B) + BLOCK - 1) // BLOCK)


@reference(AGENT_ACT)
def _agent_act(launch, policy_logits, rng_state, position_lots, drawdown, isv, actions, log_prob, probs, flags,
               stop_loss, B):
    B = int(B)
    v = isv.f32()
    logits = policy_logits.f32(B * N_ACTIONS).reshape(B, N_ACTIONS)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    s = np.zeros(B, F)
    for a in range(N_ACTIONS):  # the kernel's summation order
        s += e[:, a]
    eps = F(min(max(v[S("exploration_floor")], F(0)), F(0.2)))
    keep = F(1) - F(N_ACTIONS) * eps
    p = (keep * (e / s[:, None]) + eps).astype(F)
    probs.f32(B * N_ACTIONS)[:] = p.reshape(-1)
    state = xorshift32(rng_state.u32(B))
    rng_state.u32(B)[:] = state
    u = uniform24(state)
    action = np.full(B, N_ACTIONS - 1, np.int32)
    cdf = np.zeros(B, F)
    chosen = np.zeros(B, bool)
    for a in range(N_ACTIONS):
        cdf = (cdf + p[:, a]).astype(F)
        hit = ~chosen & (u < cdf)
        action[hit] = a
        chosen |= hit
    flag = np.zeros(B, np.uint32)
    p_taken = p[np.arange(B), action]
    gated = ((action == LONG) | (action == SHORT)) & (p_taken < v[S("gate_threshold")])
    action[gated] = HOLD
    flag[gated] |= FLAG_GATED
    lots = position_lots.i32(B)
    scale = F(max(v[S("mean_abs_pnl_ema")], F(1e-6)))
    stop = (lots != 0) & ((drawdown.f32(B) / scale) > v[S("stop_loss_threshold")])
    action[stop] = np.where(lots[stop] > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT)
    flag[stop] |= FLAG_STOPPED
    actions.i32(B)[:] = action
    log_prob.f32(B)[:] = np.log(p[np.arange(B), action])
    flags.u32(B)[:] = flag
    stop_loss.u32(B)[:] = (flag & FLAG_STOPPED) != 0


@reference(AGENT_REWARD)
def _agent_reward(launch, pnl_delta, drawdown, isv, reward_raw, reward_scaled, clipped, B):
    B = int(B)
    v = isv.f32()
    penalty = v[S("drawdown_penalty_rate")] * np.maximum(drawdown.f32(B), F(0)) / max(v[S("mean_abs_pnl_ema")], F(1e-6))
    raw = (v[S("reward_scale")] * pnl_delta.f32(B) - np.maximum(penalty, F(0))).astype(F)
    scaled = (raw / np.sqrt(v[S("popart_var")] + F(1e-8))).astype(F)
    lo, hi = v[S("reward_clamp_lo")], v[S("reward_clamp_hi")]
    reward_raw.f32(B)[:] = raw
    reward_scaled.f32(B)[:] = np.minimum(np.maximum(scaled, lo), hi)
    clipped.u32(B)[:] = ((scaled < lo) | (scaled > hi)).astype(np.uint32)


def block_reduce(values: np.ndarray) -> float:
    """Sum in the kernels' order: thread t takes t, t + 256, ... in turn, then a halving tree."""
    values = np.asarray(values, np.float64)
    rows = -(-values.size // STATS_BLOCK)
    lanes = np.zeros(rows * STATS_BLOCK, np.float64)
    lanes[:values.size] = values
    acc = np.zeros(STATS_BLOCK, np.float64)
    for row in lanes.reshape(rows, STATS_BLOCK):
        acc += row
    stride = STATS_BLOCK // 2
    while stride:
        acc[:stride] += acc[stride:2 * stride]
        stride //= 2
    return float(acc[0])


@reference(AGENT_STEP_STATS)
def _agent_step_stats(launch, probs, actions, flags, reward_raw, reward_scaled, clipped, closed, closed_pnl, stats, B):
    B = int(B)
    p = probs.f32(B * N_ACTIONS).reshape(B, N_ACTIONS)
    h = np.zeros(B, F)
    for a in range(N_ACTIONS):
        h = (h - p[:, a] * np.log(p[:, a])).astype(F)
    act, flag = actions.i32(B), flags.u32(B)
    raw = reward_raw.f32(B).astype(np.float64)
    n_closed = closed.u32(B)
    pnl = closed_pnl.f32(B).astype(np.float64)
    n = float(B) if B > 0 else 1.0
    out = stats.f64(N_STATS)
    out[STAT_INDEX["n"]] = B
    out[STAT_INDEX["entropy_mean"]] = block_reduce(h) / n
    out[STAT_INDEX["hold_frac"]] = block_reduce(act == HOLD) / n
    out[STAT_INDEX["gated_frac"]] = block_reduce((flag & FLAG_GATED) != 0) / n
    out[STAT_INDEX["stopped_frac"]] = block_reduce((flag & FLAG_STOPPED) != 0) / n
    out[STAT_INDEX["reward_raw_mean"]] = block_reduce(raw) / n
    out[STAT_INDEX["reward_raw_sq_mean"]] = block_reduce(raw * raw) / n
    out[STAT_INDEX["reward_scaled_mean"]] = block_reduce(reward_scaled.f32(B)) / n
    out[STAT_INDEX["clipped_frac"]] = block_reduce(clipped.u32(B) != 0) / n
    out[STAT_INDEX["closed_trades"]] = block_reduce(n_closed)
    out[STAT_INDEX["closed_abs_pnl_sum"]] = block_reduce(np.where(n_closed != 0, np.abs(pnl), 0.0))
    out[STAT_INDEX["closed_wins"]] = block_reduce((n_closed != 0) & (pnl > 0))
    out[STAT_INDEX["closed_pnl_sum"]] = block_reduce(np.where(n_closed != 0, pnl, 0.0))


def _ema(prev, obs, rate):
    return F(obs) if prev == 0 else F((F(1) - rate) * prev + rate * F(obs))


def _step(v) -> float:
    return float(F(v[S("step_hi")] * F(STEP_WRAP) + v[S("step_lo")]))


@reference(AGENT_REWARD_CONTROLLER)
def _agent_reward_controller(launch, isv, stats):
    v, st = isv.f32(), stats.f64(N_STATS)
    r = v[S("popart_rate")]
    mean_b = F(st[STAT_INDEX["reward_raw_mean"]])
    var_b = F(max(F(st[STAT_INDEX["reward_raw_sq_mean"]] - st[STAT_INDEX["reward_raw_mean"]] ** 2), F(0)))
    mean, var = v[S("popart_mean")], v[S("popart_var")]
    d = F(mean_b - mean)
    v[S("popart_mean")] = (F(1) - r) * mean + r * mean_b
    v[S("popart_var")] = max(F((F(1) - r) * var + r * var_b + r * (F(1) - r) * d * d), F(1e-8))
    rate = v[S("loss_ema_rate")]
    clip = F((F(1) - rate) * v[S("reward_clip_frac_ema")] + rate * F(st[STAT_INDEX["clipped_frac"]]))
    v[S("reward_clip_frac_ema")] = clip
    target, step = v[S("reward_clip_target")], v[S("reward_clamp_rate")]
    factor = F(1) + step if clip > target else F(1) - step if clip < F(0.25) * target else F(1)
    lo_b, hi_b = v[S("reward_clamp_min")], v[S("reward_clamp_max")]
    v[S("reward_clamp_hi")] = min(max(F(v[S("reward_clamp_hi")] * factor), lo_b), hi_b)
    v[S("reward_clamp_lo")] = -min(max(F(-v[S("reward_clamp_lo")] * factor), lo_b), hi_b)
    closed = st[STAT_INDEX["closed_trades"]]
    if closed > 0:
        per_trade = F(st[STAT_INDEX["closed_abs_pnl_sum"]] / closed)
        v[S("mean_abs_pnl_ema")] = (F(1) - rate) * v[S("mean_abs_pnl_ema")] + rate * per_trade


_HEADS = [  # loss index, lr slot(s), ema, best, count
    (0, ("lr_q",), "loss_ema_q", "best_loss_q", "plateau_count_q"),
    (1, ("lr_policy",), "loss_ema_pi", "best_loss_pi", "plateau_count_pi"),
    (2, ("lr_value",), "loss_ema_v", "best_loss_v", "plateau_count_v"),
    (3, ("lr_perception", "lr_encoder"), "loss_ema_bce", "best_loss_bce", "plateau_count_bce"),
]


@reference(AGENT_LR_PLATEAU)
def _agent_lr_plateau(launch, isv, losses):
    v, obs = isv.f32(), losses.f32(4)
    warming_up = _step(v) < v[S("lr_warmup_steps")]
    for index, lr_slots, ema_slot, best_slot, count_slot in _HEADS:
        loss = obs[index]
        if not np.isfinite(loss):
            continue
        e = _ema(v[S(ema_slot)], loss, v[S("loss_ema_rate")])
        v[S(ema_slot)] = e
        if warming_up or v[S(best_slot)] == 0 or e < F(v[S(best_slot)] * v[S("lr_plateau_improvement")]):
            v[S(best_slot)], v[S(count_slot)] = e, 0
            continue
        count = F(v[S(count_slot)] + F(1))
        if count < v[S("lr_plateau_patience")]:
            v[S(count_slot)] = count
            continue
        for lr in lr_slots:
            v[S(lr)] = max(v[S("lr_min")], F(v[S(lr)] * v[S("lr_decay_factor")]))
        v[S(best_slot)], v[S(count_slot)] = e, 0


@reference(AGENT_FUSED_CONTROLLERS)
def _agent_fused_controllers(launch, isv, stats):
    v, st = isv.f32(), stats.f64(N_STATS)
    steps_left = F(max(F(v[S("per_beta_anneal_steps")] - F(_step(v))), F(1)))
    beta = v[S("per_beta")]
    v[S("per_beta")] = min(F(beta + (F(1) - beta) / steps_left), F(1))
    h = _ema(v[S("action_entropy_ema")], st[STAT_INDEX["entropy_mean"]], v[S("loss_ema_rate")])
    v[S("action_entropy_ema")] = h
    coef = F(v[S("entropy_coef")] * np.exp(F(v[S("entropy_coef_rate")] * F(v[S("entropy_target")] - h))))
    v[S("entropy_coef")] = min(max(coef, v[S("entropy_coef_min")]), v[S("entropy_coef_max")])
    v[S("gamma")] = min(max(v[S("gamma")], F(0)), F(0.9999))
    v[S("tau")] = min(max(v[S("tau")], F(0)), F(1))
    v[S("per_alpha")] = min(max(v[S("per_alpha")], F(0)), F(1))
