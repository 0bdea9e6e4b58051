"""The agent kernels on the GPU against their numpy references."""
import numpy as np
import pytest

from agent_cases import STEP_END_OUT, StepEnd, act_inputs, isv_values, quote_state_inputs, step_end_args
from foxc.agent import kernels as K
from foxc.agent.layout import (ACTOR_POLICY, ACTOR_Q, FRAME_INDEX, FRAME_ISV, LOSS_NAMES, N_ACTIONS, N_FRAME_EXTRAS,
                               N_PASSIVE_ACTIONS, N_POSITION_FEATURES, N_QUOTE_FEATURES, STAT_FIELDS, STATE_BLOCK,
                               STATS_BLOCK)
from foxc.isv.registry import slot_index
from kernel_check import assert_close, poisoned, run_kernel
from test_agent_reference import state_inputs


def both(cuda_rt, ref_rt, spec, grid, block, args):
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    return run_kernel(cuda_rt, spec, grid, block, copy()), run_kernel(ref_rt, spec, grid, block, copy())


@pytest.mark.parametrize("A", [N_ACTIONS, N_PASSIVE_ACTIONS], ids=["market", "passive"])
@pytest.mark.parametrize("actor,greedy", [(ACTOR_Q, 0), (ACTOR_Q, 1), (ACTOR_POLICY, 0)])
@pytest.mark.parametrize("B", [1, 1000, 65536])
def test_act_matches_reference(cuda_rt, ref_rt, rng, B, actor, greedy, A):
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, B, A)
    args = [q, logits, state, explore, lots, drawdown, isv, poisoned(B, np.int32), poisoned(B),
            poisoned((B, A)), poisoned(B, np.uint32), poisoned(B, np.uint32), actor, greedy, B]
    if A > N_ACTIONS:  # the simulator's inputs too: market actions and both sides' quote codes
        args += [poisoned(B, np.int32), poisoned((2, B), np.int32)]
    got, want = both(cuda_rt, ref_rt, K.ACT_KERNELS[A], K.per_backtest_grid(B), K.BLOCK, args)
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
    if A > N_ACTIONS:
        assert np.array_equal(got[12][same], want[12][same]) and np.array_equal(got[13][:, same], want[13][:, same])
        assert B < 1000 or ((want[7] >= N_ACTIONS).any() and (want[13] != 0).any()), "the case quotes"


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


def test_state_quotes_matches_reference(cuda_rt, ref_rt, rng):
    """agent_state_quotes: h and the position's features as agent_state's, the quotes' (tanhf; the queue's double
    division rounded to float) within 1e-6, the age counters exact."""
    B, D, W, tick = 65536, 128, 32, 250_000_000
    h, pos, features, steps, prev = state_inputs(rng, B, D, W)
    quotes = quote_state_inputs(rng, B, tick)
    width = D + N_POSITION_FEATURES + N_QUOTE_FEATURES
    args = [h, pos.view(np.uint8), features, steps, prev, poisoned((B, width)), poisoned(B, np.int32), poisoned(B),
            tick, 1e-9, D, W, B, quotes[0].view(np.uint8), *quotes[1:]]
    got, want = both(cuda_rt, ref_rt, K.AGENT_STATE_QUOTES, B, STATE_BLOCK, args)
    for i in (3, 4, 6, 14, 15):
        assert np.array_equal(got[i], want[i]), f"agent_state_quotes output {i}"
    assert np.array_equal(got[5][:, :D], want[5][:, :D]), "h copied exactly"
    assert_close(got[5][:, D:], want[5][:, D:], 1e-6, "position and quote features")
    assert (want[5][:, D + N_POSITION_FEATURES:] != 0).mean() > 0.5, "the case has orders"


def frame_parts(frame):
    """A diagnostics frame's fields by kind: exact ones (step, seq, losses, extras), the statistics, the ISV."""
    exact = ["seq", "step", *LOSS_NAMES] + [f"extra{i}" for i in range(N_FRAME_EXTRAS)]
    pick = lambda names: np.array([frame[FRAME_INDEX[n]] for n in names])  # noqa: E731
    return pick(exact), pick([n for n, _ in STAT_FIELDS]), pick(FRAME_ISV)


