"""What an evaluated policy sees and returns.

A policy is any callable `policy(ctx: PolicyContext) -> actions` or `-> (actions, probs)`:
`actions` int [B] in HOLD..FLAT_FROM_SHORT, `probs` float [B, 5] the distribution they were
chosen from (optional; it gives the policy entropy). `ctx.greedy` says whether to take the
most probable action or to sample (`ctx.rng`). A policy may carry `name` (shown in reports)
and `is_baseline` (True for anything that is not the RL agent).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..lobsim.layout import HOLD


@dataclass
class PolicyContext:
    records: np.ndarray   # the evaluated window: SNAPSHOT_DTYPE records, time order
    cursor: np.ndarray    # int64 [B]: index into `records` of the snapshot each backtest acts on
    active: np.ndarray    # bool [B]: False once a backtest has finished its chunk (its action is ignored)
    lots: np.ndarray      # int32 [B]: position before this step (> 0 long, < 0 short)
    step: int             # steps taken so far
    tick: int             # price units per tick
    greedy: bool
    rng: np.random.Generator
    sim: object = None    # the simulator's device state (foxc.lobsim.LobSim): what a device policy reads

    @property
    def obs(self) -> np.ndarray:
        """The snapshot each backtest acts on, [B] SNAPSHOT_DTYPE."""
        return self.records[self.cursor]

    def window(self, k: int) -> np.ndarray:
        """Indices [B, k] of the k snapshots ending at each cursor, clamped to the window's first row
        (a policy that needs segment-exact windows checks `records['segment']`)."""
        return np.maximum(self.cursor[:, None] - np.arange(k - 1, -1, -1), 0)


def split_decision(out, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A policy's return value as (actions int32 [n], probs float64 [n, 5] or None), checked."""
    actions, probs = (out if isinstance(out, tuple) else (out, None))
    actions = np.asarray(actions)
    if actions.shape != (n,) or not np.issubdtype(actions.dtype, np.integer):
        raise ValueError(f"a policy must return integer actions of shape ({n},), got {actions.dtype}{actions.shape}")
    if probs is not None:
        probs = np.asarray(probs, np.float64)
        if probs.shape != (n, 5):
            raise ValueError(f"a policy's probs must have shape ({n}, 5), got {probs.shape}")
    return actions.astype(np.int32), probs


class ScriptedPolicy:
    """Plays a fixed action per snapshot index: `script[i]` is the action at records[i]."""

    name = "scripted"
    is_baseline = True

    def __init__(self, script):
        self.script = np.asarray(script, np.int32)

    def __call__(self, ctx: PolicyContext):
        return np.where(ctx.active, self.script[ctx.cursor], HOLD).astype(np.int32)
