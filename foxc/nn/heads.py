"""The C51 head's distribution (cuda/nn/heads.cu): atoms -> probabilities and Q values.

The head matrices are linear layers (`matmul.plan_linear`); this kernel reads their logits.
C51's support [v_min, v_max] comes from the ISV slots c51_v_min / c51_v_max. Q of an action that
changes nothing for the state's position side (`foxc.agent.layout.valid_actions`) is Q_INVALID,
so neither acting nor the C51 target ever takes one.
"""
from __future__ import annotations

import numpy as np

from ..agent.layout import Q_INVALID, valid_actions
from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from . import functional as F
from .layout import C51_ATOMS, N_ACTIONS, N_PERCEPTION  # noqa: F401

MODULE = "nn/heads"
BLOCK = 256
Q_OUTPUTS = N_ACTIONS * C51_ATOMS

C51_DISTRIBUTION = KernelSpec("c51_distribution", MODULE, (
    ptr("probs"), ptr("q"), ptr("logits"), ptr("isv"), ptr("side"), i32("side_stride"), i32("B")),
    doc="probs[B,5,51] softmax over atoms, q[B,5] expectation on the ISV support (Q_INVALID where the "
        "action is not valid for side[b * side_stride])")


def isv_support(isv) -> tuple[np.float32, np.float32]:
    values = isv.f32()
    return values[slot_index("c51_v_min")], values[slot_index("c51_v_max")]


def mask_invalid(q: np.ndarray, side: np.ndarray) -> np.ndarray:
    """q [B, 5] with Q_INVALID where an action is not valid for the sign of side [B]."""
    return np.where(valid_actions(np.sign(side)), q, np.float32(Q_INVALID)).astype(q.dtype)


@reference(C51_DISTRIBUTION)
def _c51_distribution(launch, probs, q, logits, isv, side, side_stride, B):
    B, stride = int(B), int(side_stride)
    v_min, v_max = isv_support(isv)
    p, qv = F.c51_distribution(logits.f32(B * Q_OUTPUTS).reshape(B, Q_OUTPUTS), v_min, v_max)
    probs.f32(B * Q_OUTPUTS)[:] = p.ravel()
    q.f32(B * N_ACTIONS)[:] = mask_invalid(qv, side.f32((B - 1) * stride + 1)[::stride]).ravel()


def grid_for(threads: int) -> int:
    return max(1, -(-threads // BLOCK))


def c51_distribution_grid(B: int) -> int:
    """One warp per (b, action) row."""
    return grid_for(B * N_ACTIONS * 32)


def plan_c51_distribution(rt, probs, q, logits, isv, side, side_stride: int, B: int):
    """`side`: where the side feature of row 0 sits (e.g. `state.at(HIDDEN_DIM)`), rows `side_stride` apart."""
    return rt.plan(C51_DISTRIBUTION, c51_distribution_grid(B), BLOCK, (probs, q, logits, isv, side, side_stride, B))
