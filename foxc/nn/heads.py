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
from .layout import C51_ATOMS, N_ACTIONS, Q_INVALID, valid_actions

MODULE = "nn/heads"
BLOCK = 256
Q_OUTPUTS = N_ACTIONS * C51_ATOMS

C51_DISTRIBUTION = KernelSpec("c51_distribution", MODULE, (
    ptr("probs0"), ptr("q0"), ptr("logits0"), ptr("side0"), ptr("probs1"), ptr("q1"), ptr("logits1"), ptr("side1"),
    ptr("isv"), i32("side_stride"), i32("B")),
    doc="per head (blockIdx.y: grid.y heads, 1 or 2): probs[B,5,51] softmax over atoms, q[B,5] expectation on "
        "the ISV support (Q_INVALID where the action is not valid for side[b * side_stride])")


def isv_support(isv) -> tuple[np.float32, np.float32]:
    values = isv.f32()
    return values[slot_index("c51_v_min")], values[slot_index("c51_v_max")]


def mask_invalid(q: np.ndarray, side: np.ndarray) -> np.ndarray:
    """q [B, 5] with Q_INVALID where an action is not valid for the sign of side [B]."""
    return np.where(valid_actions(np.sign(side)), q, np.float32(Q_INVALID)).astype(q.dtype)


@reference(C51_DISTRIBUTION)
def _c51_distribution(launch, probs0, q0, logits0, side0, probs1, q1, logits1, side1, isv, side_stride, B):
    B, stride = int(B), int(side_stride)
    v_min, v_max = isv_support(isv)
    heads = ((probs0, q0, logits0, side0), (probs1, q1, logits1, side1))
    for probs, q, logits, side in heads[:min(launch.grid[1], 2)]:
        p, qv = F.c51_distribution(logits.f32(B * Q_OUTPUTS).reshape(B, Q_OUTPUTS), v_min, v_max)
        probs.f32(B * Q_OUTPUTS)[:] = p.ravel()
        q.f32(B * N_ACTIONS)[:] = mask_invalid(qv, side.f32((B - 1) * stride + 1)[::stride]).ravel()


def grid_for(threads: int) -> int:
    return max(1, -(-threads // BLOCK))


def c51_distribution_grid(B: int, n_heads: int = 1) -> tuple[int, int]:
    """One warp per (b, action) row of each head; grid.y: the head."""
    return grid_for(B * N_ACTIONS * 32), n_heads


def plan_c51_distribution(rt, heads, isv, side_stride: int, B: int):
    """One launch for one or two heads, each (probs, q, logits, side) on B states. `side`: where the side
    feature of row 0 sits (e.g. `state.at(HIDDEN_DIM)`), rows `side_stride` apart."""
    if len(heads) not in (1, 2):
        raise ValueError(f"c51_distribution takes one or two heads, got {len(heads)}")
    second = heads[1] if len(heads) == 2 else heads[0]  # not read with one head (grid.y = 1)
    return rt.plan(C51_DISTRIBUTION, c51_distribution_grid(B, len(heads)), BLOCK,
                   (*heads[0], *second, isv, side_stride, B))
