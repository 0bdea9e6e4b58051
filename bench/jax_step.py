"""foxc's training step written in JAX: one jax.jit function, several steps per dispatch, beside foxc's own.

    PYTHONPATH=$PWD python bench/jax_step.py [--n-backtests 256,1024,4096] [--steps N] [--steps-per-call U]
                                             [--seq-len K] [--per-capacity C] [--precision f32|tf32]
                                             [--no-foxc] [--json FILE]

The same step as bench/torch_step.py (and foxc/trainer/step.py), written the way JAX trainers of this
kind are (PureJaxRL, Craftax, JAX-LOB): the whole step is a pure function of a state pytree; U steps
run inside one `lax.scan` under one `jax.jit` with the state donated (`donate_argnums`), so a
dispatch costs one launch of XLA's fused program and no copy of the state. The encoder's scan is
`lax.scan`, the gradients come from `jax.vjp` / `jax.value_and_grad`, AdamW and the global-norm
clip are written by hand (optax's versions are the same arithmetic). Per batch size B it compiles,
warms up until the replay buffer is full, checks that the state is sane (finite weights, losses and
priorities, the expected shapes), then times steps/s with `block_until_ready`. With a GPU it also
times foxc's mega-graph step in the same process (`foxc.bench.train.bench_one`).

The phases and what differs from foxc are those of bench/torch_step.py (bench/README.md lists them);
in addition money is float32 here (cash as marked-to-market PnL per step, not an absolute balance),
and the replay's flush and the first step's skipped push are `lax.cond` / masks rather than Python
branches, since the step is one traced function.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # peer_common beside this file, also when loaded by a test
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from peer_common import (ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_WD, C51_ATOMS, F_MID_REL, F_SPREAD,  # noqa: E402
                         FEATURES, FLAT_FROM_LONG, FLAT_FROM_SHORT, FRAME, HIDDEN_DIM, HOLD, LONG, N_ACTIONS,
                         Q_INVALID, RING, SHORT, SIDE, SPREAD_CAP_TICKS, STATE_DIM, TARGET, TENSORS,
                         TIME_SCALE_STEPS, UNREALIZED_SCALE_TICKS, PeerConfig, bench_foxc, foxc_weights, git_commit,
                         isv, market_tables, peer_settings, run_sizes, tick_price, valid_table)


# foxc allocates its own device memory in the same process: JAX takes what it needs, not 75 % up front
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
try:
    import jax
    import jax.numpy as jnp
    from jax import lax
    MISSING_JAX = None
except ImportError as e:  # main says so and exits with status 2; foxc does not depend on jax
    jax = jnp = lax = None
    MISSING_JAX = (f"JAX is not installed ({e}); this peer benchmark needs jax "
                   "(pip install jax, or jax[cuda13] for the GPU), foxc itself does not")


# ---- settings -----------------------------------------------------------------------------------------

class Settings:
    """foxc's ISV bootstrap values the step reads (static: constants of the traced function)."""

    def __init__(self, cfg: PeerConfig):
        self.cfg = cfg
        vars(self).update(asdict(peer_settings()))
        self.lr = {name: isv(slot) for name, (_, slot) in TENSORS.items()}


def support(s: Settings):
    return jnp.linspace(s.v_min, s.v_max, C51_ATOMS, dtype=jnp.float32)


# ---- the model: foxc's tensors as they are ([in, out] weights), x @ W + b ------------------------

def encode(p, x):
    """x [K, B, F] -> h [B, D]: z = x W_in + b_in, s_t = a_t s_{t-1} + i_t u_t by lax.scan, y = g_{K-1} s_{K-1}."""
    D = HIDDEN_DIM
    z = x @ p["enc_w_in"] + p["enc_b_in"]
    u, a, i = jnp.tanh(z[..., :D]), jax.nn.sigmoid(z[..., D:2 * D]), jax.nn.sigmoid(z[..., 2 * D:3 * D])
    g = jax.nn.sigmoid(z[-1, :, 3 * D:])
    s, _ = lax.scan(lambda s, ai: (ai[0] * s + ai[1], None), jnp.zeros_like(u[0]), (a, i * u))
    return jnp.tanh((g * s) @ p["enc_w_out"] + p["enc_b_out"])


