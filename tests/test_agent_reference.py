"""The agent kernels' numpy references against naive scalar implementations and their invariants."""
import math

import numpy as np
import pytest

from agent_cases import STEP_END_OUT, act_inputs, isv_values, reward_inputs, stats_inputs, step_end_args
from foxc.agent import kernels as K
from foxc.agent.layout import (ACTOR_POLICY, ACTOR_Q, FLAG_GATED, FLAG_STOPPED, FLAT_FROM_LONG, FLAT_FROM_SHORT,
                               FRAME_FIELDS, FRAME_INDEX, FRAME_ISV, HOLD, LONG, LOSS_NAMES, N_ACTIONS, N_FRAME_EXTRAS,
                               N_POSITION_FEATURES, N_STATS, SHORT, SPREAD_CAP_TICKS, STAT_FIELDS, STAT_INDEX,
                               STATS_BLOCK, TIME_SCALE_STEPS, UNREALIZED_SCALE_TICKS, valid_actions)
from foxc.data.features import F_SPREAD, FEATURES
from foxc.isv.registry import STEP_WRAP, slot_index as S
from kernel_check import poisoned, run_kernel


def naive_xorshift(x):
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


def naive_act(q, logits, state, explore, lots, drawdown, isv, actor=ACTOR_Q, greedy=False):
    """One backtest at a time, in plain Python floats (float64)."""
    step = float(isv[S("step_hi")]) * 2 ** 24 + float(isv[S("step_lo")])
    left = max(1 - step / float(isv[S("explore_eps_steps")]), 0.0)
    eps = float(isv[S("explore_eps_end")]) + (float(isv[S("explore_eps_start")]) - float(isv[S("explore_eps_end")])) * left
    out = []
    for b in range(len(lots)):
        side = int(lots[b] > 0) - int(lots[b] < 0)
        valid = [a == HOLD or (a == LONG and side <= 0) or (a == SHORT and side >= 0) or
                 (a == FLAT_FROM_LONG and side > 0) or (a == FLAT_FROM_SHORT and side < 0) for a in range(N_ACTIONS)]
        score = logits[b] if actor == ACTOR_POLICY else q[b]
        best = max((a for a in range(N_ACTIONS) if valid[a]), key=lambda a: (score[a], -a))
        if greedy and best in (LONG, SHORT):  # opens or reverses: only by more than the margin over staying out
            out_of_it = FLAT_FROM_LONG if side > 0 else FLAT_FROM_SHORT if side < 0 else HOLD
            if not float(score[best]) - float(score[out_of_it]) > float(isv[S("entry_margin")]):
                best = HOLD if valid[HOLD] and score[HOLD] >= score[out_of_it] else out_of_it
        s1 = naive_xorshift(int(state[b]))
        s2 = naive_xorshift(s1)
        u1, u2 = (s1 >> 8) / 16777216.0, (s2 >> 8) / 16777216.0
        segment = 0 if greedy else int(explore[b])
        if segment and u1 < 1 / max(float(isv[S("explore_hold_steps")]), 1.0):
            segment = 0
        a = best
        if greedy:
            p = [1.0 if i == best else 0.0 for i in range(N_ACTIONS)]
        elif segment:
            t = segment - 2
            a = HOLD if t == side else LONG if t > 0 else SHORT if t < 0 else (FLAT_FROM_LONG if side > 0 else FLAT_FROM_SHORT)
            p = [1.0 if i == a else 0.0 for i in range(N_ACTIONS)]
        else:
            if actor == ACTOR_POLICY:
                e = [math.exp(score[i] - score[best]) if valid[i] else 0.0 for i in range(N_ACTIONS)]
                soft = [x / sum(e) for x in e]
            else:
                soft = [float(i == best) for i in range(N_ACTIONS)]
            p = [(1 - eps) * soft[i] + eps / sum(valid) if valid[i] else 0.0 for i in range(N_ACTIONS)]
            if explore[b] == 0 and u1 < eps:
                a = [i for i in range(N_ACTIONS) if valid[i]][min(int(u2 * sum(valid)), sum(valid) - 1)]
                segment = (1 if a == LONG else -1 if a == SHORT else side if a == HOLD else 0) + 2
            elif actor == ACTOR_POLICY:
                c = 0.0
                for i in range(N_ACTIONS):
                    c += soft[i]
                    if valid[i] and u2 < c:
                        a = i
                        break
        flag, lp = 0, math.log(p[a])
        gate = (isv[S("gate_enabled")] >= 0.5 and step >= isv[S("gate_warmup_steps")]
                and isv[S("hold_frac_ema")] <= isv[S("gate_max_hold_frac")])
        if a in (LONG, SHORT) and gate:
            temp = 1.0 if actor == ACTOR_POLICY else float(isv[S("distill_temperature")])
            z = [math.exp((score[i] - score[best]) / temp) if valid[i] else 0.0 for i in range(N_ACTIONS)]
            if z[a] / sum(z) < isv[S("gate_threshold")]:
                a, flag = HOLD, flag | FLAG_GATED
        threshold = float(isv[S("stop_loss_threshold")])
        if lots[b] != 0 and threshold > 0 and drawdown[b] / max(float(isv[S("mean_abs_pnl_ema")]), 1e-6) > threshold:
            a, flag = (FLAT_FROM_LONG if lots[b] > 0 else FLAT_FROM_SHORT), flag | FLAG_STOPPED
        out.append((a, lp, flag, s2, (u1, u2), p, explore[b] if greedy else segment))
    return out