@pytest.mark.parametrize("A", [N_ACTIONS, N_PASSIVE_ACTIONS], ids=["market", "passive"])
@pytest.mark.parametrize("B", [1, 300, 65536])
@pytest.mark.parametrize("seed_modes", [False, True])
def test_step_end_matches_reference_and_repeats_bitwise(cuda_rt, ref_rt, rng, B, seed_modes, A):
    """agent_step_end on poisoned outputs: the statistics (logf against numpy's log in the entropy) and the
    controllers' ISV (float32 with FMA contraction against numpy's rounding of each operation) within 1e-6
    of the reference, the frame of this step only, the counter exact, the host's ISV copy equal to the
    device's; a second run gives the same bits."""
    isv = isv_values(step_lo=5000, plateau_count_q=1999, best_loss_q=0.5, lr_warmup_steps=10, popart_rate=0.01)
    if seed_modes:  # the seed's gate controller and asymmetric loss clamp
        isv = isv_values(step_lo=5000, gate_enabled=1, gate_threshold=0.3, hold_frac_ema=0.6, reward_clamp_mode=1,
                         reward_pos_ema=0.4, reward_neg_ema=0.7, popart_rate=0.01)
    ring_len, row = 8, 5000 % 8
    args = step_end_args(rng, B, isv, np.array([1.0, 2.0, np.nan, 0.5], np.float32), ring_len, A)
    got, want = both(cuda_rt, ref_rt, K.STEP_END_KERNELS[A], 1, STATS_BLOCK, args)
    o = STEP_END_OUT
    assert_close(got[o["stats"]], want[o["stats"]], 1e-6, "stats")
    assert_close(got[o["isv"]], want[o["isv"]], 1e-6, "isv")
    assert got[o["isv"]][slot_index("step_lo")] == 5001 and got[o["isv"]][slot_index("step_hi")] == 0
    assert np.array_equal(got[o["isv_host"]], got[o["isv"]]), "the host's view is the ISV as the step leaves it"
    ring = got[o["ring"]]
    assert np.isnan(np.delete(ring, row, axis=0)).all(), "only this step's frame is written"
    (g_exact, g_stats, g_isv), (w_exact, w_stats, w_isv) = frame_parts(ring[row]), frame_parts(want[o["ring"]][row])
    assert np.array_equal(g_exact, w_exact, equal_nan=True)
    assert_close(g_stats, w_stats, 1e-6, "frame stats")
    assert_close(g_isv, w_isv, 1e-6, "frame isv")
    assert ring[row][FRAME_INDEX["t_ns"]] > 0  # the device's global timer
    again = run_kernel(cuda_rt, K.STEP_END_KERNELS[A], 1, STATS_BLOCK, [a.copy() if isinstance(a, np.ndarray) else a
                                                                   for a in args])
    ring[row][FRAME_INDEX["t_ns"]] = again[o["ring"]][row][FRAME_INDEX["t_ns"]]
    for name, i in o.items():
        assert np.array_equal(again[i], got[i], equal_nan=True), f"{name}: two runs gave different bits"


def test_diagnostics_frames_and_the_host_isv_on_device(cuda_rt, rng):
    """Graph replays of agent_step_end: each step's frame arrives in the mapped ring in order, and the
    host's view of the ISV follows the device copy."""
    end = StepEnd(cuda_rt, rng, ring_len=16, B=300)
    end.losses.host[:] = [0.5, 1.5, 2.5, 3.5]
    with cuda_rt.capture(name="step_end") as cap:
        end.plan.launch(cuda_rt.stream)
    for _ in range(12):
        cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    frames = end.ring.poll()
    assert [f["step"] for f in frames] == list(range(12))
    assert frames[5]["l_v"] == 2.5 and frames[5]["n"] == 300
    assert all(b["t_ns"] >= a["t_ns"] for a, b in zip(frames, frames[1:]))
    assert end.bus.step == 12
    assert np.array_equal(end.bus.device.download(), end.bus.values)
    cap.graph.close()
