"""The agent kernels' numpy references against naive scalar implementations and their invariants."""
import math

import numpy as np
import pytest

from agent_cases import act_inputs, isv_values, reward_inputs
from foxc.agent import kernels as K
from foxc.agent.layout import (FLAG_GATED, FLAG_STOPPED, FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, N_ACTIONS,
                               N_STATS, SHORT, STAT_INDEX)
from foxc.isv.registry import slot_index as S
from foxc.testing import poisoned, run_kernel


def naive_xorshift(x):
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    return x


def naive_act(logits, state, lots, drawdown, isv):
    """One backtest at a time, in plain Python floats (float64)."""
    out = []
    eps = min(max(float(isv[S("exploration_floor")]), 0.0), 0.2)
    for b in range(len(lots)):
        e = [math.exp(l - max(logits[b])) for l in logits[b]]
        p = [(1 - N_ACTIONS * eps) * x / sum(e) + eps for x in e]
        s = naive_xorshift(int(state[b]))
        u = (s >> 8) / 16777216.0
        a, c = N_ACTIONS - 1, 0.0
        for i, pi in enumerate(p):
            c += pi
            if u < c:
                a = i
                break
        flag = 0
        if a in (LONG, SHORT) and p[a] < isv[S("gate_threshold")]:
            a, flag = HOLD, flag | FLAG_GATED
        if lots[b] != 0 and drawdown[b] / max(float(isv[S("mean_abs_pnl_ema")]), 1e-6) > isv[S("stop_loss_threshold")]:
            a, flag = (FLAT_FROM_LONG if lots[b] > 0 else FLAT_FROM_SHORT), flag | FLAG_STOPPED
        out.append((a, math.log(p[a]), flag, s, u, p))
    return out


def run_act(rt, logits, state, lots, drawdown, isv):
    B = len(lots)
    return run_kernel(rt, K.AGENT_ACT, K.per_backtest_grid(B), K.BLOCK,
                      [logits, state, lots, drawdown, isv, poisoned(B, np.int32), poisoned(B),
                       poisoned((B, N_ACTIONS)), poisoned(B, np.uint32), poisoned(B, np.uint32), B])


def test_act_matches_naive(ref_rt, rng):
    inputs = act_inputs(rng, 300)
    _, state, _, _, _, actions, logp, probs, flags, _ = run_act(ref_rt, *inputs)
    naive = naive_act(*inputs)
    for b, (a, lp, flag, s, u, p) in enumerate(naive):
        assert state[b] == s
        assert np.allclose(probs[b], p, rtol=1e-6)
        cdf = np.cumsum(p)
        if np.min(np.abs(cdf - u)) > 1e-6:  # away from a boundary float32 and float64 agree
            assert actions[b] == a and flags[b] == flag, b
            assert abs(logp[b] - lp) < 1e-5


def test_act_invariants(ref_rt, rng):
    inputs = act_inputs(rng, 2000)
    logits, _, lots, drawdown, isv = inputs
    _, _, _, _, _, actions, logp, probs, flags, stop = run_act(ref_rt, *inputs)
    assert np.array_equal(stop.astype(bool), (flags & FLAG_STOPPED) != 0)
    assert np.all(probs >= isv[S("exploration_floor")] - 1e-7)
    assert np.allclose(probs.sum(axis=1), 1, atol=1e-6)
    assert np.allclose(logp, np.log(probs[np.arange(len(actions)), actions]))
    stopped = (flags & FLAG_STOPPED) != 0
    expect_stop = (lots != 0) & (drawdown / isv[S("mean_abs_pnl_ema")] > isv[S("stop_loss_threshold")])
    assert np.array_equal(stopped, expect_stop) and stopped.any()
    assert np.all(actions[stopped & (lots > 0)] == FLAT_FROM_LONG)
    assert np.all(actions[stopped & (lots < 0)] == FLAT_FROM_SHORT)
    gated = (flags & FLAG_GATED) != 0
    assert gated.any() and np.all(actions[gated & ~stopped] == HOLD)


def test_exits_are_never_gated(ref_rt, rng):
    logits, state, lots, drawdown, isv = act_inputs(rng, 1000)
    isv[S("gate_threshold")] = 1.0  # gate every entry
    _, _, _, _, _, actions, _, _, flags, _ = run_act(ref_rt, logits, state, np.zeros_like(lots), drawdown, isv)
    assert not np.any(np.isin(actions, [LONG, SHORT]))
    assert np.any(np.isin(actions, [FLAT_FROM_LONG, FLAT_FROM_SHORT]))  # exits pass the gate