def c51_heads(logits, side, sup):
    """probs [B, 5, 51], Q means [B, 5] (Q_INVALID where not valid for side) and the valid mask."""
    probs = jax.nn.softmax(logits.reshape(-1, N_ACTIONS, C51_ATOMS), -1)
    valid = jnp.asarray(valid_table())[side.astype(jnp.int32) + 1]
    return probs, jnp.where(valid, (probs * sup).sum(-1), Q_INVALID), valid


def trunk(w, b, s):
    return jax.nn.relu(s @ w + b)


def rl_losses(p, target, h, labels, mask, s_t, s_tp1, action, ret, gamma_n, done, weight, st: Settings):
    """(loss, ([l_q, l_pi, l_v, l_bce] as foxc reports them, |TD|)): what TorchStep.rl_losses computes,
    with the same stop-gradients (the encoder learns from the BCE only, the shared layer from C51 only)."""
    sg = lax.stop_gradient
    B = h.shape[0]
    sup = support(st)
    x = h @ p["perception_w"] + p["perception_b"]
    bce = mask * (jnp.maximum(x, 0) - x * labels + jnp.log1p(jnp.exp(-jnp.abs(x))))
    l_bce = bce.sum() / B

    cont = gamma_n * (1 - done)
    next_probs, next_q, _ = c51_heads(trunk(target["rl_w"], target["rl_b"], s_tp1) @ target["dqn_w"]
                                      + target["dqn_b"], s_tp1[:, SIDE], sup)
    pn = next_probs[jnp.arange(B), jnp.argmax(next_q, 1)]
    dz = (st.v_max - st.v_min) / (C51_ATOMS - 1)
    bj = jnp.clip((jnp.clip(ret[:, None] + cont[:, None] * sup, st.v_min, st.v_max) - st.v_min) / dz,
                  0, C51_ATOMS - 1)
    lo, hi = jnp.floor(bj), jnp.ceil(bj)
    rows = jnp.arange(B)[:, None]
    m = jnp.zeros_like(pn).at[rows, lo.astype(jnp.int32)].add(pn * (hi - bj) + pn * (lo == hi))
    m = sg(m.at[rows, hi.astype(jnp.int32)].add(pn * (bj - lo)))
    v_next = sg(trunk(p["rl_w"], p["rl_b"], s_tp1) @ p["value_w"] + p["value_b"])[:, 0]

    z = trunk(p["rl_w"], p["rl_b"], s_t)
    q_logits = z @ p["dqn_w"] + p["dqn_b"]
    logp = jax.nn.log_softmax(q_logits.reshape(B, N_ACTIONS, C51_ATOMS)[jnp.arange(B), action], -1)
    l_q_each = -(m * logp).sum(-1)
    td = sg(jnp.abs(((m - jnp.exp(logp)) * sup).sum(-1)))

    zf = sg(z)
    v = (zf @ p["value_w"] + p["value_b"])[:, 0]
    l_v_each = (v - (ret + cont * v_next)) ** 2
    _, q, valid = c51_heads(sg(q_logits), s_t[:, SIDE], sup)
    goal = jax.nn.softmax(jnp.where(valid, q / st.temperature, -jnp.inf), -1)
    log_pi = jax.nn.log_softmax(jnp.where(valid, zf @ p["policy_w"] + p["policy_b"], -jnp.inf), -1)
    l_pi_each = jnp.where(valid, jax.scipy.special.xlogy(goal, goal) - goal * jnp.where(valid, log_pi, 0.0), 0.0)
    l_pi_each = l_pi_each.sum(-1)
    loss = l_bce + (weight * l_q_each).mean() + l_v_each.mean() + l_pi_each.mean()
    report = jnp.stack([l_q_each.mean(), l_pi_each.mean(), l_v_each.mean(), bce.sum() / bce.size])
    return loss, (report, td)


