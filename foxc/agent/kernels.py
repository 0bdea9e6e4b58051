"""Declarations and numpy references of the agent kernels (cuda/agent/*.cu) and of the reward (agent_reward.cuh)."""
from __future__ import annotations

import numpy as np

from ..data.features import F_SPREAD, FEATURES
from ..driver import KernelSpec, f32, i32, i64, ptr, reference
from ..data.record import LEVELS, PRICE_UNDEF, SNAPSHOT_DTYPE
from ..lobsim.layout import POSITION_DTYPE, QUEUE_LIVE, QUEUE_NONE, split_actions
from ..isv.registry import N_SLOTS, STEP_WRAP, slot_index as S
from ..rng import uniform24, xorshift32
from .diagnostics import write_frame
from .layout import (EXPLORE_QUOTE, N_PASSIVE_ACTIONS, N_QUOTE_FEATURES, QUOTE_FEATURES, ACTOR_POLICY, FLAG_GATED, FRAME_LEN, GATE_HOLD_EMA_RATE, GATE_THRESHOLD_MAX, GATE_THRESHOLD_MIN,
                     LOSS_CLAMP_GAIN, LOSS_CLAMP_MAX, LOSS_CLAMP_MIN, LOSS_NAMES, FLAG_STOPPED, FLAT_FROM_LONG,
                     FLAT_FROM_SHORT, HOLD, LONG, N_ACTIONS, N_FRAME_EXTRAS, N_POSITION_FEATURES, N_STATS, POS_INDEX,
                     SHORT, SPREAD_CAP_TICKS, STAT_INDEX, STATS_BLOCK, TIME_SCALE_STEPS, UNREALIZED_SCALE_TICKS,
                     valid_actions)

F = np.float32

AGENT_STATE = KernelSpec("agent_state", "agent/state", (
    ptr("h"), ptr("pos"), ptr("features"), ptr("trade_steps"), ptr("prev_lots"), ptr("state"), ptr("lots"),
    ptr("drawdown"), i64("tick"), f32("money_scale"), i32("D"), i32("K"), i32("B")),
    doc="state[b] = h[b] then the position features, lots and the open trade's drawdown; grid B, block STATE_BLOCK")
AGENT_ACT = KernelSpec("agent_act", "agent/act", (
    ptr("q"), ptr("policy_logits"), ptr("rng_state"), ptr("explore"), ptr("position_lots"), ptr("drawdown"), ptr("isv"),
    ptr("actions"), ptr("log_prob"), ptr("probs"), ptr("flags"), ptr("stop_loss"), i32("actor"), i32("greedy"),
    i32("B")))
AGENT_ACT_QUOTES = KernelSpec("agent_act_quotes", "agent/act", (*AGENT_ACT.params, ptr("market"), ptr("quotes")),
                              doc="agent_act for the agent with resting orders (9 actions); writes the simulator's "
                                  "market actions and quote codes [2, B] too")
AGENT_STEP_END = KernelSpec("agent_step_end", "agent/step_end", (
    ptr("probs"), ptr("actions"), ptr("flags"), ptr("reward_raw"), ptr("reward_scaled"), ptr("clipped"),
    ptr("closed"), ptr("closed_pnl"), ptr("lots"), i32("B"), ptr("losses"), ptr("stats"), ptr("isv"), ptr("isv_host"),
    ptr("extras"), ptr("isv_slots"), i32("n_isv"), ptr("ring"), i32("ring_len")),
    doc="the step's statistics, the controllers, the diagnostics frame, the step counter and the ISV published "
        "to the host; grid 1, block STATS_BLOCK")
AGENT_STEP_END_QUOTES = KernelSpec("agent_step_end_quotes", "agent/step_end_quotes", AGENT_STEP_END.params,
                                   doc="agent_step_end for the agent with resting orders: probs [B, 9]")
AGENT_STATE_QUOTES = KernelSpec("agent_state_quotes", "agent/state", (
    *AGENT_STATE.params, ptr("snaps"), ptr("cursor"), ptr("q_px"), ptr("q_state"), ptr("q_front"), ptr("q_since"),
    ptr("quote_since"), ptr("quote_steps")),
    doc="agent_state for the agent with resting orders: state [B, D + 12], the quotes' features from the "
        "simulator's order state and the snapshot at the cursor")