def test_sampling_frequencies_follow_probs(ref_rt, rng):
    B = 40000
    logits = np.tile(np.array([[0.5, -1.0, 0.2, 1.0, -0.3]], np.float32), (B, 1))
    _, state, _, drawdown, isv = act_inputs(rng, B)
    isv[S("gate_threshold")] = 0.0
    _, _, _, _, _, actions, _, probs, _, _ = run_act(ref_rt, logits, state, np.zeros(B, np.int32), drawdown, isv)
    counts = np.bincount(actions, minlength=N_ACTIONS)
    expected = probs[0] * B
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 18.5, f"chi-square {chi2:.1f} with 4 degrees of freedom (p < 0.001)"


def test_reward(ref_rt, rng):
    B = 1000
    pnl, dd, isv = reward_inputs(rng, B)
    _, _, _, raw, scaled, clipped = run_kernel(ref_rt, K.AGENT_REWARD, K.per_backtest_grid(B), K.BLOCK,
                                                  [pnl, dd, isv, poisoned(B), poisoned(B), poisoned(B, np.uint32), B])
    penalty = isv[S("drawdown_penalty_rate")] * dd / isv[S("mean_abs_pnl_ema")]
    assert np.allclose(raw, isv[S("reward_scale")] * pnl - penalty, rtol=1e-6, atol=1e-6)
    assert np.all(raw <= isv[S("reward_scale")] * pnl + 1e-6)  # the penalty never adds
    unclamped = raw / np.sqrt(isv[S("popart_var")])
    lo, hi = isv[S("reward_clamp_lo")], isv[S("reward_clamp_hi")]
    assert np.allclose(scaled, np.clip(unclamped, lo, hi), rtol=1e-6)
    assert np.array_equal(clipped.astype(bool), (unclamped < lo) | (unclamped > hi)) and clipped.any()


def stats_inputs(rng, B):
    probs = rng.dirichlet(np.ones(N_ACTIONS), B).astype(np.float32)
    return [probs, rng.integers(0, 5, B).astype(np.int32), rng.integers(0, 4, B).astype(np.uint32),
            rng.standard_normal(B).astype(np.float32), rng.standard_normal(B).astype(np.float32),
            rng.integers(0, 2, B).astype(np.uint32), rng.integers(0, 3, B).astype(np.uint32),
            rng.standard_normal(B).astype(np.float32)]


@pytest.mark.parametrize("B", [1, 255, 1000, 5000])
def test_step_stats_against_numpy(ref_rt, rng, B):
    ins = stats_inputs(rng, B)
    stats = run_kernel(ref_rt, K.AGENT_STEP_STATS, 1, 256, [*ins, poisoned(N_STATS, np.float64), B])[8]
    probs, actions, flags, raw, scaled, clipped, closed, pnl = ins
    h = -(probs.astype(np.float64) * np.log(probs.astype(np.float64))).sum(1)
    want = {"n": B, "entropy_mean": h.mean(), "hold_frac": np.mean(actions == HOLD),
            "gated_frac": np.mean(flags & FLAG_GATED > 0), "stopped_frac": np.mean(flags & FLAG_STOPPED > 0),
            "reward_raw_mean": raw.mean(dtype=np.float64), "reward_raw_sq_mean": np.mean(raw.astype(np.float64) ** 2),
            "reward_scaled_mean": scaled.mean(dtype=np.float64), "clipped_frac": clipped.mean(),
            "closed_trades": closed.sum(), "closed_abs_pnl_sum": np.abs(pnl[closed > 0]).astype(np.float64).sum(),
            "closed_wins": np.sum((closed > 0) & (pnl > 0)), "closed_pnl_sum": pnl[closed > 0].astype(np.float64).sum()}
    for name, value in want.items():
        assert stats[STAT_INDEX[name]] == pytest.approx(value, rel=1e-6, abs=1e-9), name


def run_controller(rt, spec, isv, second):
    return run_kernel(rt, spec, 1, 1, [isv, second])[0]


def stats_vector(**fields):
    s = np.zeros(N_STATS)
    for k, v in fields.items():
        s[STAT_INDEX[k]] = v
    return s