def run_act(rt, q, logits, state, explore, lots, drawdown, isv, actor=ACTOR_Q, greedy=False):
    B = len(lots)
    return run_kernel(rt, K.AGENT_ACT, K.per_backtest_grid(B), K.BLOCK,
                      [q, logits, state, explore, lots, drawdown, isv, poisoned(B, np.int32), poisoned(B),
                       poisoned((B, N_ACTIONS)), poisoned(B, np.uint32), poisoned(B, np.uint32), actor, int(greedy), B])


OUT = {"state": 2, "explore": 3, "actions": 7, "log_prob": 8, "probs": 9, "flags": 10, "stop_loss": 11}


@pytest.mark.parametrize("margin", [0.0, 0.25, 1.0, 1e9])
def test_greedy_entries_need_the_margin(ref_rt, rng, margin):
    """Greedy acting opens (flat) or reverses (holding) only by more than entry_margin over staying out; exits and
    holds are unaffected, and a margin no advantage reaches leaves every backtest out of the market or holding."""
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, 2000)
    isv = isv.copy()
    isv[S("entry_margin")], isv[S("gate_enabled")], isv[S("stop_loss_threshold")] = margin, 0.0, 0.0
    actions = run_act(ref_rt, q, logits, state, explore, lots, drawdown, isv, greedy=True)[OUT["actions"]]
    side = np.sign(lots)
    out_of_it = np.where(side > 0, FLAT_FROM_LONG, np.where(side < 0, FLAT_FROM_SHORT, HOLD))
    rows = np.arange(len(lots))
    best = np.argmax(q, axis=1)  # q is Q_INVALID where invalid: the unconstrained greedy choice
    enters = np.isin(actions, (LONG, SHORT))
    assert (q[rows, actions] - q[rows, out_of_it] > margin)[enters].all()
    held_back = np.isin(best, (LONG, SHORT)) & ~enters
    assert (q[rows, best] - q[rows, out_of_it] <= margin)[held_back].all()
    assert np.array_equal(actions[~np.isin(best, (LONG, SHORT))], best[~np.isin(best, (LONG, SHORT))])
    if margin == 0.0:
        assert not held_back.any()
    if margin == 1e9:
        assert not enters.any() and np.isin(best, (LONG, SHORT)).any()
    else:
        assert enters.any()


