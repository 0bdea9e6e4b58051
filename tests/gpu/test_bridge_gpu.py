"""The trainer's backtest_step on the GPU against its reference, outputs poisoned."""
import numpy as np
import pytest

from bridge_cases import backtest_step_args, by_name
from foxc.lobsim.sim import BLOCK
from kernel_check import assert_close, poisoned, run_kernel
from foxc.trainer.bridge import BACKTEST_STEP

REWARD_OUTPUTS = ("reward_raw", "reward_scaled", "clipped")


def both(cuda_rt, ref_rt, args):
    grid = (len(args[1]) + BLOCK - 1) // BLOCK
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    return (by_name(BACKTEST_STEP, args, run_kernel(cuda_rt, BACKTEST_STEP, grid, BLOCK, copy())),
            by_name(BACKTEST_STEP, args, run_kernel(ref_rt, BACKTEST_STEP, grid, BLOCK, copy())))


@pytest.mark.parametrize("reward_scale", [1.0, 0.37])
@pytest.mark.parametrize("B", [1, 257, 3000])
def test_backtest_step_matches_reference(cuda_rt, ref_rt, rng, B, reward_scale):
    """The simulator's part, the closed trades and the perception targets bit for bit. The reward too when
    reward_scale is 1: the device computes reward_scale * pnl - penalty as one FMA (as agent_reward always has),
    the reference rounds the product first, so with another scale the reward may differ by an ulp."""
    got, want = both(cuda_rt, ref_rt, backtest_step_args(ref_rt, rng, B, poisoned, reward_scale))
    exact = [name for name in got if reward_scale == 1.0 or name not in REWARD_OUTPUTS]
    for name in exact:
        assert got[name].tobytes() == want[name].tobytes(), f"backtest_step: {name} differs from the reference"
    for name in ("reward_raw", "reward_scaled", "closed_pnl", "drawdown", "labels", "mask"):
        assert not np.isnan(got[name]).any(), f"{name} left unwritten"
    if reward_scale != 1.0:
        assert_close(got["reward_raw"], want["reward_raw"], 1e-6, "reward_raw")
        assert_close(got["reward_scaled"], want["reward_scaled"], 1e-6, "reward_scaled")
        flipped = got["clipped"] != want["clipped"]  # only a reward within an ulp of a clamp bound may flip
        bounds = np.float32([-0.02, 0.025])  # backtest_step_args' clamps
        assert np.all(np.abs(want["reward_scaled"][flipped, None] - bounds).min(axis=1) < 1e-6)