def learn(p, target, h, enc_vjp, labels, mask, batch, st: Settings):
    """(gradients of every tensor, report, |TD|): the heads' gradients and dh, then the encoder's vjp fed dh."""
    (_, (report, td)), (g_heads, dh) = jax.value_and_grad(rl_losses, argnums=(0, 2), has_aux=True)(
        p, target, h, labels, mask, batch["s_t"], batch["s_tp1"], batch["action"], batch["ret"], batch["gamma_n"],
        batch["done"], batch["weight"], st)
    (g_enc,) = enc_vjp(dh)
    return jax.tree.map(jnp.add, g_heads, g_enc), report, td


def learn_grads(p, target, x, labels, mask, batch, st: Settings):
    """One learning pass on windows x [K, B, F] and a replayed batch: (gradients, h, report, |TD|)."""
    h, enc_vjp = jax.vjp(lambda q: encode(q, x), p)
    grads, report, td = learn(p, target, h, enc_vjp, labels, mask, batch, st)
    return grads, h, report, td


def adamw(p, g, m, v, t, st: Settings):
    """Global-norm clip, then AdamW (foxc's arithmetic: decoupled decay on the old weights) per tensor."""
    norm = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(g)))
    scale = jnp.where(norm > st.clip_norm, st.clip_norm / norm, 1.0)
    t = t + 1
    bc1, bc2 = 1 - ADAM_BETA1 ** t, 1 - ADAM_BETA2 ** t
    new_p, new_m, new_v = {}, {}, {}
    for k in p:
        gk = g[k] * scale
        new_m[k] = ADAM_BETA1 * m[k] + (1 - ADAM_BETA1) * gk
        new_v[k] = ADAM_BETA2 * v[k] + (1 - ADAM_BETA2) * gk * gk
        new_p[k] = p[k] - st.lr[k] * ((new_m[k] / bc1) / (jnp.sqrt(new_v[k] / bc2) + ADAM_EPS) + ADAM_WD * p[k])
    return new_p, new_m, new_v, t


# ---- the state and the step -------------------------------------------------------------------------

def init_state(cfg: PeerConfig, market_n: int, seed: int = 0) -> dict:
    B, K, S, C, n = cfg.B, cfg.K, STATE_DIM, cfg.capacity, cfg.n_step
    f32, i32 = jnp.float32, jnp.int32
    z = lambda *s, dt=f32: jnp.zeros(s, dt)  # noqa: E731
    theta = {k: jnp.asarray(v) for k, v in foxc_weights(seed).items()}
    key, sub = jax.random.split(jax.random.PRNGKey(seed))
    lo, hi = K - 1, market_n - 2
    return {
        "params": theta, "adam_m": jax.tree.map(jnp.zeros_like, theta), "adam_v": jax.tree.map(jnp.zeros_like, theta),
        "adam_t": jnp.zeros((), f32), "target": {k: jnp.array(theta[k], copy=True) for k in TARGET}, "key": key,
        "cursor": jax.random.randint(sub, (B,), lo, hi + 1, i32), "ep_step": z(B, dt=i32),
        "state": z(B, S), "trade_steps": z(B), "prev_lots": z(B), "action": z(B, dt=i32), "log_prob": z(B),
        "explore": z(B, dt=i32), "probs": z(B, N_ACTIONS), "lots": z(B), "equity": z(B), "peak": z(B),
        "entry_equity": z(B), "mark": z(B), "drawdown": z(B), "done": z(B), "reward_raw": z(B), "reward_scaled": z(B),
        "clipped": z(B), "closed": z(B), "closed_pnl": z(B),
        "ring_pos": jnp.zeros((), i32), "ring_s": z(n, B, S), "ring_action": z(n, B, dt=i32), "ring_reward": z(n, B),
        "ring_done": z(n, B), "ring_logp": z(n, B),
        "st_s": z(C, S), "st_s1": z(C, S), "st_action": z(C, dt=i32), "st_ret": z(C), "st_gamma": z(C),
        "st_done": z(C), "st_logp": z(C), "priority": z(C), "max_priority": jnp.ones((), f32),
        "write": jnp.zeros((), i32), "count": jnp.zeros((), i32),
        "beta": jnp.full((), isv("per_beta"), f32), "popart_mean": jnp.full((), isv("popart_mean"), f32),
        "popart_var": jnp.full((), isv("popart_var"), f32), "mean_abs_pnl": jnp.full((), isv("mean_abs_pnl_ema"), f32),
        "loss_ema": z(4), "losses": z(4), "td": z(B), "frames": z(RING, FRAME), "step": jnp.zeros((), i32),
    }