@pytest.mark.parametrize("actor,greedy", [(ACTOR_Q, False), (ACTOR_Q, True), (ACTOR_POLICY, False),
                                          (ACTOR_POLICY, True)])
def test_act_matches_naive(ref_rt, rng, actor, greedy):
    """(The margin held back some greedy entries here: the test below counts them.)"""
    inputs = act_inputs(rng, 400)
    out = run_act(ref_rt, *inputs, actor=actor, greedy=greedy)
    naive = naive_act(*inputs, actor=actor, greedy=greedy)
    near = 0
    for b, (a, lp, flag, s, (u1, u2), p, seg) in enumerate(naive):
        assert out[OUT["state"]][b] == s
        assert np.allclose(out[OUT["probs"]][b], p, rtol=1e-6, atol=1e-7)
        if abs(u2 - np.cumsum(p)).min() < 1e-6:  # at a CDF boundary float32 and float64 may differ
            near += 1
            continue
        assert out[OUT["actions"]][b] == a and out[OUT["flags"]][b] == flag, b
        assert out[OUT["explore"]][b] == seg, b
        assert abs(out[OUT["log_prob"]][b] - lp) < 1e-5
    assert near < 5


def test_act_invariants(ref_rt, rng):
    inputs = act_inputs(rng, 2000)
    q, logits, state, explore, lots, drawdown, isv = inputs
    out = run_act(ref_rt, *inputs)
    actions, logp, probs, flags, stop = (out[OUT[k]] for k in ("actions", "log_prob", "probs", "flags", "stop_loss"))
    valid = valid_actions(np.sign(lots))
    assert np.all(probs[~valid] == 0), "only valid actions are taken"
    assert np.allclose(probs.sum(axis=1), 1, atol=1e-6)
    chosen = np.flatnonzero((flags & (FLAG_GATED | FLAG_STOPPED)) == 0)
    assert valid[chosen, actions[chosen]].all()
    assert np.allclose(logp[chosen], np.log(probs[chosen, actions[chosen]]))
    assert np.array_equal(stop.astype(bool), (flags & FLAG_STOPPED) != 0)
    stopped = (flags & FLAG_STOPPED) != 0
    expect_stop = (lots != 0) & (drawdown / isv[S("mean_abs_pnl_ema")] > isv[S("stop_loss_threshold")])
    assert np.array_equal(stopped, expect_stop) and stopped.any()
    assert np.all(actions[stopped & (lots > 0)] == FLAT_FROM_LONG)
    assert np.all(actions[stopped & (lots < 0)] == FLAT_FROM_SHORT)
    gated = (flags & FLAG_GATED) != 0
    assert gated.any() and np.all(actions[gated & ~stopped] == HOLD)
    isv_off = isv.copy()
    isv_off[S("stop_loss_threshold")] = 0.0  # 0: the stop-loss is off
    assert not (run_act(ref_rt, q, logits, state, explore, lots, drawdown, isv_off)[OUT["flags"]] & FLAG_STOPPED).any()


def test_greedy_takes_the_best_valid_q_and_never_explores(ref_rt, rng):
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, 1000)
    isv[S("gate_threshold")] = 0.0
    isv[S("stop_loss_threshold")] = 0.0
    isv[S("entry_margin")] = 0.0  # (the margin's own test is test_greedy_entries_need_the_margin)
    out = run_act(ref_rt, q, logits, state, explore.copy(), lots, drawdown, isv, greedy=True)
    assert np.array_equal(out[OUT["actions"]], np.argmax(q, axis=1)), "q of invalid actions is Q_INVALID"
    assert np.array_equal(out[OUT["explore"]], explore), "greedy acting leaves exploration segments alone"


