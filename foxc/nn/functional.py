"""The model's math in plain numpy, generic over float32 and float64.

The kernel references call these on float32 data (what the GPU computes); the gradient
checks call them on float64 data and difference them, so every backward kernel is checked
against the forward definition here rather than against a second hand-derived formula.
"""
from __future__ import annotations

import numpy as np

from .layout import ACT_IDENTITY, ACT_RELU, ACT_SIGMOID, ACT_TANH, C51_ATOMS, N_ACTIONS, Q_INVALID  # noqa: F401



def round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to TF32 (10-bit mantissa) the way cvt.rna.tf32.f32 does: nearest, ties away from zero."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000), bits)
    return rounded.astype(np.uint32).view(np.float32)


def matmul32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a . b in float64, rounded once to float32."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def activate(z, act: int):
    if act == ACT_RELU:
        return np.maximum(z, 0)
    if act == ACT_TANH:
        return np.tanh(z)
    if act == ACT_SIGMOID:
        return sigmoid(z)
    return z


def activate_grad(y, act: int):
    """The activation's derivative expressed through its output y (what act_bwd uses)."""
    if act == ACT_RELU:
        return (y > 0).astype(y.dtype)
    if act == ACT_TANH:
        return 1 - y * y
    if act == ACT_SIGMOID:
        return y * (1 - y)
    return np.ones_like(y)


def linear(x, w, b, act: int = ACT_IDENTITY):
    return activate(x @ w + b, act)


# ---- the selective diagonal SSM scan -------------------------------------------------------
# z[K, B, 4D] holds, per step and channel, the pre-activations of the value u = tanh, the decay
# a = sigmoid, the input gate i = sigmoid and the output gate g = sigmoid. s_t = a_t s_{t-1} + i_t u_t
# from s_{-1} = 0; the encoder's output is y = g_{K-1} * s_{K-1}.

def ssm_parts(z, D: int):
    return np.tanh(z[..., :D]), sigmoid(z[..., D:2 * D]), sigmoid(z[..., 2 * D:3 * D]), sigmoid(z[..., 3 * D:])


def ssm_scan(z, D: int):
    """(states s[K,B,D], output y[B,D]) of the scan over z[K,B,4D]."""
    u, a, i, g = ssm_parts(z, D)
    s = np.zeros(u.shape, z.dtype)
    prev = np.zeros(u.shape[1:], z.dtype)
    for t in range(z.shape[0]):
        prev = a[t] * prev + i[t] * u[t]
        s[t] = prev
    return s, g[-1] * s[-1]


def ssm_scan_grad(z, s, dy, D: int):
    """dz[K,B,4D] from dy[B,D]: the reverse scan."""
    return ssm_scan_grad_gates(np.concatenate(ssm_parts(z, D), axis=-1), s, dy, D)


def ssm_scan_grad_gates(gates, s, dy, D: int):
    """ssm_scan_grad from the gates [u, a, i, g] (g read at the last step only) instead of z: what the
    fused backwards take from the fused forwards."""
    u, a, i, g = gates[..., :D], gates[..., D:2 * D], gates[..., 2 * D:3 * D], gates[-1, :, 3 * D:]
    dz = np.zeros(gates.shape, gates.dtype)
    ds = dy * g
    dz[-1, :, 3 * D:] = dy * s[-1] * g * (1 - g)
    for t in range(gates.shape[0] - 1, -1, -1):
        prev = s[t - 1] if t > 0 else np.zeros_like(ds)
        dz[t, :, :D] = ds * i[t] * (1 - u[t] * u[t])
        dz[t, :, D:2 * D] = ds * prev * a[t] * (1 - a[t])
        dz[t, :, 2 * D:3 * D] = ds * u[t] * i[t] * (1 - i[t])
        ds = ds * a[t]
    return dz


# ---- heads ---------------------------------------------------------------------------------

def log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def c51_support(v_min, v_max, dtype=np.float32):
    dz = (dtype(v_max) - dtype(v_min)) / dtype(C51_ATOMS - 1)
    return dtype(v_min) + np.arange(C51_ATOMS, dtype=dtype) * dz