def device_market(tables: dict, tick: int) -> dict:
    """The market tables on the device in float32 (JAX's default precision; see the module doc). The
    window-relative mid feature needs mid differences in ticks: mid2 (int64, which JAX would narrow
    to int32) becomes the mid in ticks from the first snapshot's."""
    out = {k: jnp.asarray(v.astype(np.float32)) for k, v in tables.items() if k != "mid2"}
    mid2 = tables["mid2"]
    out["mid_ticks"] = jnp.asarray(((mid2 - mid2[0]) / (2 * float(tick))).astype(np.float32))
    out["tick_price"] = jnp.float32(tick_price(tick))
    return out


def step(x: dict, mk: dict, st: Settings) -> dict:
    """One training step: the phases of foxc/trainer/step.py on the state pytree `x` (a new one out)."""
    cfg = st.cfg
    B, K, C, n = cfg.B, cfg.K, cfg.capacity, cfg.n_step
    lo, hi = K - 1, mk["mid"].shape[0] - 2
    x = dict(x)
    key, k_act, k_sample, k_reset = jax.random.split(x["key"], 4)
    x["key"] = key
    first = x["step"] == 0
    sup = support(st)

    # gather
    c = x["cursor"]
    idx = c[None, :] + jnp.arange(K)[:, None] - (K - 1)
    feats = mk["features"][idx]
    rel = mk["mid_ticks"][idx] - mk["mid_ticks"][c][None, :]
    feats = feats.at[..., F_MID_REL].set(rel)
    labels, mask = mk["labels"][c], mk["mask"][c]

    # encode, and the learner's gradients (the encoder's forward is shared with acting: one vjp)
    h, enc_vjp = jax.vjp(lambda q: encode(q, feats), x["params"])

    # replay_push: the previous step's entry (skipped on the first step: the position does not advance)
    pos = x["ring_pos"]
    for name, src in (("ring_s", "state"), ("ring_action", "action"), ("ring_reward", "reward_scaled"),
                      ("ring_done", "done"), ("ring_logp", "log_prob")):
        x[name] = x[name].at[pos].set(x[src])

    # state
    lots = x["lots"]
    side = jnp.sign(lots)
    steps_in = jnp.where(side == 0, 0.0, jnp.where(side == jnp.sign(x["prev_lots"]), x["trade_steps"] + 1, 1.0))
    held = jnp.where(side == 0, 1.0, jnp.abs(lots))
    unrealized = jnp.where(side == 0, 0.0, (x["equity"] - x["entry_equity"]) / (held * mk["tick_price"]))
    state = jnp.concatenate([lax.stop_gradient(h), jnp.stack([
        side, jnp.tanh(unrealized / UNREALIZED_SCALE_TICKS), jnp.tanh(steps_in / TIME_SCALE_STEPS),
        jnp.minimum(feats[-1, :, F_SPREAD], SPREAD_CAP_TICKS)], 1)], 1)
    x["trade_steps"], x["prev_lots"], x["state"] = steps_in, lots, state

    # replay_flush: after n pushes the oldest entry leaves with next state s_t
    emit = x["step"] >= n

    def flush(y):
        order = (pos + jnp.arange(1, n + 1)) % n
        r, d = y["ring_reward"][order], y["ring_done"][order]
        alive = jnp.cumprod(1 - d, 0)
        before = jnp.concatenate([jnp.ones_like(alive[:1]), alive[:-1]])
        ret = (before * r * (st.gamma ** jnp.arange(n, dtype=jnp.float32))[:, None]).sum(0)
        rows = (y["write"] + jnp.arange(B)) % C
        old = order[0]
        y = dict(y)
        for name, val in (("st_s", y["ring_s"][old]), ("st_s1", state), ("st_action", y["ring_action"][old]),
                          ("st_logp", y["ring_logp"][old]), ("st_ret", ret), ("st_gamma", st.gamma ** before.sum(0)),
                          ("st_done", 1 - alive[-1]), ("priority", jnp.broadcast_to(y["max_priority"], (B,)))):
            y[name] = y[name].at[rows].set(val)
        y["write"] = (y["write"] + B) % C
        y["count"] = jnp.minimum(y["count"] + B, C)
        return y
    x = lax.cond(emit, flush, lambda y: y, x)
    x["ring_pos"] = jnp.where(first, pos, (pos + 1) % n)

    # act: epsilon-greedy on the online C51 means over the valid actions, exploration held in segments
    p = x["params"]
    _, q, valid = c51_heads(trunk(p["rl_w"], p["rl_b"], state) @ p["dqn_w"] + p["dqn_b"], side, sup)
    best = jnp.argmax(q, 1)
    stepf = x["step"].astype(jnp.float32)
    left = jnp.maximum(1 - stepf / max(st.eps_steps, 1e-30), 0) * (st.eps_steps > 0)
    eps = jnp.clip(st.eps_end + (st.eps_start - st.eps_end) * left, 0, 1)
    u1, u2 = jax.random.uniform(k_act, (2, B))
    segment = jnp.where((x["explore"] != 0) & (u1 < st.segment_end), 0, x["explore"])
    going = segment != 0
    n_valid = valid.sum(1)
    uniform = eps / n_valid
    acts = jnp.arange(N_ACTIONS)
    probs = jnp.where(valid, jnp.where(acts == best[:, None], 1 - eps + uniform[:, None], uniform[:, None]), 0.0)
    iside = side.astype(jnp.int32)
    goal = segment - 2
    keep = jnp.where(goal == iside, HOLD, jnp.where(goal > 0, LONG, jnp.where(goal < 0, SHORT, jnp.where(
        iside > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT))))
    k = jnp.minimum((u2 * n_valid).astype(jnp.int32), n_valid - 1)
    nth = jnp.argmax((jnp.cumsum(valid, 1) > k[:, None]).astype(jnp.int32), 1)
    start = ~going & (x["explore"] == 0) & (u1 < eps)
    action = jnp.where(going, keep, jnp.where(start, nth, best)).astype(jnp.int32)
    reach = jnp.where(nth == LONG, 1, jnp.where(nth == SHORT, -1, jnp.where(nth == HOLD, iside, 0)))
    x["explore"] = jnp.where(start, reach + 2, segment).astype(jnp.int32)
    probs = jnp.where(going[:, None], (acts == action[:, None]).astype(jnp.float32), probs)
    p_taken = probs[jnp.arange(B), action]
    if st.stop_threshold > 0:
        stop = (lots != 0) & (x["drawdown"] / jnp.maximum(x["mean_abs_pnl"], 1e-6) > st.stop_threshold)
        action = jnp.where(stop, jnp.where(lots > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT), action)
    x["action"], x["log_prob"], x["probs"] = action, jnp.log(p_taken), probs

    # simulate: market orders walking 10 levels, mark to the next snapshot's mid
    done = (x["ep_step"] + 1 >= cfg.episode_steps) | (c + 1 >= hi + 1)
    tgt = jnp.where(action == LONG, cfg.lots, jnp.where(action == SHORT, -cfg.lots, lots))
    tgt = jnp.where(((action == FLAT_FROM_LONG) & (lots > 0)) | ((action == FLAT_FROM_SHORT) & (lots < 0)) | done,
                    0.0, tgt)
    dq = tgt - lots

    def walk(want, px, sz):
        fill = jnp.minimum(sz, jnp.maximum(want[:, None] - (jnp.cumsum(sz, -1) - sz), 0))
        return fill.sum(-1), (fill * px).sum(-1)
    bought, cost = walk(jnp.maximum(dq, 0), mk["ask_px"][c], mk["ask_sz"][c])
    sold, proceeds = walk(jnp.maximum(-dq, 0), mk["bid_px"][c], mk["bid_sz"][c])
    new_lots = lots + bought - sold
    mid_next = mk["mid"][c + 1]
    # float32 money: this step's PnL as cash flow plus the marks' change, not a difference of balances
    pnl = proceeds - cost - (bought + sold) * cfg.fee + new_lots * mid_next - lots * x["mark"]
    equity = x["equity"] + pnl
    opened = (lots == 0) & (new_lots != 0)
    closed = (lots != 0) & ((new_lots == 0) | (new_lots * lots < 0))
    x["closed"] = closed.astype(jnp.float32)
    x["closed_pnl"] = jnp.where(closed, equity - x["entry_equity"], 0.0)
    x["entry_equity"] = jnp.where(opened | closed, x["equity"], x["entry_equity"])
    x["peak"] = jnp.where(done, equity, jnp.maximum(x["peak"], equity))
    x["equity"], x["mark"], x["lots"], x["done"] = equity, mid_next, new_lots, done.astype(jnp.float32)
    x["drawdown"] = x["peak"] - equity

    # reward
    penalty = jnp.maximum(st.dd_rate * jnp.maximum(x["drawdown"], 0) / jnp.maximum(x["mean_abs_pnl"], 1e-6), 0)
    raw = st.reward_scale * pnl / mk["tick_price"] - penalty
    scaled = raw / jnp.sqrt(x["popart_var"] + 1e-8)
    x["reward_raw"], x["reward_scaled"] = raw, jnp.clip(scaled, st.clamp_lo, st.clamp_hi)
    x["clipped"] = ((scaled < st.clamp_lo) | (scaled > st.clamp_hi)).astype(jnp.float32)

    # replay_sample: stratified proportional sampling over the priorities
    cdf = jnp.cumsum(x["priority"])
    total = jnp.maximum(cdf[-1], 1e-30)
    u = (jnp.arange(B) + jax.random.uniform(k_sample, (B,))) * (total / B)
    sidx = jnp.minimum(jnp.searchsorted(cdf, u, side="right"), C - 1)
    w = jnp.maximum(x["count"] * x["priority"][sidx] / total, 1e-30) ** -x["beta"]
    batch = {"s_t": x["st_s"][sidx], "s_tp1": x["st_s1"][sidx], "action": x["st_action"][sidx],
             "ret": x["st_ret"][sidx], "gamma_n": x["st_gamma"][sidx], "done": x["st_done"][sidx],
             "weight": w / w.max()}

    # learn and update
    grads, report, td = learn(p, x["target"], h, enc_vjp, labels, mask, batch, st)
    x["params"], x["adam_m"], x["adam_v"], x["adam_t"] = adamw(p, grads, x["adam_m"], x["adam_v"], x["adam_t"], st)
    x["target"] = {k: x["target"][k] + st.tau * (x["params"][k] - x["target"][k]) for k in TARGET}
    x["losses"], x["td"] = report, td

    # priorities
    new = (td + 1e-6) ** st.alpha
    x["priority"] = x["priority"].at[sidx].set(new)
    x["max_priority"] = jnp.maximum(x["max_priority"], new.max())

    # control
    r = st.popart_rate
    d = raw.mean() - x["popart_mean"]
    x["popart_var"] = jnp.maximum((1 - r) * x["popart_var"] + r * raw.var() + r * (1 - r) * d * d, 1e-8)
    x["popart_mean"] = x["popart_mean"] + r * d
    n_closed = x["closed"].sum()
    mean_abs = (jnp.abs(x["closed_pnl"]) * x["closed"]).sum() / jnp.maximum(n_closed, 1)
    x["mean_abs_pnl"] = jnp.where(n_closed > 0, x["mean_abs_pnl"] + st.ema_rate * (mean_abs - x["mean_abs_pnl"]),
                                  x["mean_abs_pnl"])
    x["loss_ema"] = x["loss_ema"] + st.ema_rate * (report - x["loss_ema"])
    x["beta"] = jnp.minimum(x["beta"] + (1 - x["beta"]) / jnp.maximum(st.beta_anneal - stepf, 1), 1.0)

    # diagnostics
    entropy = -jax.scipy.special.xlogy(probs, probs).sum(-1).mean()
    frame = jnp.concatenate([jnp.stack([
        stepf, entropy, (action == HOLD).mean(), (lots != 0).mean(), jnp.zeros(()), raw.mean(), raw.std(),
        x["reward_scaled"].mean(), x["clipped"].mean(), n_closed, x["closed_pnl"].sum()]), report,
        x["popart_var"][None]])
    x["frames"] = x["frames"].at[x["step"] % RING].set(frame)
    x["step"] = x["step"] + 1

    # advance
    fresh = jax.random.randint(k_reset, (B,), lo, hi + 1, jnp.int32)
    x["cursor"] = jnp.where(done, fresh, c + 1)
    x["ep_step"] = jnp.where(done, 0, x["ep_step"] + 1)
    return x