def test_exploration_segments_hold_their_position(ref_rt, rng):
    """A segment keeps (or restores) its position every step until it ends, about every
    explore_hold_steps steps; segments start at a rate epsilon among backtests acting greedily."""
    B, hold = 20000, 8.0
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, B)
    isv[S("gate_threshold")], isv[S("stop_loss_threshold")], isv[S("explore_hold_steps")] = 0.0, 0.0, hold
    explore[:] = rng.integers(1, 4, B)
    out = run_act(ref_rt, q, logits, state, explore.copy(), lots, drawdown, isv)
    going = out[OUT["explore"]] != 0
    assert abs(1 - going.mean() - 1 / hold) < 0.01, "segments end at rate 1 / explore_hold_steps"
    target, side = explore[going] - 2, np.sign(lots[going])
    reached = np.where(out[OUT["actions"]][going] == HOLD, side, target)
    assert np.array_equal(reached, target), "a segment's action moves the position to its target (or holds it)"
    eps = float(K.epsilon(isv))
    explore[:] = 0
    out = run_act(ref_rt, q, logits, state, explore.copy(), lots, drawdown, isv)
    started = out[OUT["explore"]] != 0
    assert abs(started.mean() - eps) < 0.015, f"segments start at rate epsilon {eps:.2f}"


def test_epsilon_schedule(ref_rt, rng):
    """epsilon falls linearly from start to end over explore_eps_steps, then holds."""
    for step, want in [(0, 0.9), (500, 0.5), (1000, 0.1), (5000, 0.1)]:
        q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, 2000)
        isv[S("step_lo")] = step
        lots[:], explore[:] = 0, 0  # flat: HOLD, LONG, SHORT are valid
        probs = run_act(ref_rt, q, logits, state, explore, lots, drawdown, isv)[OUT["probs"]]
        assert K.epsilon(isv) == pytest.approx(want, abs=1e-6)
        assert np.allclose(np.sort(probs, axis=1)[:, 2:4], want / 3, atol=1e-6)  # the two non-best valid ones


def test_exits_are_never_gated(ref_rt, rng):
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, 1000)
    isv[S("gate_threshold")] = 2.0  # above any confidence (a softmax can round to exactly 1): gate every entry
    isv[S("stop_loss_threshold")] = 0.0
    explore[:] = 0
    out = run_act(ref_rt, q, logits, state, explore, lots, drawdown, isv)
    actions, flags = out[OUT["actions"]], out[OUT["flags"]]
    assert not np.any(np.isin(actions, [LONG, SHORT]))
    assert np.any(np.isin(actions, [FLAT_FROM_LONG, FLAT_FROM_SHORT]))  # exits pass the gate
    assert (flags & FLAG_GATED).any()


def test_policy_sampling_frequencies_follow_probs(ref_rt, rng):
    B = 40000
    logits = np.tile(np.array([[0.5, -1.0, 0.2, 1.0, -0.3]], np.float32), (B, 1))
    q, _, state, explore, _, drawdown, isv = act_inputs(rng, B)
    isv[S("gate_threshold")], isv[S("stop_loss_threshold")] = 0.0, 0.0
    explore[:] = 0
    lots = np.ones(B, np.int32)  # long: HOLD, SHORT and FLAT_FROM_LONG are valid
    out = run_act(ref_rt, q, logits, state, explore, lots, drawdown, isv, actor=ACTOR_POLICY)
    actions, probs = out[OUT["actions"]], out[OUT["probs"]]
    counts = np.bincount(actions, minlength=N_ACTIONS)
    assert counts[LONG] == counts[FLAT_FROM_SHORT] == 0
    keep = probs[0] > 0
    expected = probs[0][keep] * B
    chi2 = float(np.sum((counts[keep] - expected) ** 2 / expected))
    assert chi2 < 13.8, f"chi-square {chi2:.1f} with 2 degrees of freedom (p < 0.001)"