# the kernels of each action count (--orders market: 5, passive: 9)
ACT_KERNELS = {N_ACTIONS: AGENT_ACT, N_PASSIVE_ACTIONS: AGENT_ACT_QUOTES}
STEP_END_KERNELS = {N_ACTIONS: AGENT_STEP_END, N_PASSIVE_ACTIONS: AGENT_STEP_END_QUOTES}

BLOCK = 256


def per_backtest_grid(B: int) -> int:
    return max(1, (int(B) + BLOCK - 1) // BLOCK)


def sign(x):
    return np.where(x > 0, 1, np.where(x < 0, -1, 0))


def trade_drawdown(p, scale) -> np.ndarray:
    """The open trade's fall from its peak: trail_hwm - unrealized PnL while holding, else 0 (position.h)."""
    fall = np.maximum(p["trail_hwm"] - p["unrealized_pnl"], 0)
    fall = np.where(p["lots"] != 0, fall, 0)
    return (fall.astype(np.float64) * np.float64(np.float32(scale))).astype(np.float32)


def position_state(W, h, pos, features, trade_steps, prev_lots, state, lots, drawdown, tick, money_scale, D, K, B):
    """agent_state_body<W>: the rows [B, D + W] with h and the position's features; returns the rows."""
    B, D, K = int(B), int(D), int(K)
    row = state.f32(B * (D + W)).reshape(B, D + W)
    row[:, :D] = h.f32(B * D).reshape(B, D)
    p = pos.view(POSITION_DTYPE, B)
    held_lots = p["lots"].astype(np.int64)
    side = sign(held_lots)
    steps = trade_steps.i32(B)
    prev = prev_lots.i32(B)
    steps[:] = np.where(side == 0, 0, np.where(side == sign(prev), steps + 1, 1))
    prev[:] = p["lots"]
    lots.i32(B)[:] = p["lots"]
    drawdown.f32(B)[:] = trade_drawdown(p, money_scale)
    held = np.where(side == 0, 1, np.abs(held_lots)).astype(np.float64)
    unrealized = np.where(side == 0, 0.0, p["unrealized_pnl"].astype(np.float64) / (held * float(tick))).astype(F)
    spread = features.f32(K * B * FEATURES).reshape(K, B, FEATURES)[K - 1, :, F_SPREAD]
    row[:, D + POS_INDEX["side"]] = side
    row[:, D + POS_INDEX["unrealized"]] = np.tanh(unrealized / F(UNREALIZED_SCALE_TICKS))
    row[:, D + POS_INDEX["time_in_trade"]] = np.tanh(steps.astype(F) / F(TIME_SCALE_STEPS))
    row[:, D + POS_INDEX["spread"]] = np.minimum(spread, F(SPREAD_CAP_TICKS))
    return row


@reference(AGENT_STATE)
def _agent_state(launch, *args):
    position_state(N_POSITION_FEATURES, *args)


@reference(AGENT_STATE_QUOTES)
def _agent_state_quotes(launch, h, pos, features, trade_steps, prev_lots, state, lots, drawdown, tick, money_scale, D,
                        K, B, snaps, cursor, q_px, q_state, q_front, q_since, quote_since, quote_steps):
    row = position_state(N_POSITION_FEATURES + N_QUOTE_FEATURES, h, pos, features, trade_steps, prev_lots, state, lots,
                         drawdown, tick, money_scale, D, K, B)
    B, D, per = int(B), int(D), len(QUOTE_FEATURES)
    s = snaps.view(SNAPSHOT_DTYPE)[cursor.i64(B)]
    st, px, front = q_state.u32(2 * B).reshape(2, B), q_px.i64(2 * B).reshape(2, B), q_front.f64(2 * B).reshape(2, B)
    since, seen_since = q_since.i64(2 * B).reshape(2, B), quote_since.i64(2 * B).reshape(2, B)
    steps = quote_steps.i32(2 * B).reshape(2, B)
    for side, name in enumerate(("bid", "ask")):
        none = st[side] == QUEUE_NONE
        n = np.where((steps[side] > 0) & (seen_since[side] == since[side]), steps[side] + 1, 1)
        steps[side] = np.where(none, 0, n)
        seen_since[side] = np.where(none, 0, since[side])
        prices, sizes = s[f"{name}_px"], s[f"{name}_sz"]
        shown = np.zeros(B, np.float64)
        for lv in range(LEVELS):
            shown = np.where(prices[:, lv] == px[side], sizes[:, lv], shown)
        touch = prices[:, 0]
        gap = np.where(touch == PRICE_UNDEF, 0.0, (touch - px[side] if side == 0 else px[side] - touch) / float(tick))
        live = st[side] == QUEUE_LIVE
        f = row[:, D + N_POSITION_FEATURES + side * per:D + N_POSITION_FEATURES + (side + 1) * per]
        f[:, 0] = np.where(live, F(1), F(0.5))
        f[:, 1] = np.where(live, np.minimum((front[side] / np.maximum(shown, 1.0)).astype(F), F(1)), F(1))
        f[:, 2] = np.minimum(np.maximum(gap.astype(F), F(0)), F(SPREAD_CAP_TICKS))
        f[:, 3] = np.tanh(steps[side].astype(F) / F(TIME_SCALE_STEPS))
        f[none] = 0


def epsilon(v) -> np.float32:
    """agent_epsilon: the behaviour policy's epsilon at the ISV's step, in the kernel's float32 order."""
    steps = v[S("explore_eps_steps")]
    left = max(F(F(1) - F(F(_step(v)) / steps)), F(0)) if steps > 0 else F(0)
    start, end = v[S("explore_eps_start")], v[S("explore_eps_end")]
    return F(min(max(F(end + F(F(start - end) * left)), F(0)), F(1)))


def mixture(score: np.ndarray, valid: np.ndarray, best: np.ndarray, actor: int, eps) -> np.ndarray:
    """The epsilon mixture over the valid actions agent_act writes as probs when not exploring (float32)."""
    B = len(score)
    onehot = np.arange(score.shape[1])[None, :] == best[:, None]
    uniform = (F(eps) / valid.sum(axis=1).astype(F)).astype(F)[:, None]
    if actor == ACTOR_POLICY:
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.where(valid, np.exp((score - score[np.arange(B), best][:, None]).astype(F)), F(0)).astype(F)
        total = np.zeros(B, F)
        for a in range(score.shape[1]):  # the kernel's summation order
            total = (total + e[:, a]).astype(F)
        p = (F(1) - F(eps)) * (e / total[:, None]).astype(F) + uniform
    else:
        p = np.where(onehot, (F(1) - F(eps)) + uniform, uniform)
    return np.where(valid, p, F(0)).astype(F)


def best_valid(score: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The valid action with the highest score, first on ties (NaN scores never win)."""
    best = np.full(len(score), HOLD, np.int64)
    best_score = score[:, HOLD].copy()
    for a in range(1, score.shape[1]):
        better = valid[:, a] & (score[:, a] > best_score)
        best[better], best_score[better] = a, score[better, a]
    return best


def margin_best(score: np.ndarray, valid: np.ndarray, best: np.ndarray, side: np.ndarray, margin) -> np.ndarray:
    """agent_margin_best: `best` unless it opens or reverses a position by no more than `margin` over staying out
    (HOLD flat, the exit holding); then the better of staying out and keeping the position, HOLD on ties."""
    rows = np.arange(len(score))
    out = np.where(side > 0, FLAT_FROM_LONG, np.where(side < 0, FLAT_FROM_SHORT, HOLD))
    opens = (best == LONG) | (best == SHORT)
    sure = (score[rows, best] - score[rows, out]).astype(F) > F(margin)
    fallback = np.where(valid[:, HOLD] & (score[:, HOLD] >= score[rows, out]), HOLD, out)
    return np.where(opens & ~sure, fallback, best)


def target_of(action, side):
    """The position (-1, 0, +1) an action leads to from `side` (agent_target)."""
    return np.where(action == LONG, 1, np.where(action == SHORT, -1, np.where(action == HOLD, side, 0)))


def action_to(target, side):
    """The action that reaches `target` from `side` (agent_action_to)."""
    return np.where(target == side, HOLD, np.where(target > 0, LONG, np.where(target < 0, SHORT,
                    np.where(side > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT))))


def gate_open(v) -> bool:
    """agent_gate_open: enabled, warmed up and holding no more than gate_max_hold_frac."""
    return bool(v[S("gate_enabled")] >= F(0.5) and F(_step(v)) >= v[S("gate_warmup_steps")]
                and v[S("hold_frac_ema")] <= v[S("gate_max_hold_frac")])


def confidence(score, valid, best, action, actor, v) -> np.ndarray:
    """The head's Boltzmann probability of `action` among the valid actions (the gate's confidence)."""
    B = len(score)
    temp = F(1) if actor == ACTOR_POLICY else F(max(v[S("distill_temperature")], F(1e-6)))
    top = score[np.arange(B), best]
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(valid, np.exp(((score - top[:, None]) / temp).astype(F)), F(0)).astype(F)
        total = np.zeros(B, F)
        for a in range(score.shape[1]):  # the kernel's summation order
            total = (total + e[:, a]).astype(F)
        return (np.exp(((score[np.arange(B), action] - top) / temp).astype(F)) / total).astype(F)


def act(A: int, q, policy_logits, rng_state, explore, position_lots, drawdown, isv, actions, log_prob, probs, flags,
        stop_loss, actor, greedy, B, market=None, quotes=None):
    """agent_act_body<A>: agent_act (A = 5) and agent_act_quotes (A = 9, which also writes market and quotes)."""
    B, actor, greedy = int(B), int(actor), bool(greedy)
    v = isv.f32()
    lots = position_lots.i32(B)
    side = sign(lots)
    valid = valid_actions(side, A)
    score = (policy_logits if actor == ACTOR_POLICY else q).f32(B * A).reshape(B, A)
    best = best_valid(score, valid)
    if greedy:
        best = margin_best(score, valid, best, side, v[S("entry_margin")])
    x1 = xorshift32(rng_state.u32(B))
    x2 = xorshift32(x1)
    rng_state.u32(B)[:] = x2
    u1, u2 = uniform24(x1), uniform24(x2)
    action = best.copy()
    held = explore.i32(B).copy()
    segment = np.zeros(B, np.int64) if greedy else held.astype(np.int64)
    segment[(segment != 0) & (u1 < F(F(1) / max(v[S("explore_hold_steps")], F(1))))] = 0  # the segment ends
    if greedy:
        p = (np.arange(A)[None, :] == best[:, None]).astype(F)
    else:
        eps = epsilon(v)
        p = mixture(score, valid, best, actor, eps)
        going = segment != 0
        quoting = going & (segment >= EXPLORE_QUOTE)  # a segment repeating a quote action (A = 9 only)
        action[going] = np.where(quoting[going], segment[going] - EXPLORE_QUOTE, action_to(segment[going] - 2, side[going]))
        p[going] = (np.arange(A)[None, :] == action[going][:, None]).astype(F)
        start = ~going & (held == 0) & (u1 < eps)
        n_valid = valid.sum(axis=1)
        k = np.minimum((u2 * n_valid.astype(F)).astype(np.int64), n_valid - 1)
        nth = np.argmax(np.cumsum(valid, axis=1) > k[:, None], axis=1)  # the k-th valid action
        action[start] = nth[start]
        segment[start] = np.where(action[start] >= N_ACTIONS, EXPLORE_QUOTE + action[start],
                                  target_of(action[start], side[start]) + 2)
        if actor == ACTOR_POLICY:
            sample = ~going & ~start
            uniform = (F(eps) / n_valid.astype(F)).astype(F)
            part = np.where(valid, (p - uniform[:, None]).astype(F), F(0))
            total, cdf = np.zeros(B, F), np.zeros(B, F)
            for a in range(A):
                total = (total + part[:, a]).astype(F)
            chosen = np.zeros(B, bool)
            for a in range(A):
                cdf = (cdf + part[:, a]).astype(F)
                hit = sample & ~chosen & valid[:, a] & ((u2 * total).astype(F) < cdf)
                action[hit] = a
                chosen |= hit
        explore.i32(B)[:] = segment
    probs.f32(B * A)[:] = p.reshape(-1)
    p_taken = p[np.arange(B), action]
    flag = np.zeros(B, np.uint32)
    if gate_open(v):
        gated = ((action == LONG) | (action == SHORT)) & (confidence(score, valid, best, action, actor, v)
                                                          < v[S("gate_threshold")])
        action[gated] = HOLD
        flag[gated] |= FLAG_GATED
    threshold = v[S("stop_loss_threshold")]
    scale = F(max(v[S("mean_abs_pnl_ema")], F(1e-6)))
    stop = (lots != 0) & (threshold > 0) & ((drawdown.f32(B) / scale) > threshold)
    action[stop] = np.where(lots[stop] > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT)
    flag[stop] |= FLAG_STOPPED
    actions.i32(B)[:] = action
    with np.errstate(divide="ignore"):
        log_prob.f32(B)[:] = np.log(p_taken)
    flags.u32(B)[:] = flag
    stop_loss.u32(B)[:] = (flag & FLAG_STOPPED) != 0
    if A > N_ACTIONS:
        market.i32(B)[:], quotes.i32(2 * B)[:] = (x.reshape(-1) for x in split_actions(action))


def of_actions(body, A: int):
    """The reference of a kernel family's member for A actions: `body(A, *its arguments)`."""
    return lambda launch, *args: body(A, *args)


for _A, _spec in ACT_KERNELS.items():  # agent_act and agent_act_quotes
    reference(_spec)(of_actions(act, _A))


def agent_reward(pnl_delta: np.ndarray, drawdown: np.ndarray, v: np.ndarray):
    """(reward_raw, reward_scaled, clipped) per backtest from the equity change, the open trade's drawdown (float32)
    and the ISV v, as agent_reward() in agent_reward.cuh (called by the trainer's backtest_step)."""
    penalty = v[S("drawdown_penalty_rate")] * np.maximum(drawdown, F(0)) / max(v[S("mean_abs_pnl_ema")], F(1e-6))
    raw = (v[S("reward_scale")] * pnl_delta - np.maximum(penalty, F(0))).astype(F)
    scaled = (raw / np.sqrt(v[S("popart_var")] + F(1e-8))).astype(F)
    lo, hi = v[S("reward_clamp_lo")], v[S("reward_clamp_hi")]
    return raw, np.minimum(np.maximum(scaled, lo), hi), ((scaled < lo) | (scaled > hi)).astype(np.uint32)


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


def step_stats(probs, actions, flags, reward_raw, reward_scaled, clipped, closed, closed_pnl, lots) -> np.ndarray:
    """The step's statistics (float64 [N_STATS]) from B backtests' arrays, in agent_step_end's order; probs
    [B * A] (A = 5 or 9)."""
    B = len(actions)
    p = np.asarray(probs, F).reshape(B, -1)
    h = np.zeros(B, F)
    for a in range(p.shape[1]):
        with np.errstate(divide="ignore", invalid="ignore"):
            h = np.where(p[:, a] > 0, h - p[:, a] * np.log(p[:, a]), h).astype(F)
    raw = np.asarray(reward_raw, F).astype(np.float64)
    n_closed = np.asarray(closed)
    pnl = np.asarray(closed_pnl, F).astype(np.float64)
    n = float(B) if B > 0 else 1.0
    out = np.zeros(N_STATS, np.float64)
    out[STAT_INDEX["n"]] = B
    out[STAT_INDEX["entropy_mean"]] = block_reduce(h) / n
    out[STAT_INDEX["hold_frac"]] = block_reduce(actions == HOLD) / n
    out[STAT_INDEX["gated_frac"]] = block_reduce((flags & FLAG_GATED) != 0) / n
    out[STAT_INDEX["stopped_frac"]] = block_reduce((flags & FLAG_STOPPED) != 0) / n
    out[STAT_INDEX["reward_raw_mean"]] = block_reduce(raw) / n
    out[STAT_INDEX["reward_raw_sq_mean"]] = block_reduce(raw * raw) / n
    out[STAT_INDEX["reward_scaled_mean"]] = block_reduce(reward_scaled) / n
    out[STAT_INDEX["clipped_frac"]] = block_reduce(clipped != 0) / n
    out[STAT_INDEX["closed_trades"]] = block_reduce(n_closed)
    out[STAT_INDEX["closed_abs_pnl_sum"]] = block_reduce(np.where(n_closed != 0, np.abs(pnl), 0.0))
    out[STAT_INDEX["closed_wins"]] = block_reduce((n_closed != 0) & (pnl > 0))
    out[STAT_INDEX["closed_pnl_sum"]] = block_reduce(np.where(n_closed != 0, pnl, 0.0))
    out[STAT_INDEX["in_market_frac"]] = block_reduce(lots != 0) / n
    pos_n, neg_n = block_reduce(raw > 0), block_reduce(raw < 0)
    out[STAT_INDEX["reward_pos_mean"]] = block_reduce(np.where(raw > 0, raw, 0.0)) / pos_n if pos_n > 0 else 0.0
    out[STAT_INDEX["reward_neg_mean"]] = block_reduce(np.where(raw < 0, -raw, 0.0)) / neg_n if neg_n > 0 else 0.0
    return out


def _ema(prev, obs, rate):
    return F(obs) if prev == 0 else F((F(1) - rate) * prev + rate * F(obs))


def _step(v) -> float:
    return float(F(v[S("step_hi")] * F(STEP_WRAP) + v[S("step_lo")]))


def reward_controller(v: np.ndarray, st: np.ndarray):
    """PopArt, the reward clamp and the PnL scale: ISV slots v (float32, in place) from the step's statistics st."""
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
    pos, neg = F(st[STAT_INDEX["reward_pos_mean"]]), F(st[STAT_INDEX["reward_neg_mean"]])
    if pos > 0:
        v[S("reward_pos_ema")] = _ema(v[S("reward_pos_ema")], pos, rate)
    if neg > 0:
        v[S("reward_neg_ema")] = _ema(v[S("reward_neg_ema")], neg, rate)
    if v[S("reward_clamp_mode")] >= F(0.5):  # the seed's asymmetric clamp
        win, pos_e, neg_e = v[S("reward_clamp_win")], v[S("reward_pos_ema")], v[S("reward_neg_ema")]
        v[S("reward_clamp_hi")] = win
        if pos_e > 0 and neg_e > 0:
            ratio = F(F(LOSS_CLAMP_GAIN) * F(neg_e / pos_e))
            v[S("reward_clamp_lo")] = -win * max(F(LOSS_CLAMP_MIN), min(ratio, F(LOSS_CLAMP_MAX)))
    else:
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


def lr_plateau(v: np.ndarray, obs: np.ndarray):
    """Each head's loss EMA and learning-rate plateau decay: v in place from the step's losses obs[4]."""
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


def other_controllers(v: np.ndarray, st: np.ndarray):
    """PER beta, the entropy EMA, the gate's threshold and the ranges of gamma, tau and per_alpha: v in place."""
    steps_left = F(max(F(v[S("per_beta_anneal_steps")] - F(_step(v))), F(1)))
    beta = v[S("per_beta")]
    v[S("per_beta")] = min(F(beta + (F(1) - beta) / steps_left), F(1))
    h = _ema(v[S("action_entropy_ema")], st[STAT_INDEX["entropy_mean"]], v[S("loss_ema_rate")])
    v[S("action_entropy_ema")] = h
    if v[S("gate_enabled")] >= F(0.5):
        hold = F((F(1) - F(GATE_HOLD_EMA_RATE)) * v[S("hold_frac_ema")]
                 + F(GATE_HOLD_EMA_RATE) * F(st[STAT_INDEX["hold_frac"]]))
        v[S("hold_frac_ema")] = hold
        thr = F(v[S("gate_threshold")] + F(v[S("gate_lambda")] * F(v[S("gate_hold_target")] - hold)))
        v[S("gate_threshold")] = min(max(thr, F(GATE_THRESHOLD_MIN)), F(GATE_THRESHOLD_MAX))
    v[S("gamma")] = min(max(v[S("gamma")], F(0)), F(0.9999))
    v[S("tau")] = min(max(v[S("tau")], F(0)), F(1))
    v[S("per_alpha")] = min(max(v[S("per_alpha")], F(0)), F(1))


def step_increment(v: np.ndarray):
    """step_lo += 1, carrying into step_hi at 2^24 (float32 holds integers exactly only that far)."""
    lo, hi = S("step_lo"), S("step_hi")
    nxt = v[lo] + F(1)
    if nxt >= F(STEP_WRAP):
        v[lo] = F(0)
        v[hi] += F(1)
    else:
        v[lo] = nxt


def step_end(A: int, probs, actions, flags, reward_raw, reward_scaled, clipped, closed, closed_pnl, lots, B, losses,
             stats, isv, isv_host, extras, isv_slots, n_isv, ring, ring_len):
    """agent_step_end_body<A>: agent_step_end (A = 5) and agent_step_end_quotes (A = 9)."""
    B = int(B)
    st = stats.f64(N_STATS)
    st[:] = step_stats(probs.f32(B * A), actions.i32(B), flags.u32(B), reward_raw.f32(B),
                       reward_scaled.f32(B), clipped.u32(B), closed.u32(B), closed_pnl.f32(B), lots.i32(B))
    v, loss = isv.f32(N_SLOTS), losses.f32(len(LOSS_NAMES))
    reward_controller(v, st)
    lr_plateau(v, loss)
    other_controllers(v, st)
    write_frame(ring.f64(int(ring_len) * FRAME_LEN).reshape(int(ring_len), FRAME_LEN), st, loss, v,
                extras.f64(N_FRAME_EXTRAS), isv_slots.i32(int(n_isv)))
    step_increment(v)
    isv_host.f32(N_SLOTS)[:] = v


for _A, _spec in STEP_END_KERNELS.items():  # agent_step_end and agent_step_end_quotes
    reference(_spec)(of_actions(step_end, _A))