def make_runner(st: Settings, steps_per_call: int):
    """jit(U steps in one lax.scan), the state donated: one dispatch runs U steps in place."""
    def run(x, mk):
        return lax.scan(lambda y, _: (step(y, mk, st), None), x, None, length=steps_per_call)[0]
    return jax.jit(run, donate_argnums=0)


def sane(x: dict, cfg: PeerConfig, done: int) -> tuple[bool, str]:
    """Finite weights, losses and priorities, the expected shapes, a step counter that saw every step."""
    problems = []
    if not all(bool(jnp.isfinite(v).all()) for v in jax.tree.leaves(x["params"])):
        problems.append("non-finite weights")
    if not bool(jnp.isfinite(x["losses"]).all()) or not bool(jnp.isfinite(x["priority"]).all()):
        problems.append(f"non-finite losses {np.asarray(x['losses']).tolist()} or priorities")
    shapes = {"state": (cfg.B, STATE_DIM), "st_s": (cfg.capacity, STATE_DIM), "td": (cfg.B,), "losses": (4,)}
    problems += [f"{k} {tuple(x[k].shape)} != {s}" for k, s in shapes.items() if tuple(x[k].shape) != s]
    problems += [f"{k} {tuple(x['params'][k].shape)} != {s}" for k, (s, _) in TENSORS.items()
                 if tuple(x["params"][k].shape) != tuple(s)]
    if int(x["step"]) != done:
        problems.append(f"step counter {int(x['step'])} after {done} steps")
    return not problems, "; ".join(problems)