def test_reward(rng):
    pnl, dd, isv = reward_inputs(rng, 1000)
    raw, scaled, clipped = K.agent_reward(pnl, dd, isv)
    penalty = isv[S("drawdown_penalty_rate")] * dd / isv[S("mean_abs_pnl_ema")]
    assert np.allclose(raw, isv[S("reward_scale")] * pnl - penalty, rtol=1e-6, atol=1e-6)
    assert np.all(raw <= isv[S("reward_scale")] * pnl + 1e-6)  # the penalty never adds
    unclamped = raw / np.sqrt(isv[S("popart_var")])
    lo, hi = isv[S("reward_clamp_lo")], isv[S("reward_clamp_hi")]
    assert np.allclose(scaled, np.clip(unclamped, lo, hi), rtol=1e-6)
    assert np.array_equal(clipped.astype(bool), (unclamped < lo) | (unclamped > hi)) and clipped.any()


@pytest.mark.parametrize("B", [1, 255, 1000, 5000])
def test_step_stats_against_numpy(rng, B):
    ins = stats_inputs(rng, B)
    stats = K.step_stats(*ins)
    probs, actions, flags, raw, scaled, clipped, closed, pnl, lots = ins
    p = probs.astype(np.float64)
    h = -(p * np.log(np.where(p > 0, p, 1))).sum(1)
    want = {"n": B, "entropy_mean": h.mean(), "hold_frac": np.mean(actions == HOLD),
            "gated_frac": np.mean(flags & FLAG_GATED > 0), "stopped_frac": np.mean(flags & FLAG_STOPPED > 0),
            "reward_raw_mean": raw.mean(dtype=np.float64), "reward_raw_sq_mean": np.mean(raw.astype(np.float64) ** 2),
            "reward_scaled_mean": scaled.mean(dtype=np.float64), "clipped_frac": clipped.mean(),
            "closed_trades": closed.sum(), "closed_abs_pnl_sum": np.abs(pnl[closed > 0]).astype(np.float64).sum(),
            "closed_wins": np.sum((closed > 0) & (pnl > 0)), "closed_pnl_sum": pnl[closed > 0].astype(np.float64).sum(),
            "in_market_frac": np.mean(lots != 0),
            "reward_pos_mean": raw[raw > 0].astype(np.float64).mean() if (raw > 0).any() else 0.0,
            "reward_neg_mean": -raw[raw < 0].astype(np.float64).mean() if (raw < 0).any() else 0.0}
    for name, value in want.items():
        assert stats[STAT_INDEX[name]] == pytest.approx(value, rel=1e-6, abs=1e-9), name


def run_controller(controller, isv, second):
    """A controller's reference on a copy of the ISV values: the updated copy."""
    v = isv.copy()
    controller(v, second)
    return v


def stats_vector(**fields):
    s = np.zeros(N_STATS)
    for k, v in fields.items():
        s[STAT_INDEX[k]] = v
    return s


def test_popart_tracks_reward_distribution(rng):
    isv = isv_values(popart_rate=0.01)
    for _ in range(2000):
        batch = rng.normal(3.0, 2.0, 512)
        st = stats_vector(reward_raw_mean=batch.mean(), reward_raw_sq_mean=np.mean(batch ** 2))
        isv = run_controller(K.reward_controller, isv, st)
    assert isv[S("popart_mean")] == pytest.approx(3.0, abs=0.1)
    assert isv[S("popart_var")] == pytest.approx(4.0, rel=0.05)


def test_adaptive_clamp_widens_and_narrows_within_bounds():
    isv = isv_values()
    for _ in range(3000):
        isv = run_controller(K.reward_controller, isv, stats_vector(clipped_frac=0.2))
    assert isv[S("reward_clamp_hi")] == pytest.approx(isv[S("reward_clamp_max")])
    assert isv[S("reward_clamp_lo")] == pytest.approx(-isv[S("reward_clamp_max")])
    for _ in range(5000):
        isv = run_controller(K.reward_controller, isv, stats_vector(clipped_frac=0.0))
    assert isv[S("reward_clamp_hi")] == pytest.approx(isv[S("reward_clamp_min")])


