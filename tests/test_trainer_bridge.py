"""The trainer's backtest_step (reference): its simulator part is lobsim_step; the closed trades, the reward and
the perception targets against naive loops per backtest."""
import numpy as np
import pytest

from bridge_cases import backtest_step_args, by_name
from foxc.agent import kernels as K
from foxc.isv.registry import slot_index as S
from foxc.lobsim.kernels import LOBSIM_STEP
from foxc.lobsim.sim import BLOCK
from kernel_check import poisoned, run_kernel
from foxc.trainer.bridge import BACKTEST_STEP

B = 300


def run(rt, spec, args):
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return by_name(spec, args, run_kernel(rt, spec, (len(args[1]) + BLOCK - 1) // BLOCK, BLOCK, copies))


@pytest.fixture
def case(ref_rt, rng):
    args = backtest_step_args(ref_rt, rng, B, poisoned)
    return {p.name: a for p, a in zip(BACKTEST_STEP.params, args)}, run(ref_rt, BACKTEST_STEP, args), args


def test_simulator_part_is_lobsim_step(ref_rt, case):
    _, out, args = case
    alone = run(ref_rt, LOBSIM_STEP, args[:len(LOBSIM_STEP.params)])
    for name, want in alone.items():
        assert out[name].tobytes() == want.tobytes(), name


def test_closed_trades(case):
    given, out, _ = case
    pos, log, prev, cap = out["pos"], out["trade_log"], given["prev_trades"], given["trade_cap"]
    for b in range(B):
        n = int(pos["trades"][b]) - int(prev[b])
        assert out["closed"][b] == n and out["prev_trades"][b] == pos["trades"][b]
        pnl = sum(int(log["pnl"][b, (int(pos["trades"][b]) - 1 - k) % cap]) for k in range(min(n, cap)))
        assert np.isclose(out["closed_pnl"][b], pnl * 1e-9, rtol=1e-6, atol=1e-12)
        fall = max(int(pos["trail_hwm"][b]) - int(pos["unrealized_pnl"][b]), 0) if pos["lots"][b] else 0
        assert np.isclose(out["drawdown"][b], fall * 1e-9, rtol=1e-6, atol=1e-12)
    assert (out["closed"] > 0).any() and (out["closed"] == 0).any()
    assert (out["drawdown"] > 0).any()


def test_reward(case):
    given, out, _ = case
    isv, pnl, dd = given["isv"], out["rewards"], out["drawdown"]
    raw, scaled, clipped = out["reward_raw"], out["reward_scaled"], out["clipped"]
    want = K.agent_reward(pnl, dd, isv)
    for got, w in zip((raw, scaled, clipped), want):
        assert got.tobytes() == w.tobytes()
    penalty = isv[S("drawdown_penalty_rate")] * dd / isv[S("mean_abs_pnl_ema")]
    assert np.allclose(raw, isv[S("reward_scale")] * pnl - penalty, rtol=1e-6, atol=1e-9)
    lo, hi = isv[S("reward_clamp_lo")], isv[S("reward_clamp_hi")]
    unclamped = raw / np.sqrt(isv[S("popart_var")])
    assert np.allclose(scaled, np.clip(unclamped, lo, hi), rtol=1e-6, atol=1e-9)
    assert (clipped == 1).any() and (clipped == 0).any() and (penalty > 0).any()


def test_perception_targets(case):
    given, out, _ = case
    planes, labels, mask = given["labels_out"], out["labels"], out["mask"]
    for b in range(B):
        for h in range(3):
            assert labels[b, h] == planes[0, b, h] and mask[b, h] == planes[5, b, h]
            assert labels[b, 3 + h] == planes[1, b, h] and mask[b, 3 + h] == planes[6, b, h]
            assert labels[b, 6 + h] == planes[2, b, h] and mask[b, 6 + h] == planes[6, b, h]
