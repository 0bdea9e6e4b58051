"""Losses and their gradients (cuda/nn/losses.cu): C51 cross-entropy, value MSE, policy distillation, masked BCE.

Per-sample losses are written out (the C51 one also a |TD| for the priorities); the gradients
are those of the batch mean, so they already carry the 1/B. The value and policy losses, a few
flops a sample each, share one launch (`value_policy_loss`). `loss_means` reduces the four
per-sample losses to their means in one launch, each in a fixed order.
"""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from ..isv.registry import slot_index
from . import functional as F
from .heads import N_ACTIONS, isv_support
from .layout import C51_ATOMS, ORDERS

MODULE = "nn/losses"
BLOCK = 256

C51_LOSS = KernelSpec("c51_loss", MODULE, (
    ptr("grad_logits"), ptr("loss"), ptr("td_error"), ptr("logits"), ptr("next_probs"), ptr("next_q"),
    ptr("action"), ptr("ret"), ptr("gamma_n"), ptr("done"), ptr("weight"), ptr("isv"), i32("B")),
    doc="C51 projection of the n-step target, cross-entropy, |TD|, importance-weighted gradient")
VALUE_POLICY_LOSS = KernelSpec("value_policy_loss", MODULE, (
    ptr("grad_v"), ptr("loss_v"), ptr("advantage"), ptr("v"), ptr("v_next"), ptr("ret"), ptr("gamma_n"), ptr("done"),
    ptr("grad_pi"), ptr("loss_pi"), ptr("pi_logits"), ptr("q"), ptr("isv"), i32("B")),
    doc="value: (v - y)^2 with y = ret + gamma_n (1 - done) v_next, advantage = y - v; policy: KL(softmax(q / T) "
        "|| pi) over the valid actions (q > Q_INVALID / 2), T = ISV distill_temperature; one thread a sample")
C51_LOSS_QUOTES = KernelSpec("c51_loss_quotes", MODULE, C51_LOSS.params,
                             doc="c51_loss for the agent with resting orders: [B, 9, 51], next_q[B, 9]")
VALUE_POLICY_LOSS_QUOTES = KernelSpec("value_policy_loss_quotes", MODULE, VALUE_POLICY_LOSS.params,
                                      doc="value_policy_loss for the agent with resting orders: pi_logits, q [B, 9]")
C51_LOSSES = {ORDERS["market"]: C51_LOSS, ORDERS["passive"]: C51_LOSS_QUOTES}
VALUE_POLICY_LOSSES = {ORDERS["market"]: VALUE_POLICY_LOSS, ORDERS["passive"]: VALUE_POLICY_LOSS_QUOTES}
BCE_MASKED = KernelSpec("bce_masked", MODULE, (
    ptr("grad"), ptr("loss"), ptr("logits"), ptr("labels"), ptr("mask"), i32("rows"), i32("cols")),
    doc="mask * BCE-with-logits and its gradient / rows")
LOSS_MEANS = KernelSpec("loss_means", MODULE, (
    ptr("out"), ptr("loss_q"), ptr("loss_pi"), ptr("loss_v"), ptr("loss_bce"), i32("B"), i32("n_bce")),
    doc="out[0..4) = the means of loss_q, loss_pi, loss_v (B each) and loss_bce (n_bce); grid 4, block 256")


def _c51_loss(A: int):
    def ref(launch, grad_logits, loss, td_error, logits, next_probs, next_q, action, ret, gamma_n, done, weight,
            isv, B):
        B, n = int(B), A * C51_ATOMS
        v_min, v_max = isv_support(isv)
        m = F.c51_project(next_probs.f32(B * n).reshape(B, A, -1), next_q.f32(B * A).reshape(B, A),
                          ret.f32(B), gamma_n.f32(B), done.f32(B), v_min, v_max)
        act = np.clip(action.i32(B), 0, A - 1)
        lb, td, g = F.c51_loss_grad(logits.f32(B * n).reshape(B, n), m, act, weight.f32(B),
                                    F.c51_support(v_min, v_max))
        loss.f32(B)[:] = lb
        td_error.f32(B)[:] = td
        grad_logits.f32(B * n)[:] = g.ravel()
    return ref