def c51_distribution(logits, v_min, v_max):
    """(probs[B,5,51], q[B,5]) from logits[B, 5*51]."""
    p = np.exp(log_softmax(logits.reshape(logits.shape[0], -1, C51_ATOMS)))
    return p, (p * c51_support(v_min, v_max, logits.dtype.type)).sum(axis=-1)


def c51_project(next_probs, next_q, ret, gamma_n, done, v_min, v_max):
    """The target distribution m[B,51]: the next state's distribution under its greedy action,
    shifted by r + gamma^n (1 - done) z, clipped to the support, split onto the two nearest atoms."""
    dt = next_probs.dtype.type
    B = next_probs.shape[0]
    z = c51_support(v_min, v_max, dt)
    dz = (dt(v_max) - dt(v_min)) / dt(C51_ATOMS - 1)
    best = np.argmax(next_q, axis=1)
    p = next_probs[np.arange(B), best]
    tz = np.clip(ret[:, None] + (gamma_n * (1 - done))[:, None] * z[None, :], dt(v_min), dt(v_max))
    bj = np.clip((tz - dt(v_min)) / dz, dt(0), dt(C51_ATOMS - 1))
    lo, hi = np.floor(bj), np.ceil(bj)
    rows = np.repeat(np.arange(B), C51_ATOMS)
    m = np.zeros((B, C51_ATOMS), dt)
    same = (lo == hi).astype(dt)
    np.add.at(m, (rows, lo.astype(np.int64).ravel()), (p * (hi - bj) + p * same).ravel())
    np.add.at(m, (rows, hi.astype(np.int64).ravel()), (p * (bj - lo)).ravel())
    return m


def c51_cross_entropy(logits, m, action):
    """Per-sample -sum_i m_i log p_i(s, a) of the online distribution of the taken action."""
    B = logits.shape[0]
    logp = log_softmax(logits.reshape(B, -1, C51_ATOMS))[np.arange(B), action]
    return -(m * logp).sum(axis=-1)


def c51_loss_grad(logits, m, action, weight, support):
    """(per-sample loss, |TD| between the expectations of m and of the online distribution,
    d(mean_b weight_b loss_b)/dlogits)."""
    B = logits.shape[0]
    lg = logits.reshape(B, -1, C51_ATOMS)
    p = np.exp(log_softmax(lg[np.arange(B), action]))
    grad = np.zeros_like(lg)
    grad[np.arange(B), action] = (weight / B)[:, None] * (p - m)
    td = np.abs((m * support).sum(axis=-1) - (p * support).sum(axis=-1))
    return c51_cross_entropy(logits, m, action), td, grad.reshape(B, -1)


def value_target(v_next, ret, gamma_n, done):
    return ret + gamma_n * (1 - done) * v_next


def value_loss(v, y):
    """Per-sample (v - y)^2; the batch loss is the mean."""
    return (v - y) ** 2


def distill_target(q, temperature):
    """softmax(q / T) over the valid actions (q above Q_INVALID / 2), 0 on the others."""
    valid = q > 0.5 * Q_INVALID
    z = np.where(valid, q / temperature, -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.where(valid, np.exp(z), 0)
    return e / e.sum(axis=-1, keepdims=True), valid


def distill_loss(logits, q, temperature):
    """Per-sample KL(softmax(q / T) || pi) over the valid actions, pi the softmax of the logits there:
    the policy head learns the Boltzmann policy of the C51 head's means (held constant)."""
    t, valid = distill_target(q, temperature)
    z = np.where(valid, logits, -np.inf)
    log_pi = z - z.max(axis=-1, keepdims=True)
    log_pi = log_pi - np.log(np.where(valid, np.exp(log_pi), 0).sum(axis=-1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(valid, t * (np.log(np.where(valid, t, 1)) - np.where(valid, log_pi, 0)), 0)
    return terms.sum(axis=-1)


def bce_masked(logits, labels, mask):
    """Elementwise mask * BCE-with-logits, in the overflow-free form."""
    return mask * (np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits))))