def test_mean_abs_pnl_follows_closed_trades():
    isv = isv_values()
    for _ in range(2000):
        isv = run_controller(K.reward_controller, isv,
                             stats_vector(closed_trades=10, closed_abs_pnl_sum=35.0))
    assert isv[S("mean_abs_pnl_ema")] == pytest.approx(3.5, rel=1e-3)
    before = isv.copy()
    isv = run_controller(K.reward_controller, isv, stats_vector())  # nothing closed
    assert isv[S("mean_abs_pnl_ema")] == before[S("mean_abs_pnl_ema")]


def test_lr_plateau_decays_after_patience():
    isv = isv_values(lr_warmup_steps=10, lr_plateau_patience=50)
    losses = np.array([1.0, 2.0, 3.0, 0.5], np.float32)
    lr0 = {h: isv[S(h)] for h in ("lr_q", "lr_policy", "lr_value", "lr_perception", "lr_encoder")}
    isv[S("step_lo")] = 100  # past warm-up
    isv = run_controller(K.lr_plateau, isv, losses)  # sets best
    for _ in range(49):
        isv = run_controller(K.lr_plateau, isv, losses)
    assert isv[S("lr_q")] == lr0["lr_q"]
    isv = run_controller(K.lr_plateau, isv, losses)
    for head in lr0:
        assert isv[S(head)] == pytest.approx(lr0[head] * 0.5), head
    assert isv[S("plateau_count_q")] == 0


def test_lr_plateau_keeps_rate_while_improving_and_ignores_nan():
    isv = isv_values(lr_warmup_steps=0, lr_plateau_patience=5)
    loss = 1.0
    for _ in range(200):
        loss *= 0.9
        isv = run_controller(K.lr_plateau, isv, np.full(4, loss, np.float32))
    assert isv[S("lr_q")] == isv_values()[S("lr_q")]
    before = isv.copy()
    isv = run_controller(K.lr_plateau, isv, np.full(4, np.nan, np.float32))
    assert np.array_equal(isv, before)


def test_other_controllers():
    isv = isv_values(per_beta_anneal_steps=100, gamma=1.5, tau=-1.0)
    for step in range(100):
        isv[S("step_lo")] = step
        isv = run_controller(K.other_controllers, isv, stats_vector(entropy_mean=0.2))
    assert isv[S("per_beta")] == pytest.approx(1.0, abs=1e-6)
    assert isv[S("gamma")] == pytest.approx(0.9999) and isv[S("tau")] == 0.0
    assert isv[S("action_entropy_ema")] == pytest.approx(0.2)


def test_step_increment_carries_at_two_to_the_24():
    v = isv_values(step_lo=5)
    K.step_increment(v)
    assert v[S("step_lo")] == 6 and v[S("step_hi")] == 0
    v[S("step_lo")] = STEP_WRAP - 1
    K.step_increment(v)
    assert v[S("step_lo")] == 0 and v[S("step_hi")] == 1
    K.step_increment(v)
    assert v[S("step_hi")] * STEP_WRAP + v[S("step_lo")] == STEP_WRAP + 1