def _value_policy_loss(A: int):
    def ref(launch, grad_v, loss_v, advantage, v, v_next, ret, gamma_n, done, grad_pi, loss_pi, pi_logits, q, isv, B):
        B = int(B)
        y = F.value_target(v_next.f32(B), ret.f32(B), gamma_n.f32(B), done.f32(B))
        adv = y - v.f32(B)
        loss_v.f32(B)[:] = adv * adv
        advantage.f32(B)[:] = adv
        grad_v.f32(B)[:] = np.float32(-2) * adv / np.float32(B)

        T = max(isv.f32()[slot_index("distill_temperature")], np.float32(1e-6))
        lg = pi_logits.f32(B * A).reshape(B, A)
        qv = q.f32(B * A).reshape(B, A)
        target, valid = F.distill_target(qv, T)
        z = np.where(valid, lg, -np.inf)
        pi = np.exp(z - z.max(axis=1, keepdims=True))
        pi = pi / pi.sum(axis=1, keepdims=True)
        loss_pi.f32(B)[:] = F.distill_loss(lg, qv, T)
        grad_pi.f32(B * A)[:] = np.where(valid, (pi - target) / np.float32(B), 0).astype(np.float32).ravel()
    return ref


for _A in ORDERS.values():
    reference(C51_LOSSES[_A])(_c51_loss(_A))
    reference(VALUE_POLICY_LOSSES[_A])(_value_policy_loss(_A))


@reference(BCE_MASKED)
def _bce_masked(launch, grad, loss, logits, labels, mask, rows, cols):
    n = int(rows) * int(cols)
    x, y, mk = logits.f32(n), labels.f32(n), mask.f32(n)
    on = mk != 0
    with np.errstate(invalid="ignore"):
        loss.f32(n)[:] = np.where(on, F.bce_masked(x, y, mk), np.float32(0))
        grad.f32(n)[:] = np.where(on, mk * (F.sigmoid(x) - y) / np.float32(rows), np.float32(0))


@reference(LOSS_MEANS)
def _loss_means(launch, out, loss_q, loss_pi, loss_v, loss_bce, B, n_bce):
    means = out.f32(4)
    for k, (x, n) in enumerate(((loss_q, B), (loss_pi, B), (loss_v, B), (loss_bce, n_bce))):
        means[k] = x.f32(int(n)).sum(dtype=np.float64) / int(n)


def grid_for(threads: int) -> int:
    return max(1, -(-threads // BLOCK))


C51_BLOCK = 128  # c51_loss: one warp per sample


def c51_loss_grid(B: int) -> int:
    return max(1, -(-B * 32 // C51_BLOCK))


def plan_c51_loss(rt, B: int, n_actions: int = N_ACTIONS, **args):
    """c51_loss over B samples for an agent of n_actions; every other argument by its parameter name."""
    return rt.plan(C51_LOSSES[n_actions], c51_loss_grid(B), C51_BLOCK, dict(args, B=B))


def plan_value_policy_loss(rt, B: int, n_actions: int = N_ACTIONS, **args):
    """value_policy_loss over B samples for an agent of n_actions; every other argument by its parameter name."""
    return rt.plan(VALUE_POLICY_LOSSES[n_actions], grid_for(B), BLOCK, dict(args, B=B))


def plan_bce_masked(rt, grad, loss, logits, labels, mask, rows: int, cols: int):
    return rt.plan(BCE_MASKED, min(grid_for(rows * cols), 4096), BLOCK, (grad, loss, logits, labels, mask, rows, cols))


def plan_loss_means(rt, out, loss_q, loss_pi, loss_v, loss_bce, B: int, n_bce: int):
    return rt.plan(LOSS_MEANS, 4, BLOCK, (out, loss_q, loss_pi, loss_v, loss_bce, B, n_bce))
