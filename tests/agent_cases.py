"""Random inputs for the agent kernels, shared by the CPU and GPU tests."""
import numpy as np

from foxc.agent import kernels as K
from foxc.agent.diagnostics import DiagnosticsRing
from foxc.agent.layout import (EXPLORE_QUOTE, FRAME_ISV, FRAME_LEN, N_ACTIONS, N_FRAME_EXTRAS, N_STATS, Q_INVALID, STATS_BLOCK,
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


def act_inputs(rng, B, A=N_ACTIONS):
    """(q, policy_logits, rng states, explore, lots, drawdown, isv) of an agent of A actions: q masked as
    c51_distribution leaves it; some backtests in an exploration segment (with A = 9 some repeating a quote)."""
    lots = rng.integers(-3, 4, B).astype(np.int32)
    q = np.where(valid_actions(np.sign(lots), A), rng.standard_normal((B, A)) * 2, Q_INVALID).astype(np.float32)
    logits = (rng.standard_normal((B, A)) * 2).astype(np.float32)
    state = seed_states(int(rng.integers(1 << 30)), B, "actor")
    drawdown = np.abs(rng.standard_normal(B) * 3).astype(np.float32)
    explore = np.where(rng.random(B) < 0.3, rng.integers(1, 4, B), 0).astype(np.int32)
    if A > N_ACTIONS:
        explore = np.where(rng.random(B) < 0.15, EXPLORE_QUOTE + rng.integers(N_ACTIONS, A, B), explore).astype(np.int32)
    isv = isv_values(gate_enabled=1.0, gate_threshold=0.4, gate_warmup_steps=0, hold_frac_ema=0.5,
                     stop_loss_threshold=2.5, mean_abs_pnl_ema=0.8, explore_eps_start=0.9, explore_eps_end=0.1,
                     explore_eps_steps=1000, step_lo=400, explore_hold_steps=4, distill_temperature=0.5)
    return q, logits, state, explore, lots, drawdown, isv


def reward_inputs(rng, B):
    pnl = (rng.standard_normal(B) * 4).astype(np.float32)
    drawdown = np.abs(rng.standard_normal(B) * 2).astype(np.float32)
    isv = isv_values(popart_var=2.0, reward_clamp_lo=-2.0, reward_clamp_hi=2.5, drawdown_penalty_rate=0.1)
    return pnl, drawdown, isv


def stats_inputs(rng, B, A=N_ACTIONS):
    """agent_step_end's per-backtest inputs (an agent of A actions): probs, actions, flags, reward_raw,
    reward_scaled, clipped, closed, closed_pnl, lots."""
    probs = rng.dirichlet(np.ones(A), B).astype(np.float32)
    probs[rng.random((B, A)) < 0.3] = 0.0  # invalid actions: probability 0, no entropy
    return [probs, rng.integers(0, A, B).astype(np.int32), rng.integers(0, 4, B).astype(np.uint32),
            rng.standard_normal(B).astype(np.float32), rng.standard_normal(B).astype(np.float32),
            rng.integers(0, 2, B).astype(np.uint32), rng.integers(0, 3, B).astype(np.uint32),
            rng.standard_normal(B).astype(np.float32), rng.integers(-1, 2, B).astype(np.int32)]


STEP_END_OUT = {"stats": 10, "isv": 11, "isv_host": 12, "ring": 15}  # agent_step_end's outputs in run_kernel's list


def step_end_args(rng, B, isv, losses, ring_len=8, A=N_ACTIONS):
    """agent_step_end's arguments for run_kernel, its outputs (stats, the host's ISV view, the ring) poisoned."""
    slots = np.array([slot_index(n) for n in FRAME_ISV], np.int32)
    return [*stats_inputs(rng, B, A), B, losses, poisoned(N_STATS, np.float64), isv, poisoned(N_SLOTS),
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


def quote_state_inputs(rng, B, tick=250_000_000, n_snaps=64):
    """agent_state_quotes' inputs after agent_state's: (snaps, cursor, q_px, q_state, q_front, q_since, quote_since,
    quote_steps) of B backtests: orders none, sent or live, at the touch, behind it or past it, fronts whole or not,
    some sides' touches empty, some orders new since the last step."""
    from foxc.data.record import LEVELS, PRICE_UNDEF, SNAPSHOT_DTYPE
    from foxc.lobsim.layout import QUEUE_NONE
    s = np.zeros(n_snaps, SNAPSHOT_DTYPE)
    mid = 100_000_000_000 + rng.integers(-20, 20, n_snaps) * tick
    for lv in range(LEVELS):
        s["bid_px"][:, lv], s["ask_px"][:, lv] = mid - (lv + 1) * tick, mid + (lv + 1) * tick
    s["bid_sz"], s["ask_sz"] = rng.integers(0, 9, (n_snaps, LEVELS)), rng.integers(1, 9, (n_snaps, LEVELS))
    empty = rng.random(n_snaps) < 0.1
    s["bid_px"][empty], s["bid_sz"][empty] = PRICE_UNDEF, 0
    cursor = rng.integers(0, n_snaps, B).astype(np.int64)
    q_state = rng.integers(0, 3, (2, B)).astype(np.uint32)
    q_px = np.stack([mid[cursor] - rng.integers(0, 5, B) * tick, mid[cursor] + rng.integers(0, 5, B) * tick])
    q_front = rng.integers(0, 12, (2, B)) + np.where(rng.random((2, B)) < 0.3, rng.random((2, B)), 0.0)
    q_since = rng.integers(1, 5, (2, B)).astype(np.int64)
    quote_since = np.where(rng.random((2, B)) < 0.7, q_since, q_since + 1).astype(np.int64)
    quote_steps = np.where(q_state == QUEUE_NONE, 0, rng.integers(0, 100, (2, B))).astype(np.int32)
    return s, cursor, q_px.astype(np.int64), q_state, q_front.astype(np.float64), q_since, quote_since, quote_steps
