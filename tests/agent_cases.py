"""Random inputs for the agent kernels, shared by the CPU and GPU tests."""
import numpy as np

from foxc.agent import kernels as K
from foxc.agent.diagnostics import DiagnosticsRing
from foxc.agent.layout import (FRAME_ISV, FRAME_LEN, N_ACTIONS, N_FRAME_EXTRAS, N_STATS, Q_INVALID, STATS_BLOCK,
                               valid_actions)
from foxc.isv import IsvBus
from foxc.isv.registry import N_SLOTS, SLOTS, slot_index
from foxc.rng import seed_states
from kernel_check import poisoned


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


def stats_inputs(rng, B):
    """agent_step_end's per-backtest inputs: probs, actions, flags, reward_raw, reward_scaled, clipped, closed,
    closed_pnl, lots."""
    probs = rng.dirichlet(np.ones(N_ACTIONS), B).astype(np.float32)
    probs[rng.random((B, N_ACTIONS)) < 0.3] = 0.0  # invalid actions: probability 0, no entropy
    return [probs, rng.integers(0, 5, B).astype(np.int32), rng.integers(0, 4, B).astype(np.uint32),
            rng.standard_normal(B).astype(np.float32), rng.standard_normal(B).astype(np.float32),
            rng.integers(0, 2, B).astype(np.uint32), rng.integers(0, 3, B).astype(np.uint32),
            rng.standard_normal(B).astype(np.float32), rng.integers(-1, 2, B).astype(np.int32)]


STEP_END_OUT = {"stats": 10, "isv": 11, "isv_host": 12, "ring": 15}  # agent_step_end's outputs in run_kernel's list


def step_end_args(rng, B, isv, losses, ring_len=8):
    """agent_step_end's arguments for run_kernel, its outputs (stats, the host's ISV view, the ring) poisoned."""
    slots = np.array([slot_index(n) for n in FRAME_ISV], np.int32)
    return [*stats_inputs(rng, B), B, losses, poisoned(N_STATS, np.float64), isv, poisoned(N_SLOTS),
            rng.standard_normal(N_FRAME_EXTRAS), slots, len(slots), poisoned((ring_len, FRAME_LEN), np.float64),
            ring_len]


class StepEnd:
    """agent_step_end as the trainer wires it: B backtests' arrays, a device-resident ISV bus, the losses
    in mapped memory and a diagnostics ring; `plan` is the launch."""

    def __init__(self, rt, rng, ring_len=8, B=5):
        self.bus = IsvBus(rt, device_resident=True)
        self.inputs = []
        for i, a in enumerate(stats_inputs(rng, B)):
            self.inputs.append(rt.device_array(a.shape, a.dtype, f"step_end_in{i}"))
            self.inputs[-1].upload(a)
        self.losses = rt.mapped_array(4, np.float32, "losses")
        self.losses.host[:] = 0.0
        self.stats = rt.device_array(N_STATS, np.float64, "stats")
        self.ring = DiagnosticsRing(rt, ring_len=ring_len)
        self.plan = rt.plan(K.AGENT_STEP_END, 1, STATS_BLOCK, (*self.inputs, B, self.losses, self.stats, self.bus,
                                                               self.bus.array, *self.ring.frame_args.values()))


assert N_SLOTS == len(isv_values())
