"""Head distributions (cuda/nn/heads.cu): C51 atoms -> probabilities and Q values, policy softmax.

The head matrices are linear layers (`matmul.plan_linear`); these kernels read their logits.
C51's support [v_min, v_max] comes from the ISV slots c51_v_min / c51_v_max.
"""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from . import functional as F

MODULE = "nn/heads"
BLOCK = 256
N_ACTIONS = F.N_ACTIONS
C51_ATOMS = F.C51_ATOMS
Q_OUTPUTS = N_ACTIONS * C51_ATOMS
N_PERCEPTION = 9  # up/down x 3 horizons, long wins x 3, short wins x 3

C51_DISTRIBUTION = KernelSpec("c51_distribution", MODULE, (ptr("probs"), ptr("q"), ptr("logits"), ptr("isv"), i32("B")),
                              doc="probs[B,5,51] softmax over atoms, q[B,5] expectation on the ISV support")
POLICY_SOFTMAX = KernelSpec("policy_softmax", MODULE, (ptr("probs"), ptr("log_probs"), ptr("logits"), i32("B")),
                            doc="probs[B,5] and log_probs[B,5] of logits[B,5]")


def isv_support(isv) -> tuple[np.float32, np.float32]:
    values = isv.f32()
    return values[slot_index("c51_v_min")], values[slot_index("c51_v_max")]


@reference(C51_DISTRIBUTION)
def _c51_distribution(launch, probs, q, logits, isv, B):
    B = int(B)
    v_min, v_max = isv_support(isv)
    p, qv = F.c51_distribution(logits.f32(B * Q_OUTPUTS).reshape(B, Q_OUTPUTS), v_min, v_max)
    probs.f32(B * Q_OUTPUTS)[:] = p.ravel()
    q.f32(B * N_ACTIONS)[:] = qv.ravel()


@reference(POLICY_SOFTMAX)
def _policy_softmax(launch, probs, log_probs, logits, B):
    B = int(B)
    lp = F.log_softmax(logits.f32(B * N_ACTIONS).reshape(B, N_ACTIONS))
    log_probs.f32(B * N_ACTIONS)[:] = lp.ravel()
    probs.f32(B * N_ACTIONS)[:] = np.exp(lp).ravel()


def grid_for(threads: int) -> int:
    return max(1, -(-threads // BLOCK))


def c51_distribution_grid(B: int) -> int:
    """One warp per (b, action) row."""
    return grid_for(B * N_ACTIONS * 32)


def plan_c51_distribution(rt, probs, q, logits, isv, B: int):
    return rt.plan(C51_DISTRIBUTION, c51_distribution_grid(B), BLOCK, (probs, q, logits, isv, B))


def plan_policy_softmax(rt, probs, log_probs, logits, B: int):
    return rt.plan(POLICY_SOFTMAX, grid_for(B), BLOCK, (probs, log_probs, logits, B))
