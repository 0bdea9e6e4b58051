"""Random inputs for the agent kernels, shared by the CPU and GPU tests."""
import numpy as np

from foxc.agent.layout import N_ACTIONS, Q_INVALID, valid_actions
from foxc.isv.registry import N_SLOTS, SLOTS, slot_index
from foxc.rng import seed_states


def isv_values(**overrides) -> np.ndarray:
    v = np.array([s.bootstrap for s in SLOTS], np.float32)
    for name, value in overrides.items():
        v[slot_index(name)] = value
    return v


def act_inputs(rng, B):
    """(q, policy_logits, rng states, explore, lots, drawdown, isv): q masked as c51_distribution leaves it;
    some backtests in an exploration segment."""
    lots = rng.integers(-3, 4, B).astype(np.int32)
    q = np.where(valid_actions(np.sign(lots)), rng.standard_normal((B, N_ACTIONS)) * 2, Q_INVALID).astype(np.float32)
    logits = (rng.standard_normal((B, N_ACTIONS)) * 2).astype(np.float32)
    state = seed_states(int(rng.integers(1 << 30)), B, "actor")
    drawdown = np.abs(rng.standard_normal(B) * 3).astype(np.float32)
    explore = np.where(rng.random(B) < 0.3, rng.integers(1, 4, B), 0).astype(np.int32)
    isv = isv_values(gate_enabled=1.0, gate_threshold=0.4, gate_warmup_steps=0, hold_frac_ema=0.5,
                     stop_loss_threshold=2.5, mean_abs_pnl_ema=0.8, explore_eps_start=0.9, explore_eps_end=0.1,
                     explore_eps_steps=1000, step_lo=400, explore_hold_steps=4, distill_temperature=0.5)
    return q, logits, state, explore, lots, drawdown, isv


def reward_inputs(rng, B):
    pnl = (rng.standard_normal(B) * 4).astype(np.float32)
    drawdown = np.abs(rng.standard_normal(B) * 2).astype(np.float32)
    isv = isv_values(popart_var=2.0, reward_clamp_lo=-2.0, reward_clamp_hi=2.5, drawdown_penalty_rate=0.1)
    return pnl, drawdown, isv


assert N_SLOTS == len(isv_values())
