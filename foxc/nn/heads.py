"""The C51 head's distribution (cuda/nn/heads.cu): atoms -> probabilities and Q values.

The head matrices are linear layers (`matmul.plan_linear`); this kernel reads their logits.
C51's support [v_min, v_max] comes from the ISV slots c51_v_min / c51_v_max. Q of an action that
changes nothing for the state's position side (`foxc.nn.layout.valid_actions`) is Q_INVALID,
so neither acting nor the C51 target ever takes one.
"""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from . import functional as F
from .layout import C51_ATOMS, N_ACTIONS, ORDERS, Q_INVALID, valid_actions

MODULE = "nn/heads"
BLOCK = 256
Q_OUTPUTS = N_ACTIONS * C51_ATOMS

C51_DISTRIBUTION = KernelSpec("c51_distribution", MODULE, (
    ptr("probs0"), ptr("q0"), ptr("logits0"), ptr("side0"), ptr("probs1"), ptr("q1"), ptr("logits1"), ptr("side1"),
    ptr("isv"), i32("side_stride"), i32("B")),
    doc="per head (blockIdx.y: grid.y heads, 1 or 2): probs[B,5,51] softmax over atoms, q[B,5] expectation on "
        "the ISV support (Q_INVALID where the action is not valid for side[b * side_stride])")
C51_DISTRIBUTION_QUOTES = KernelSpec("c51_distribution_quotes", MODULE, C51_DISTRIBUTION.params,
                                     doc="c51_distribution for the agent with resting orders: [B, 9, 51], q[B, 9]")
# the kernel of each action count (--orders market: 5, passive: 9)
C51_DISTRIBUTIONS = {ORDERS["market"]: C51_DISTRIBUTION, ORDERS["passive"]: C51_DISTRIBUTION_QUOTES}


def isv_support(isv) -> tuple[np.float32, np.float32]:
    values = isv.f32()
    return values[slot_index("c51_v_min")], values[slot_index("c51_v_max")]


def mask_invalid(q: np.ndarray, side: np.ndarray) -> np.ndarray:
    """q [B, A] with Q_INVALID where an action is not valid for the sign of side [B]."""
    return np.where(valid_actions(np.sign(side), q.shape[-1]), q, np.float32(Q_INVALID)).astype(q.dtype)


def _distribution(A: int):
    def ref(launch, probs0, q0, logits0, side0, probs1, q1, logits1, side1, isv, side_stride, B):
        B, stride, n = int(B), int(side_stride), A * C51_ATOMS
        v_min, v_max = isv_support(isv)
        heads = ((probs0, q0, logits0, side0), (probs1, q1, logits1, side1))
        for probs, q, logits, side in heads[:min(launch.grid[1], 2)]:
            p, qv = F.c51_distribution(logits.f32(B * n).reshape(B, n), v_min, v_max)
            probs.f32(B * n)[:] = p.ravel()
            q.f32(B * A)[:] = mask_invalid(qv, side.f32((B - 1) * stride + 1)[::stride]).ravel()
    return ref


for _A, _spec in C51_DISTRIBUTIONS.items():
    reference(_spec)(_distribution(_A))


def grid_for(threads: int) -> int:
    return max(1, -(-threads // BLOCK))


def c51_distribution_grid(B: int, n_heads: int = 1, n_actions: int = N_ACTIONS) -> tuple[int, int]:
    """One warp per (b, action) row of each head; grid.y: the head."""
    return grid_for(B * n_actions * 32), n_heads


def plan_c51_distribution(rt, heads, isv, side_stride: int, B: int, n_actions: int = N_ACTIONS):
    """One launch for one or two heads, each (probs, q, logits, side) on B states. `side`: where the side
    feature of row 0 sits (e.g. `state.at(HIDDEN_DIM)`), rows `side_stride` apart."""
    if len(heads) not in (1, 2):
        raise ValueError(f"c51_distribution takes one or two heads, got {len(heads)}")
    second = heads[1] if len(heads) == 2 else heads[0]  # not read with one head (grid.y = 1)
    return rt.plan(C51_DISTRIBUTIONS[n_actions], c51_distribution_grid(B, len(heads), n_actions), BLOCK,
                   (*heads[0], *second, isv, side_stride, B))