def test_popart_tracks_reward_distribution(ref_rt, rng):
    isv = isv_values(popart_rate=0.01)
    for _ in range(2000):
        batch = rng.normal(3.0, 2.0, 512)
        st = stats_vector(reward_raw_mean=batch.mean(), reward_raw_sq_mean=np.mean(batch ** 2))
        isv = run_controller(ref_rt, K.AGENT_REWARD_CONTROLLER, isv, st)
    assert isv[S("popart_mean")] == pytest.approx(3.0, abs=0.1)
    assert isv[S("popart_var")] == pytest.approx(4.0, rel=0.05)


def test_adaptive_clamp_widens_and_narrows_within_bounds(ref_rt):
    isv = isv_values()
    for _ in range(3000):
        isv = run_controller(ref_rt, K.AGENT_REWARD_CONTROLLER, isv, stats_vector(clipped_frac=0.2))
    assert isv[S("reward_clamp_hi")] == pytest.approx(isv[S("reward_clamp_max")])
    assert isv[S("reward_clamp_lo")] == pytest.approx(-isv[S("reward_clamp_max")])
    for _ in range(5000):
        isv = run_controller(ref_rt, K.AGENT_REWARD_CONTROLLER, isv, stats_vector(clipped_frac=0.0))
    assert isv[S("reward_clamp_hi")] == pytest.approx(isv[S("reward_clamp_min")])


def test_mean_abs_pnl_follows_closed_trades(ref_rt):
    isv = isv_values()
    for _ in range(2000):
        isv = run_controller(ref_rt, K.AGENT_REWARD_CONTROLLER, isv,
                             stats_vector(closed_trades=10, closed_abs_pnl_sum=35.0))
    assert isv[S("mean_abs_pnl_ema")] == pytest.approx(3.5, rel=1e-3)
    before = isv.copy()
    isv = run_controller(ref_rt, K.AGENT_REWARD_CONTROLLER, isv, stats_vector())  # nothing closed
    assert isv[S("mean_abs_pnl_ema")] == before[S("mean_abs_pnl_ema")]


def test_lr_plateau_decays_after_patience(ref_rt):
    isv = isv_values(lr_warmup_steps=10, lr_plateau_patience=50)
    losses = np.array([1.0, 2.0, 3.0, 0.5], np.float32)
    lr0 = {h: isv[S(h)] for h in ("lr_q", "lr_policy", "lr_value", "lr_perception", "lr_encoder")}
    isv[S("step_lo")] = 100  # past warm-up
    isv = run_controller(ref_rt, K.AGENT_LR_PLATEAU, isv, losses)  # sets best
    for _ in range(49):
        isv = run_controller(ref_rt, K.AGENT_LR_PLATEAU, isv, losses)
    assert isv[S("lr_q")] == lr0["lr_q"]
    isv = run_controller(ref_rt, K.AGENT_LR_PLATEAU, isv, losses)
    for head in lr0:
        assert isv[S(head)] == pytest.approx(lr0[head] * 0.5), head
    assert isv[S("plateau_count_q")] == 0


def test_lr_plateau_keeps_rate_while_improving_and_ignores_nan(ref_rt):
    isv = isv_values(lr_warmup_steps=0, lr_plateau_patience=5)
    loss = 1.0
    for _ in range(200):
        loss *= 0.9
        isv = run_controller(ref_rt, K.AGENT_LR_PLATEAU, isv, np.full(4, loss, np.float32))
    assert isv[S("lr_q")] == isv_values()[S("lr_q")]
    before = isv.copy()
    isv = run_controller(ref_rt, K.AGENT_LR_PLATEAU, isv, np.full(4, np.nan, np.float32))
    assert np.array_equal(isv, before)


def test_fused_controllers(ref_rt):
    isv = isv_values(per_beta_anneal_steps=100, gamma=1.5, tau=-1.0)
    for step in range(100):
        isv[S("step_lo")] = step
        isv = run_controller(ref_rt, K.AGENT_FUSED_CONTROLLERS, isv, stats_vector(entropy_mean=0.2))
    assert isv[S("per_beta")] == pytest.approx(1.0, abs=1e-6)
    assert isv[S("gamma")] == pytest.approx(0.9999) and isv[S("tau")] == 0.0
    assert isv[S("entropy_coef")] > isv_values()[S("entropy_coef")]  # too little entropy raises the bonus
    for _ in range(20000):
        isv = run_controller(ref_rt, K.AGENT_FUSED_CONTROLLERS, isv, stats_vector(entropy_mean=1.6))
    assert isv[S("entropy_coef")] == pytest.approx(isv[S("entropy_coef_min")])