def set_precision(precision: str):
    """f32: XLA's default on NVIDIA GPUs is TF32 for f32 matmuls; "highest" keeps FP32 (foxc's f32)."""
    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if precision == "tf32" else "highest")


def bench_jax(tables: dict, mk: dict, cfg: PeerConfig, steps: int, steps_per_call: int) -> dict:
    st = Settings(cfg)
    run = make_runner(st, steps_per_call)
    x = init_state(cfg, len(tables["mid"]))
    calls_warm = -(-cfg.warm_steps() // steps_per_call)
    t0 = time.perf_counter()
    x = run(x, mk)  # compiles
    jax.block_until_ready(x)
    row = {"jax_compile_s": round(time.perf_counter() - t0, 1)}
    for _ in range(calls_warm - 1):
        x = run(x, mk)
    done = calls_warm * steps_per_call
    ok, why = sane(x, cfg, done)
    if not ok:
        return {**row, "jax_ok": False, "jax_error": f"state not sane before timing: {why}"}
    calls = max(1, -(-steps // steps_per_call))
    jax.block_until_ready(x)
    t0 = time.perf_counter()
    for _ in range(calls):
        x = run(x, mk)
    jax.block_until_ready(x)
    wall = (time.perf_counter() - t0) / (calls * steps_per_call)
    ok, why = sane(x, cfg, done + calls * steps_per_call)
    row.update({"jax_sps": round(1 / wall, 1), "jax_ok": ok})
    if not ok:
        row["jax_error"] = f"state not sane after timing: {why}"
    return row


COLUMNS = ["B", "foxc_graph_sps", "jax_sps", "foxc_over_jax", "jax_compile_s", "foxc_gpu_ms"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/jax_step.py", description=__doc__.splitlines()[0])
    ap.add_argument("--n-backtests", default=None, help="comma-separated batch sizes (default 256,1024,4096; cpu 8)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps (default 200; cpu 4)")
    ap.add_argument("--steps-per-call", type=int, default=10, help="steps per jitted dispatch (lax.scan length)")
    ap.add_argument("--seq-len", type=int, default=None, help="window K (default 32; cpu 4)")
    ap.add_argument("--per-capacity", type=int, default=None, help="replay capacity (default 65536; cpu 64)")
    ap.add_argument("--precision", choices=("f32", "tf32"), default="f32")
    ap.add_argument("--rows", type=int, default=None, help="synthetic snapshots (default 1,000,000; cpu 3,000)")
    ap.add_argument("--no-foxc", action="store_true", help="time the JAX step only")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    if MISSING_JAX:
        print(f"jax_step: {MISSING_JAX}", file=sys.stderr)
        return 2
    gpu = jax.default_backend() in ("gpu", "cuda")
    run = run_sizes(ap, args, gpu, cpu_steps=4)
    sizes, steps, K, capacity, rows_n = run.sizes, run.steps, run.K, run.capacity, run.rows
    set_precision(args.precision)
    from foxc.data.labels import LabelConfig, compute_labels
    from foxc.data.synthetic import synthetic_data
    market = synthetic_data(rows_n, seed=0)
    labels = compute_labels(market.records, market.tick, LabelConfig())
    tables = market_tables(market, labels)
    mk = device_market(tables, market.tick)

    rt = None
    if gpu and not args.no_foxc:
        from foxc.driver import open_runtime
        rt = open_runtime("cuda")
    results = []
    for B in sizes:
        row = {"B": B}
        if rt is not None:
            row.update(bench_foxc(market, labels, B, steps, K, capacity, args.precision, rt))
        cfg = PeerConfig(B=B, K=K, capacity=capacity)
        try:
            row.update(bench_jax(tables, mk, cfg, steps, args.steps_per_call))
        except Exception as e:  # noqa: BLE001 - foxc's figure still stands; say why
            row.update(jax_ok=False, jax_error=f"{type(e).__name__}: {e}"[:400])
        if "foxc_graph_sps" in row and row.get("jax_ok"):
            row["foxc_over_jax"] = round(row["foxc_graph_sps"] / row["jax_sps"], 2)
        results.append(row)
    if rt is not None:
        rt.close()

    device_name = str(jax.devices()[0].device_kind)
    print(f"jax {jax.__version__} on {device_name}; K={K}, F={FEATURES}, D={HIDDEN_DIM}, PER {capacity}, "
          f"{args.precision}, {steps} timed steps, {args.steps_per_call} per dispatch")
    from foxc.cli import text_table as table
    print(table(results, [c for c in COLUMNS if any(c in r for r in results)]))
    for r in results:
        if "jax_error" in r:
            print(f"B={r['B']}: jax: {r['jax_error']}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "jax_peer", "device": device_name, "jax": jax.__version__, "host": platform.node(),
            "commit": git_commit(), "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "K": K, "per_capacity": capacity, "precision": args.precision, "steps": steps,
            "steps_per_call": args.steps_per_call, "rows": results}, indent=1) + "\n")
    at = next((r for r in results if r["B"] == 1024), results[0])
    parts = [f"at B={at['B']}"]
    if "foxc_graph_sps" in at:
        parts.append(f"foxc's graph step {at['foxc_graph_sps']} steps/s")
    if "jax_sps" in at:
        parts.append(f"jax.jit {at['jax_sps']} ({args.steps_per_call} steps per dispatch)")
    if "foxc_over_jax" in at:
        parts.append(f"foxc/jax {at['foxc_over_jax']}x")
    parts.append(f"jax state sane: {at.get('jax_ok', False)}")
    print("summary: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