@pytest.mark.parametrize("B", [1, 300])
def test_step_end_runs_its_parts_in_order(ref_rt, rng, B):
    """Statistics, the reward, plateau and other controllers, the frame of this step, the counter, the
    host's copy of the ISV: each part as its own reference computes it, in that order."""
    ring_len = 8
    isv = isv_values(step_lo=5000, lr_warmup_steps=10, plateau_count_q=1999, best_loss_q=0.5, popart_rate=0.01)
    losses = np.array([1.0, 2.0, np.nan, 0.5], np.float32)
    args = step_end_args(rng, B, isv, losses, ring_len)
    out = run_kernel(ref_rt, K.AGENT_STEP_END, 1, STATS_BLOCK, args)
    st = K.step_stats(*args[:9])
    assert np.array_equal(out[STEP_END_OUT["stats"]], st)
    v = isv.copy()
    K.reward_controller(v, st)
    K.lr_plateau(v, losses)
    K.other_controllers(v, st)
    assert v[S("lr_q")] < isv[S("lr_q")], "the Q head's plateau ran out (the case exercises the decay)"
    ring = out[STEP_END_OUT["ring"]]
    frame = dict(zip(FRAME_FIELDS, ring[5000 % ring_len]))
    assert frame["step"] == 5000 and frame["seq"] == 5001
    assert [frame[name] for name, _ in STAT_FIELDS] == list(st)
    assert np.array_equal([frame[n] for n in LOSS_NAMES], losses, equal_nan=True)
    assert [frame[n] for n in FRAME_ISV] == [v[S(n)] for n in FRAME_ISV]  # after the controllers
    assert [frame[f"extra{i}"] for i in range(N_FRAME_EXTRAS)] == list(args[14])
    assert np.isnan(np.delete(ring, 5000 % ring_len, axis=0)).all(), "only this step's frame is written"
    K.step_increment(v)
    assert np.array_equal(out[STEP_END_OUT["isv"]], v)
    assert np.array_equal(out[STEP_END_OUT["isv_host"]], v)


def test_step_end_counts_across_the_wrap(ref_rt, rng):
    out = run_kernel(ref_rt, K.AGENT_STEP_END, 1, STATS_BLOCK,
                     step_end_args(rng, 3, isv_values(step_lo=STEP_WRAP - 1), np.ones(4, np.float32)))
    isv = out[STEP_END_OUT["isv"]]
    assert isv[S("step_lo")] == 0 and isv[S("step_hi")] == 1
    assert out[STEP_END_OUT["ring"]][(STEP_WRAP - 1) % 8][FRAME_INDEX["step"]] == STEP_WRAP - 1


def state_inputs(rng, B, D=16, K=4):
    """(h, pos, features, trade_steps, prev_lots) of B backtests: flat, long and short positions."""
    from foxc.lobsim.layout import POSITION_DTYPE
    pos = np.zeros(B, POSITION_DTYPE)
    pos["lots"] = rng.integers(-2, 3, B)
    pos["unrealized_pnl"] = np.where(pos["lots"] != 0, rng.integers(-4_000_000_000, 4_000_000_000, B), 0)
    pos["trail_hwm"] = np.maximum(pos["unrealized_pnl"], 0) + rng.integers(0, 10**9, B)
    features = rng.standard_normal((K, B, FEATURES)).astype(np.float32)
    features[K - 1, :, F_SPREAD] = rng.integers(1, 12, B)
    return (rng.standard_normal((B, D)).astype(np.float32), pos, features,
            rng.integers(0, 50, B).astype(np.int32), rng.integers(-2, 3, B).astype(np.int32))


def test_state_matches_naive(ref_rt, rng):
    B, D, W, tick = 300, 16, 4, 250_000_000
    h, pos, features, steps, prev = state_inputs(rng, B, D, W)
    out = run_kernel(ref_rt, K.AGENT_STATE, B, 128, [
        h, pos.view(np.uint8), features, steps.copy(), prev.copy(), poisoned((B, D + N_POSITION_FEATURES)),
        poisoned(B, np.int32), poisoned(B), tick, 1e-9, D, W, B])
    new_steps, new_prev, state, lots, drawdown = out[3], out[4], out[5], out[6], out[7]
    for b in range(B):
        n = int(pos["lots"][b])
        side = int(n > 0) - int(n < 0)
        before = int(prev[b] > 0) - int(prev[b] < 0)
        want_steps = 0 if side == 0 else (steps[b] + 1 if side == before else 1)
        unreal = pos["unrealized_pnl"][b] / (abs(n) * tick) if n else 0.0
        assert new_steps[b] == want_steps and new_prev[b] == n and lots[b] == n
        assert np.array_equal(state[b, :D], h[b])
        want = [side, math.tanh(unreal / UNREALIZED_SCALE_TICKS), math.tanh(want_steps / TIME_SCALE_STEPS),
                min(float(features[W - 1, b, F_SPREAD]), SPREAD_CAP_TICKS)]
        assert np.allclose(state[b, D:], want, rtol=1e-6, atol=1e-7), b
        fall = max(int(pos["trail_hwm"][b]) - int(pos["unrealized_pnl"][b]), 0) if n else 0
        assert drawdown[b] == pytest.approx(fall * 1e-9, rel=1e-6)


