"""The agent kernels on the GPU against their numpy references."""
import numpy as np
import pytest

from agent_cases import act_inputs, isv_values, reward_inputs
from foxc.agent import kernels as K
from foxc.agent.layout import ACTOR_POLICY, ACTOR_Q, N_ACTIONS, N_POSITION_FEATURES, N_STATS, STATE_BLOCK
from foxc.testing import assert_close, poisoned, run_kernel
from test_agent_reference import state_inputs, stats_inputs, stats_vector


def both(cuda_rt, ref_rt, spec, grid, block, args):
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    return run_kernel(cuda_rt, spec, grid, block, copy()), run_kernel(ref_rt, spec, grid, block, copy())


@pytest.mark.parametrize("actor,greedy", [(ACTOR_Q, 0), (ACTOR_Q, 1), (ACTOR_POLICY, 0)])
@pytest.mark.parametrize("B", [1, 1000, 65536])
def test_act_matches_reference(cuda_rt, ref_rt, rng, B, actor, greedy):
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, B)
    args = [q, logits, state, explore, lots, drawdown, isv, poisoned(B, np.int32), poisoned(B),
            poisoned((B, N_ACTIONS)), poisoned(B, np.uint32), poisoned(B, np.uint32), actor, greedy, B]
    got, want = both(cuda_rt, ref_rt, K.AGENT_ACT, K.per_backtest_grid(B), K.BLOCK, args)
    assert np.array_equal(got[2], want[2]), "rng states differ"
    assert_close(got[9], want[9], 1e-6, "probs")
    # the policy actor's softmax (expf on the device, exp in numpy) may move a CDF boundary by an ulp
    u2 = (want[2] >> 8).astype(np.float64) / 16777216.0
    near = np.min(np.abs(np.cumsum(want[9].astype(np.float64), axis=1) - u2[:, None]), axis=1) < 1e-5
    same = got[7] == want[7]
    assert np.all(same | near), f"{np.sum(~same & ~near)} actions differ away from a CDF boundary"
    assert np.array_equal(got[3][same], want[3][same]), "exploration segments"
    assert np.array_equal(got[10][same], want[10][same])
    assert np.array_equal(got[11][same], want[11][same])
    assert_close(got[8][same], want[8][same], 1e-6, "log_prob")


def test_state_matches_reference(cuda_rt, ref_rt, rng):
    B, D, W = 65536, 128, 32
    h, pos, features, steps, prev = state_inputs(rng, B, D, W)
    args = [h, pos.view(np.uint8), features, steps, prev, poisoned((B, D + N_POSITION_FEATURES)), poisoned(B, np.int32),
            poisoned(B), 250_000_000, 1e-9, D, W, B]
    got, want = both(cuda_rt, ref_rt, K.AGENT_STATE, B, STATE_BLOCK, args)
    for i in (3, 4, 6):
        assert np.array_equal(got[i], want[i]), f"agent_state output {i}"
    assert np.array_equal(got[5][:, :D], want[5][:, :D]), "h copied exactly"
    assert_close(got[5][:, D:], want[5][:, D:], 1e-6, "position features")  # tanhf vs numpy tanh
    assert_close(got[7], want[7], 1e-6, "drawdown")


def test_reward_matches_reference(cuda_rt, ref_rt, rng):
    B = 65536
    pnl, dd, isv = reward_inputs(rng, B)
    got, want = both(cuda_rt, ref_rt, K.AGENT_REWARD, K.per_backtest_grid(B), K.BLOCK,
                     [pnl, dd, isv, poisoned(B), poisoned(B), poisoned(B, np.uint32), B])
    assert_close(got[3], want[3], 1e-6, "raw")
    assert_close(got[4], want[4], 1e-6, "scaled")
    assert np.mean(got[5] != want[5]) < 1e-4  # only rewards within an ulp of a bound may differ


@pytest.mark.parametrize("B", [1, 300, 65536])
def test_step_stats_match_reference_and_repeat_bitwise(cuda_rt, ref_rt, rng, B):
    ins = stats_inputs(rng, B)
    args = [*ins, poisoned(N_STATS, np.float64), B]
    got, want = both(cuda_rt, ref_rt, K.AGENT_STEP_STATS, 1, 256, args)
    assert_close(got[9], want[9], 1e-6, "stats")
    again = run_kernel(cuda_rt, K.AGENT_STEP_STATS, 1, 256, args)
    assert np.array_equal(again[9], got[9]), "two runs gave different bits"


@pytest.mark.parametrize("spec,second", [
    (K.AGENT_REWARD_CONTROLLER, stats_vector(reward_raw_mean=0.3, reward_raw_sq_mean=2.0, clipped_frac=0.2,
                                             closed_trades=5, closed_abs_pnl_sum=7.0)),
    (K.AGENT_LR_PLATEAU, np.array([1.0, 2.0, np.nan, 0.5], np.float32)),
    (K.AGENT_FUSED_CONTROLLERS, stats_vector(entropy_mean=0.7, hold_frac=0.3)),
])
@pytest.mark.parametrize("seed_modes", [False, True])
def test_controllers_match_reference(cuda_rt, ref_rt, spec, second, seed_modes):
    isv = isv_values(step_lo=5000, plateau_count_q=1999, best_loss_q=0.5, lr_warmup_steps=10)
    if seed_modes:  # the seed's gate controller and asymmetric loss clamp
        isv = isv_values(step_lo=5000, gate_enabled=1, gate_threshold=0.3, hold_frac_ema=0.6, reward_clamp_mode=1,
                         reward_pos_ema=0.4, reward_neg_ema=0.7)
        second = second.copy()
        if spec is K.AGENT_REWARD_CONTROLLER:
            second[:] = stats_vector(reward_pos_mean=0.5, reward_neg_mean=0.9)
    got, want = both(cuda_rt, ref_rt, spec, 1, 1, [isv, second])
    assert_close(got[0], want[0], 1e-6, f"{spec.name} isv")


def test_diagnostics_frames_on_device(cuda_rt, rng):
    from foxc.agent.diagnostics import DiagnosticsRing
    from foxc.isv import IsvBus
    from foxc.isv.kernels import plan_step_increment
    bus = IsvBus(cuda_rt)
    stats = cuda_rt.device_array(N_STATS, np.float64, "stats")
    values = rng.standard_normal(N_STATS)
    stats.upload(values)
    losses = cuda_rt.mapped_array(4, np.float32, "losses")
    losses.host[:] = [0.5, 1.5, 2.5, 3.5]
    ring = DiagnosticsRing(cuda_rt, bus, stats, losses, ring_len=16)
    step = plan_step_increment(cuda_rt, bus)
    with cuda_rt.capture(name="diag") as cap:
        ring.launch(cuda_rt.stream)
        step.launch(cuda_rt.stream)
    for _ in range(12):
        cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    frames = ring.poll()
    assert [f["step"] for f in frames] == list(range(12))
    assert frames[5]["l_v"] == 2.5 and frames[5]["entropy_mean"] == values[1]
