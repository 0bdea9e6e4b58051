"""Random inputs for the trainer's backtest_step (CPU and GPU tests): a mid-run simulator's step arguments, then
the trainer's."""
import numpy as np

from agent_cases import isv_values
from foxc.agent.actor import MONEY_SCALE
from foxc.data.features import HORIZONS, LABEL_PLANES
from lobsim_cases import mid_run_state, step_args


def backtest_step_args(ref_rt, rng, B, poisoned, reward_scale=1.0):
    """backtest_step's arguments one step on from a simulator B backtests into random trading (built on `ref_rt`):
    prev_trades 0 to 2 trades behind, a drawdown penalty and clamps tight enough that some rewards clip; every
    output poisoned."""
    st = mid_run_state(ref_rt, rng, B)
    prev = (st["pos"]["trades"].astype(np.int64) - rng.integers(0, 3, B)).clip(0).astype(np.uint32)
    isv = isv_values(popart_var=2.0, reward_clamp_lo=-0.02, reward_clamp_hi=0.025, drawdown_penalty_rate=0.1,
                     mean_abs_pnl_ema=0.5, reward_scale=reward_scale)
    planes = rng.random((LABEL_PLANES, B, HORIZONS)).astype(np.float32)
    return [*step_args(rng, st, poisoned), prev, poisoned(B, np.uint32), poisoned(B), poisoned(B), MONEY_SCALE,
            isv, poisoned(B), poisoned(B), poisoned(B, np.uint32), planes, poisoned((B, 9)), poisoned((B, 9))]


def by_name(spec, args, downloads) -> dict:
    """run_kernel's downloads keyed by their parameter's name in `spec` (scalars have none)."""
    arrays = iter(downloads)
    return {p.name: next(arrays) for p, a in zip(spec.params, args) if isinstance(a, np.ndarray)}