def test_seed_loss_clamp_tracks_the_loss_to_win_ratio():
    """Mode 1: wins clipped at reward_clamp_win, the loss side at clamp(1.1 x mean|loss| / mean win, 1, 3)."""
    for pos, neg, want in ((0.5, 0.8, 1.1 * 0.8 / 0.5), (0.5, 0.2, 1.0), (0.2, 1.0, 3.0)):
        isv = isv_values(reward_clamp_mode=1, reward_clamp_win=1.5)
        for _ in range(2000):
            isv = run_controller(K.reward_controller, isv,
                                 stats_vector(reward_pos_mean=pos, reward_neg_mean=neg))
        assert isv[S("reward_pos_ema")] == pytest.approx(pos, rel=1e-4)
        assert isv[S("reward_clamp_hi")] == 1.5
        assert isv[S("reward_clamp_lo")] == pytest.approx(-1.5 * want, rel=1e-4)
    sym = run_controller(K.reward_controller, isv_values(),
                         stats_vector(reward_pos_mean=0.5, reward_neg_mean=0.8))
    assert sym[S("reward_clamp_hi")] == -sym[S("reward_clamp_lo")], "mode 0 stays symmetric"


def test_gate_threshold_steers_the_hold_fraction():
    """The threshold rises while the agent holds less than the target and falls while it holds more,
    within [0.05, 0.95]; nothing moves while the gate is off."""
    low = isv_values(gate_enabled=1, gate_threshold=0.5, gate_hold_target=0.6, gate_lambda=0.05)
    for _ in range(500):
        low = run_controller(K.other_controllers, low, stats_vector(hold_frac=0.2))
    assert low[S("hold_frac_ema")] == pytest.approx(0.2, rel=1e-4) and low[S("gate_threshold")] == pytest.approx(0.95)
    high = isv_values(gate_enabled=1, gate_threshold=0.5, gate_hold_target=0.6, gate_lambda=0.05)
    for _ in range(500):
        high = run_controller(K.other_controllers, high, stats_vector(hold_frac=0.95))
    assert high[S("gate_threshold")] == pytest.approx(0.05)
    off = run_controller(K.other_controllers, isv_values(), stats_vector(hold_frac=0.95))
    assert off[S("gate_threshold")] == isv_values()[S("gate_threshold")] and off[S("hold_frac_ema")] == 0.0


def test_gate_waits_for_warm_up_and_opens_above_the_max_hold_fraction(ref_rt, rng):
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, 2000)
    isv[S("gate_threshold")], isv[S("stop_loss_threshold")] = 0.95, 0.0
    explore[:], lots[:] = 0, 0
    gated = lambda v: (run_act(ref_rt, q, logits, state, explore, lots, drawdown, v)[OUT["flags"]]  # noqa: E731
                       & FLAG_GATED).any()
    assert gated(isv)
    for slot, value in (("gate_warmup_steps", 10_000), ("hold_frac_ema", 0.9), ("gate_enabled", 0)):
        closed = isv.copy()
        closed[S(slot)] = value
        assert not gated(closed), slot
