"""foxc's training step written in PyTorch: steps/s eager, as a CUDA graph and compiled, beside foxc's own.

    PYTHONPATH=$PWD python bench/torch_step.py [--n-backtests 256,1024,4096] [--steps N] [--device cuda|cpu]
                                               [--seq-len K] [--per-capacity C] [--precision f32|tf32]
                                               [--modes eager,graph,compiled] [--no-foxc] [--json FILE]

One training step with foxc's shapes, model and losses, with the dataset gather, the simulator, the
n-step rings and the prioritized replay as torch tensor ops on the device, in two builds:

  plain     nn.Linear layers, autograd, fused torch.optim.AdamW, clip_grad_norm_, and the encoder's scan
            as a Python loop of small ops; timed eagerly and captured once into a torch.cuda.CUDAGraph
  compiled  what a strong PyTorch user writes: the scan in closed form (below), the encoder, the losses
            (and so, through AOTAutograd, their backward) and the update (clip + AdamW + target lerp)
            under torch.compile(mode="max-autotune-no-cudagraphs"), and the whole step then captured
            in a torch.cuda.CUDAGraph

In the same process it times foxc's mega-graph step through `foxc.bench.train.bench_one`; the table's
ratio column is foxc's graph steps/s over the best peer's. This file lives outside the foxc package
and foxc never imports it; torch is not a foxc dependency. `--device cpu` runs the plain step
eagerly at tiny sizes (a smoke run: no CUDA graphs, no foxc); `--modes compiled` on the CPU
compiles through Inductor's C++ backend (slow to compile; the step is not captured).

What one step does, top to bottom (the order of foxc/trainer/step.py):
  gather      windows [K, B, F] of the per-snapshot feature table at the cursors, the window-relative
              mid feature computed on the fly, perception labels and masks at the cursors
  encode      input projection to 4D, the selective diagonal scan over K, h = tanh(y W_out + b_out);
              kept in autograd for the perception loss
  replay_push the previous step's state, action, reward, done into the n-step rings
  state       s_t = [h | side, unrealized PnL, time in trade, spread] (foxc.agent.layout)
  replay_flush the oldest ring entry leaves as a transition (truncated n-step return, gamma^m, done)
              with next state s_t, stored at the running maximum priority
  act         the online C51 head on s_t (shared ReLU layer, atoms, means, invalid actions masked),
              epsilon-greedy over the valid actions with held exploration segments, stop-loss
  simulate    10-level books at the cursors, market orders walking the levels, fees, mark to the next
              snapshot's mid, closed trades, drawdown
  reward      equity change in ticks, drawdown penalty, PopArt scale, clamp
  replay_sample  stratified proportional sampling over the priorities (cumsum + searchsorted),
              importance weights (N P)^-beta over the batch maximum
  learn       masked BCE on h (the encoder's only gradient); on the replayed states the shared layer
              (online, and target for s_t+1), C51 with the target's greedy valid action, value MSE,
              the policy distilled from softmax(Q / T) over the valid actions; one backward
  update      clip_grad_norm_, AdamW per head learning rate, soft target update (lerp with tau)
  priorities  (|TD| + 1e-6)^alpha into the priority tensor, running maximum
  control     PopArt and |PnL| EMAs, loss EMAs, PER beta annealing
  diagnostics the step's frame into a device ring, the step counter
  advance     cursors move on; finished episodes draw new cursors
"""
from __future__ import annotations

import argparse
import json
import math
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
                         N_PERCEPTION, Q_INVALID, RING, RL_HIDDEN, SHORT, SIDE, SPREAD_CAP_TICKS, STATE_DIM, TARGET,
                         TENSORS, TIME_SCALE_STEPS, UNREALIZED_SCALE_TICKS, PeerConfig, bench_foxc, foxc_weights,
                         git_commit, isv, market_tables, peer_settings, run_sizes, tick_price, valid_table)

MODES = ("eager", "graph", "compiled")
COMPILE_MODES = ("max-autotune-no-cudagraphs", "default")  # the whole step is captured by hand: no cudagraph trees


class MissingTorch(RuntimeError):
    """torch is not importable, or CUDA was asked for and torch sees no GPU."""


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise MissingTorch(f"PyTorch is not installed ({e}); this peer benchmark needs torch "
                           "(pip install torch), foxc itself does not") from None
    return torch


# ---- the market: foxc's synthetic data as device tensors ------------------------------------------

class TorchMarket:
    """`peer_common.market_tables` as device tensors (attributes of the same names)."""

    def __init__(self, torch, market, labels: np.ndarray, device):
        for name, a in market_tables(market, labels).items():
            setattr(self, name, torch.as_tensor(a, device=device))
        self.n, self.tick, self.tick_price = len(market.records), float(market.tick), tick_price(market.tick)


# ---- the model --------------------------------------------------------------------------------------

# nn.Linear attribute of each of foxc's weight tensors (its bias is the "_b" twin)
LAYERS = {"enc_w_in": "enc_in", "enc_w_out": "enc_out", "perception_w": "perception", "rl_w": "rl",
          "dqn_w": "dqn", "policy_w": "policy", "value_w": "value"}
BIASES = {w.replace("_w", "_b", 1): attr for w, attr in LAYERS.items()}


def build_model(torch, n_features: int = FEATURES, D: int = HIDDEN_DIM):
    nn = torch.nn

    class Model(nn.Module):
        """foxc's tensors (foxc/nn/model.py layout) as nn.Linear layers."""

        def __init__(self):
            super().__init__()
            self.enc_in = nn.Linear(n_features, 4 * D)
            self.enc_out = nn.Linear(D, D)
            self.perception = nn.Linear(D, N_PERCEPTION)
            self.rl = nn.Linear(STATE_DIM, RL_HIDDEN)
            self.dqn = nn.Linear(RL_HIDDEN, N_ACTIONS * C51_ATOMS)
            self.policy = nn.Linear(RL_HIDDEN, N_ACTIONS)
            self.value = nn.Linear(RL_HIDDEN, 1)

        def load_foxc(self, theta: dict):
            """foxc's named tensors ([in, out] weights) into the layers ([out, in])."""
            with torch.no_grad():
                for w, attr in LAYERS.items():
                    layer = getattr(self, attr)
                    layer.weight.copy_(torch.as_tensor(theta[w]).T)
                    layer.bias.copy_(torch.as_tensor(theta[w.replace("_w", "_b", 1)]))

        def gates(self, x):
            z = self.enc_in(x)
            return torch.tanh(z[..., :D]), z[..., D:2 * D], torch.sigmoid(z[..., 2 * D:3 * D]), \
                torch.sigmoid(z[-1, :, 3 * D:])

        def encode(self, x):
            """x [K, B, F] -> h [B, D]: s_t = a_t s_{t-1} + i_t u_t as a loop over K, y = g_{K-1} s_{K-1}."""
            u, za, i, g = self.gates(x)
            a, iu = torch.sigmoid(za), i * u
            s = iu[0]
            for t in range(1, x.shape[0]):
                s = a[t] * s + iu[t]
            return torch.tanh(self.enc_out(g * s))

        def encode_parallel(self, x):
            """encode in closed form: s_{K-1} = sum_t (prod_{j>t} a_j) i_t u_t, the products as exp of
            log-decay suffix sums (one cumsum, no sequential dependence): what Inductor fuses well."""
            u, za, i, g = self.gates(x)
            log_a = torch.nn.functional.logsigmoid(za)
            cum = log_a.cumsum(0)
            s = (torch.exp(cum[-1] - cum) * i * u).sum(0)
            return torch.tanh(self.enc_out(g * s))

    return Model()


def c51_heads(torch, logits, support, side, valid):
    """probs [B, 5, 51] and Q means [B, 5] with Q_INVALID where the action is not valid for `side`."""
    probs = torch.softmax(logits.view(-1, N_ACTIONS, C51_ATOMS), -1)
    q = (probs * support).sum(-1)
    ok = valid[side.long() + 1]
    return probs, torch.where(ok, q, torch.full_like(q, Q_INVALID)), ok


# ---- the step ---------------------------------------------------------------------------------------

class TorchStep:
    """Every tensor of the step allocated once; `step()` updates them in place (so it can be captured).

    compiled=True takes the closed-form scan and compiles the encoder, the losses and the update with
    torch.compile's `compile_mode`."""

    def __init__(self, torch, cfg: PeerConfig, market: TorchMarket, device, seed: int = 0, compiled: bool = False,
                 compile_mode: str = COMPILE_MODES[0]):
        self.torch, self.cfg, self.market, self.device, self.compiled = torch, cfg, market, device, compiled
        B, K, S, C, n = cfg.B, cfg.K, STATE_DIM, cfg.capacity, cfg.n_step
        torch.manual_seed(seed)
        z32 = lambda *s: torch.zeros(*s, dtype=torch.float32, device=device)  # noqa: E731
        z64 = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        zi = lambda *s: torch.zeros(*s, dtype=torch.int64, device=device)  # noqa: E731
        scalar = lambda v: torch.full((), float(v), dtype=torch.float32, device=device)  # noqa: E731
        cuda = torch.device(device).type == "cuda"

        self.model = m = build_model(torch).to(device)
        m.load_foxc(foxc_weights(seed))
        self.online_target = [self.named(w) for w in TARGET]
        self.target = [w.detach().clone() for w in self.online_target]
        by_lr: dict[str, list] = {}
        for name, (_, lr_slot) in TENSORS.items():
            by_lr.setdefault(lr_slot, []).append(self.named(name))
        self.params = [self.named(name) for name in TENSORS]
        # plain: fused AdamW (capturable on CUDA); compiled: the foreach kernels, which Inductor fuses
        opt_kw = dict(betas=(ADAM_BETA1, ADAM_BETA2), eps=ADAM_EPS, weight_decay=ADAM_WD, capturable=cuda)
        opt_kw.update(foreach=True) if compiled else opt_kw.update(fused=True)
        self.optimizer = torch.optim.AdamW([{"params": ps, "lr": isv(lr)} for lr, ps in by_lr.items()], **opt_kw)

        vars(self).update(asdict(peer_settings()))  # foxc's ISV bootstrap values
        # those a controller moves are device scalars
        self.beta = scalar(self.beta0)
        self.popart_mean, self.popart_var = scalar(isv("popart_mean")), scalar(isv("popart_var"))
        self.mean_abs_pnl = scalar(isv("mean_abs_pnl_ema"))
        self.loss_ema = z32(4)
        self.dz = (self.v_max - self.v_min) / (C51_ATOMS - 1)
        self.support = torch.linspace(self.v_min, self.v_max, C51_ATOMS, device=device)
        self.valid = torch.as_tensor(valid_table(), device=device)
        self.actions = torch.arange(N_ACTIONS, device=device)

        # dataset cursors and episode steps
        self.lo, self.hi = K - 1, market.n - 2  # a window has K - 1 earlier snapshots and one after it
        self.cursor, self.ep_step = zi(B), zi(B)
        self.window = torch.arange(K, device=device).sub_(K - 1)[:, None]  # [K, 1]
        self.x = z32(K, B, FEATURES)
        self.labels, self.mask = z32(B, N_PERCEPTION), z32(B, N_PERCEPTION)

        # agent and simulator state
        self.state = z32(B, S)
        self.trade_steps, self.prev_lots = z32(B), z32(B)
        self.action, self.log_prob, self.explore = zi(B), z32(B), zi(B)
        self.probs = z32(B, N_ACTIONS)
        self.lots = z32(B)
        self.cash, self.equity, self.peak, self.entry_equity = z64(B), z64(B), z64(B), z64(B)
        self.drawdown = z32(B)
        self.done = z32(B)
        self.reward_raw, self.reward_scaled, self.clipped = z32(B), z32(B), z32(B)
        self.closed, self.closed_pnl = z32(B), z32(B)
        self.stopped = z32(B)

        # n-step rings [n, B, ...], written at ring_pos
        self.ring_pos = zi(1)
        self.ring_s, self.ring_action = z32(n, B, S), zi(n, B)
        self.ring_reward, self.ring_done, self.ring_logp = z32(n, B), z32(n, B), z32(n, B)
        self.ring_offsets = torch.arange(1, n + 1, device=device)  # oldest first from ring_pos + 1
        self.discounts = torch.tensor([self.gamma ** k for k in range(n)], dtype=torch.float32, device=device)

        # replay storage [C, ...], priorities, write pointer and fill count
        self.st_s, self.st_s1 = z32(C, S), z32(C, S)
        self.st_action, self.st_ret, self.st_gamma = zi(C), z32(C), z32(C)
        self.st_done, self.st_logp = z32(C), z32(C)
        self.priority = z32(C)
        self.max_priority = scalar(1.0)
        self.write, self.count = zi(1), zi(1)
        self.rows = torch.arange(B, device=device)
        self.strata = torch.arange(B, dtype=torch.float32, device=device)
        self.sample_idx = zi(B)

        self.frames = z32(RING, FRAME)
        self.step_count = zi(1)
        self.losses = z32(4)  # q, pi, v, bce (for the frame and EMAs)
        self.td = z32(B)

        self.encode, self.loss_fn, self.update = m.encode, self.rl_losses, self.apply_update
        if compiled:
            opts = dict(mode=compile_mode, dynamic=False)
            self.encode = torch.compile(m.encode_parallel, **opts)
            self.loss_fn = torch.compile(self.rl_losses, **opts)
            self.update = torch.compile(self.apply_update, **opts)
        self.reset()

    def named(self, name: str):
        """The torch parameter holding foxc's tensor `name` (a weight is its transpose)."""
        if name in LAYERS:
            return getattr(self.model, LAYERS[name]).weight
        return getattr(self.model, BIASES[name]).bias

    def reset(self):
        t, cfg = self.torch, self.cfg
        self.cursor.copy_((t.rand(cfg.B, device=self.device, dtype=t.float64) * (self.hi - self.lo + 1)).long()
                          .add_(self.lo).clamp_(max=self.hi))
        self.ep_step.zero_()

    # --- phases ------------------------------------------------------------------------------------
    def gather(self):
        mk = self.market
        idx = self.cursor[None, :] + self.window                     # [K, B]
        self.x.copy_(mk.features[idx])
        rel = (mk.mid2[idx] - mk.mid2[self.cursor][None, :]).double().div_(2 * mk.tick)
        self.x[..., F_MID_REL] = rel.float()
        self.labels.copy_(mk.labels[self.cursor])
        self.mask.copy_(mk.mask[self.cursor])

    def replay_push(self):
        """The previous step's entry (its state, still in self.state) into the rings."""
        pos = self.ring_pos
        self.ring_s.index_copy_(0, pos, self.state[None])
        self.ring_action.index_copy_(0, pos, self.action[None])
        self.ring_reward.index_copy_(0, pos, self.reward_scaled[None])
        self.ring_done.index_copy_(0, pos, self.done[None])
        self.ring_logp.index_copy_(0, pos, self.log_prob[None])

    def replay_flush(self, emit: bool):
        """The oldest entry leaves as an n-step transition whose next state is this step's state."""
        t, pos = self.torch, self.ring_pos
        if emit:
            order = (pos + self.ring_offsets) % self.cfg.n_step              # oldest ... newest (= pos)
            r, d = self.ring_reward.index_select(0, order), self.ring_done.index_select(0, order)  # [n, B]
            alive = t.cumprod(1 - d, 0)                                     # 1 while no done so far
            before = t.cat([t.ones_like(alive[:1]), alive[:-1]])            # steps used: up to the first done
            ret = (before * r * self.discounts[:, None]).sum(0)
            m = before.sum(0)
            oldest = order[:1]
            rows = (self.write + self.rows) % self.cfg.capacity
            self.st_s.index_copy_(0, rows, self.ring_s.index_select(0, oldest)[0])
            self.st_s1.index_copy_(0, rows, self.state)
            self.st_action.index_copy_(0, rows, self.ring_action.index_select(0, oldest)[0])
            self.st_logp.index_copy_(0, rows, self.ring_logp.index_select(0, oldest)[0])
            self.st_ret.index_copy_(0, rows, ret)
            self.st_gamma.index_copy_(0, rows, t.pow(self.gamma, m))
            self.st_done.index_copy_(0, rows, 1 - alive[-1])
            self.priority.index_copy_(0, rows, self.max_priority.expand(self.cfg.B))
            self.write.add_(self.cfg.B).remainder_(self.cfg.capacity)
            self.count.add_(self.cfg.B).clamp_(max=self.cfg.capacity)
        pos.add_(1).remainder_(self.cfg.n_step)

    def agent_state(self, h):
        """s_t = [h | side, tanh(unrealized ticks / 4), tanh(steps in trade / 64), min(spread, 8)]."""
        t, D = self.torch, HIDDEN_DIM
        side = t.sign(self.lots)
        steps = t.where(side == 0, 0.0, t.where(side == t.sign(self.prev_lots), self.trade_steps + 1, 1.0))
        self.trade_steps.copy_(steps)
        self.prev_lots.copy_(self.lots)
        held = t.where(side == 0, 1.0, self.lots.abs()).double()
        unrealized = t.where(side == 0, 0.0, (self.equity - self.entry_equity) / (held * self.market.tick_price))
        self.state[:, :D] = h
        self.state[:, D] = side
        self.state[:, D + 1] = t.tanh(unrealized.float() / UNREALIZED_SCALE_TICKS)
        self.state[:, D + 2] = t.tanh(steps / TIME_SCALE_STEPS)
        self.state[:, D + 3] = self.x[-1, :, F_SPREAD].clamp(max=SPREAD_CAP_TICKS)

    def act(self):
        """Epsilon-greedy on the online C51 means over the valid actions, exploration held in segments."""
        t, m, B = self.torch, self.model, self.cfg.B
        side = self.state[:, SIDE]
        _, q, valid = c51_heads(t, m.dqn(t.relu(m.rl(self.state))), self.support, side, self.valid)
        best = q.argmax(1)  # first on ties, as foxc's best_valid
        left = (1 - self.step_count.float() / max(self.eps_steps, 1e-30)).clamp(min=0) * (self.eps_steps > 0)
        eps = (self.eps_end + (self.eps_start - self.eps_end) * left).clamp(0, 1)
        u1, u2 = t.rand(B, device=self.device), t.rand(B, device=self.device)
        segment = t.where((self.explore != 0) & (u1 < self.segment_end), 0, self.explore)
        going = segment != 0
        n_valid = valid.sum(1)
        uniform = eps / n_valid
        probs = t.where(valid, t.where(self.actions == best[:, None], 1 - eps + uniform[:, None], uniform[:, None]),
                        0.0)
        sside = side.long()
        goal = segment - 2                                   # the position a segment holds
        keep = t.where(goal == sside, HOLD, t.where(goal > 0, LONG, t.where(goal < 0, SHORT, t.where(
            sside > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT))))
        k = t.minimum((u2 * n_valid).long(), n_valid - 1)
        nth = (valid.cumsum(1) > k[:, None]).int().argmax(1)  # the k-th valid action
        start = ~going & (self.explore == 0) & (u1 < eps)
        action = t.where(going, keep, t.where(start, nth, best))
        reach = t.where(nth == LONG, 1, t.where(nth == SHORT, -1, t.where(nth == HOLD, sside, 0)))
        self.explore.copy_(t.where(start, reach + 2, segment))
        probs = t.where(going[:, None], (self.actions == action[:, None]).float(), probs)
        p_taken = probs.gather(1, action[:, None])[:, 0]
        stop = (self.lots != 0) & (self.drawdown / self.mean_abs_pnl.clamp(min=1e-6) > self.stop_threshold)
        if self.stop_threshold > 0:
            action = t.where(stop, t.where(self.lots > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT), action)
            self.stopped.copy_(stop.float())
        self.action.copy_(action)
        self.log_prob.copy_(t.log(p_taken))
        self.probs.copy_(probs)

    def simulate(self):
        """Market orders walking 10 levels, fees, mark to the next snapshot's mid, closed trades."""
        t, mk, cfg = self.torch, self.market, self.cfg
        c = self.cursor
        done = (self.ep_step + 1 >= cfg.episode_steps) | (c + 1 >= self.hi + 1)
        lots, a = self.lots, self.action
        target = t.where(a == LONG, cfg.lots, t.where(a == SHORT, -cfg.lots, lots))
        target = t.where((a == FLAT_FROM_LONG) & (lots > 0), 0.0, target)
        target = t.where((a == FLAT_FROM_SHORT) & (lots < 0), 0.0, target)
        target = t.where(done, 0.0, target)
        q = target - lots

        def walk(want, px, sz):  # fills per level: never more than a level displays
            before = t.cumsum(sz, -1) - sz
            fill = t.minimum(sz, (want[:, None] - before).clamp(min=0))
            return fill.sum(-1), (fill.double() * px).sum(-1)

        bought, cost = walk(q.clamp(min=0), mk.ask_px[c], mk.ask_sz[c])
        sold, proceeds = walk((-q).clamp(min=0), mk.bid_px[c], mk.bid_sz[c])
        fees = (bought + sold).double() * cfg.fee
        self.cash.add_(proceeds - cost - fees)
        new_lots = lots + bought - sold
        equity = self.cash + new_lots.double() * mk.mid[c + 1]
        pnl = equity - self.equity
        opened = (lots == 0) & (new_lots != 0)
        closed = (lots != 0) & ((new_lots == 0) | (new_lots * lots < 0))
        self.closed.copy_(closed.float())
        self.closed_pnl.copy_(t.where(closed, equity - self.entry_equity, 0.0).float())
        self.entry_equity.copy_(t.where(opened | closed, equity - pnl, self.entry_equity))
        self.equity.copy_(equity)
        self.peak.copy_(t.where(done, equity, t.maximum(self.peak, equity)))
        self.lots.copy_(new_lots)
        self.done.copy_(done.float())
        self.drawdown.copy_((self.peak - equity).float())
        self.reward_raw.copy_((pnl / mk.tick_price).float())  # ticks: reward() turns it into the reward

    def reward(self):
        t = self.torch
        penalty = (self.dd_rate * self.drawdown.clamp(min=0) / self.mean_abs_pnl.clamp(min=1e-6)).clamp(min=0)
        raw = self.reward_scale * self.reward_raw - penalty
        scaled = raw / (self.popart_var + 1e-8).sqrt()
        self.reward_raw.copy_(raw)
        self.reward_scaled.copy_(t.clamp(scaled, self.clamp_lo, self.clamp_hi))
        self.clipped.copy_(((scaled < self.clamp_lo) | (scaled > self.clamp_hi)).float())

    def replay_sample(self):
        """Stratified proportional sampling: one uniform per stratum of the priorities' total."""
        t, B = self.torch, self.cfg.B
        cdf = t.cumsum(self.priority, 0)
        total = cdf[-1].clamp(min=1e-30)  # an empty buffer (first steps): weights 1, not NaN
        u = (self.strata + t.rand(B, device=self.device)) * (total / B)
        idx = t.searchsorted(cdf, u, right=True).clamp_(max=self.cfg.capacity - 1)
        self.sample_idx.copy_(idx)
        prob = self.priority[idx] / total
        w = (self.count.float() * prob).clamp(min=1e-30).pow(-self.beta)
        return dict(s_t=self.st_s[idx], s_tp1=self.st_s1[idx], action=self.st_action[idx], ret=self.st_ret[idx],
                    gamma_n=self.st_gamma[idx], done=self.st_done[idx], weight=w / w.max())

    def rl_losses(self, h, labels, mask, s_t, s_tp1, action, ret, gamma_n, done, weight):
        """(the loss to differentiate, [l_q, l_pi, l_v, l_bce] as foxc reports them, |TD| per sample).

        As foxc's Learner: the encoder learns from the perception BCE only; the shared layer from the
        C51 loss only (the policy and value heads read it detached); C51's target is the target
        network's distribution under its greedy valid action at s_t+1; V(s_t+1) (online) is held
        constant; the policy is distilled from softmax(Q(s_t) / T) over the valid actions."""
        t, F_, m = self.torch, self.torch.nn.functional, self.model
        B = h.shape[0]
        bce = F_.binary_cross_entropy_with_logits(m.perception(h), labels, reduction="none") * mask
        l_bce = bce.sum() / B  # foxc's gradient is mask (sigma - y) / B

        cont = gamma_n * (1 - done)
        with t.no_grad():
            w_rl, b_rl, w_q, b_q = self.target
            z_target = t.relu(F_.linear(s_tp1, w_rl, b_rl))
            next_probs, next_q, _ = c51_heads(t, F_.linear(z_target, w_q, b_q), self.support, s_tp1[:, SIDE],
                                              self.valid)
            best = next_q.argmax(1)
            p = next_probs.gather(1, best[:, None, None].expand(B, 1, C51_ATOMS))[:, 0]  # [B, 51]
            tz = (ret[:, None] + cont[:, None] * self.support).clamp(self.v_min, self.v_max)
            bj = ((tz - self.v_min) / self.dz).clamp(0, C51_ATOMS - 1)
            lo, hi = bj.floor(), bj.ceil()
            target = t.zeros_like(p)
            target.scatter_add_(1, lo.long(), p * (hi - bj) + p * (lo == hi).float())
            target.scatter_add_(1, hi.long(), p * (bj - lo))
            v_next = m.value(t.relu(m.rl(s_tp1)))[:, 0]
        z = t.relu(m.rl(s_t))
        q_logits = m.dqn(z)
        # gather, not advanced indexing: its backward is a scatter-add (index_put_ with accumulate sorts)
        q_a = q_logits.view(B, N_ACTIONS, C51_ATOMS).gather(1, action[:, None, None].expand(B, 1, C51_ATOMS))
        logp_q = t.log_softmax(q_a[:, 0], -1)
        l_q_each = -(target * logp_q).sum(-1)
        l_q = (weight * l_q_each).mean()
        td = ((target - logp_q.exp()) * self.support).sum(-1).abs().detach()

        zf = z.detach()  # the policy and value heads do not train the shared layer
        v = m.value(zf)[:, 0]
        l_v_each = (v - (ret + cont * v_next)) ** 2
        with t.no_grad():
            _, q, valid = c51_heads(t, q_logits, self.support, s_t[:, SIDE], self.valid)
            goal = t.softmax(t.where(valid, q / self.temperature, -math.inf), -1)
        log_pi = t.log_softmax(t.where(valid, m.policy(zf), -math.inf), -1)
        l_pi_each = t.where(valid, t.special.xlogy(goal, goal) - goal * t.where(valid, log_pi, 0.0), 0.0).sum(-1)
        loss = l_bce + l_q + l_v_each.mean() + l_pi_each.mean()
        report = t.stack([l_q_each.mean(), l_pi_each.mean(), l_v_each.mean(), bce.sum() / bce.numel()]).detach()
        return loss, report, td

    def learn(self, h, batch):
        self.optimizer.zero_grad(set_to_none=True)
        loss, report, td = self.loss_fn(h, self.labels, self.mask, batch["s_t"], batch["s_tp1"], batch["action"],
                                        batch["ret"], batch["gamma_n"], batch["done"], batch["weight"])
        loss.backward()
        self.losses.copy_(report)
        self.td.copy_(td)

    def apply_update(self):
        t = self.torch
        t.nn.utils.clip_grad_norm_(self.params, self.clip_norm, foreach=True)
        self.optimizer.step()
        with t.no_grad():
            t._foreach_lerp_(self.target, self.online_target, self.tau)

    def priorities(self):
        t = self.torch
        new = (self.td + 1e-6).pow(self.alpha)
        self.priority.index_copy_(0, self.sample_idx, new)
        self.max_priority.copy_(t.maximum(self.max_priority, new.max()))

    def control(self):
        t, r = self.torch, self.popart_rate
        raw = self.reward_raw
        mean_b, var_b = raw.mean(), raw.var(unbiased=False)
        d = mean_b - self.popart_mean
        self.popart_var.copy_(((1 - r) * self.popart_var + r * var_b + r * (1 - r) * d * d).clamp(min=1e-8))
        self.popart_mean.add_(r * d)
        n_closed = self.closed.sum()
        mean_abs = (self.closed_pnl.abs() * self.closed).sum() / n_closed.clamp(min=1)
        self.mean_abs_pnl.copy_(t.where(n_closed > 0, self.mean_abs_pnl + self.ema_rate * (mean_abs - self.mean_abs_pnl),
                                        self.mean_abs_pnl))
        self.loss_ema.add_(self.ema_rate * (self.losses - self.loss_ema))
        left = (self.beta_anneal - self.step_count.float()).clamp(min=1)[0]
        self.beta.add_((1 - self.beta) / left).clamp_(max=1.0)

    def diagnostics(self):
        t = self.torch
        p = self.probs
        entropy = -t.special.xlogy(p, p).sum(-1).mean()
        frame = t.stack([
            self.step_count[0].float(), entropy, (self.action == HOLD).float().mean(), (self.lots != 0).float().mean(),
            self.stopped.mean(), self.reward_raw.mean(), self.reward_raw.std(), self.reward_scaled.mean(),
            self.clipped.mean(), self.closed.sum(), self.closed_pnl.sum(), *self.losses.unbind(), self.popart_var])
        self.frames.index_copy_(0, self.step_count % RING, frame[None])
        self.step_count.add_(1)

    def advance(self):
        t = self.torch
        self.cursor.add_(1)
        self.ep_step.add_(1)
        done = self.done != 0
        fresh = (t.rand(self.cfg.B, device=self.device, dtype=t.float64) * (self.hi - self.lo + 1)).long()
        self.cursor.copy_(t.where(done, (fresh + self.lo).clamp(max=self.hi), self.cursor))
        self.ep_step.masked_fill_(done, 0)

    def step(self, first: bool = False, emit: bool = True):
        """One training step. `first`: no previous step to push; `emit`: the rings are full (n pushes done)."""
        t = self.torch
        self.gather()
        h = self.encode(self.x)
        if not first:
            self.replay_push()
        with t.no_grad():
            self.agent_state(h.detach())
        if not first:
            self.replay_flush(emit)
        with t.no_grad():
            self.act()
            self.simulate()
            self.reward()
            batch = self.replay_sample()
        self.learn(h, batch)
        self.update()
        with t.no_grad():
            self.priorities()
            self.control()
            self.diagnostics()
            self.advance()


# ---- timing -----------------------------------------------------------------------------------------

class Peer:
    """Runs a TorchStep through its eager warm-up and counts steps (the rings emit after n pushes)."""

    def __init__(self, ts: TorchStep):
        self.ts, self.done = ts, 0

    def eager(self, n: int):
        for _ in range(n):
            self.ts.step(first=self.done == 0, emit=self.done >= self.ts.cfg.n_step)
            self.done += 1


def sync(torch, device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def sane(torch, ts: TorchStep, done: int) -> tuple[bool, str]:
    """Finite weights, losses and priorities, the expected shapes, and a step counter that saw every
    step (a state tensor rebound rather than updated in place would break a captured graph's count)."""
    cfg = ts.cfg
    problems = []
    if not all(bool(torch.isfinite(p).all()) for p in ts.params):
        problems.append("non-finite weights")
    if not bool(torch.isfinite(ts.losses).all()) or not bool(torch.isfinite(ts.priority).all()):
        problems.append(f"non-finite losses {ts.losses.tolist()} or priorities")
    shapes = {"state": (ts.state, (cfg.B, STATE_DIM)), "x": (ts.x, (cfg.K, cfg.B, FEATURES)),
              "td": (ts.td, (cfg.B,)), "st_s": (ts.st_s, (cfg.capacity, STATE_DIM))}
    problems += [f"{k} {tuple(a.shape)} != {s}" for k, (a, s) in shapes.items() if tuple(a.shape) != s]
    if int(ts.step_count) != done:
        problems.append(f"step counter {int(ts.step_count)} after {done} steps")
    return not problems, "; ".join(problems)


def time_graph(torch, peer: Peer, steps: int) -> tuple[float, float]:
    """Capture one whole step into a torch.cuda.CUDAGraph after a side-stream warm-up; (wall, GPU) s per step."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # PyTorch's recipe: a few eager iterations on a side stream first
        peer.eager(3)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        peer.ts.step()
    g.replay()  # capturing does not run the step: this is its first run
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(steps):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / steps
    gpu = start.elapsed_time(end) * 1e-3 / steps
    peer.done += steps + 1
    del g
    return wall, gpu


def time_eager(torch, peer: Peer, steps: int, device) -> float:
    sync(torch, device)
    t0 = time.perf_counter()
    peer.eager(steps)
    sync(torch, device)
    return (time.perf_counter() - t0) / steps


def bench_torch(torch, market: TorchMarket, cfg: PeerConfig, steps: int, device, modes,
                compile_mode: str = COMPILE_MODES[0]) -> dict:
    """One TorchStep per build (plain, compiled); the buffer is full before anything is timed."""
    cuda = torch.device(device).type == "cuda"
    row: dict = {}
    for build in ("plain", "compiled"):
        wanted = [m for m in modes if (m == "compiled") == (build == "compiled")]
        if not wanted:
            continue
        key = "torch_compiled" if build == "compiled" else "torch"
        try:
            ts = TorchStep(torch, cfg, market, device, compiled=build == "compiled", compile_mode=compile_mode)
            peer = Peer(ts)
            peer.eager(cfg.warm_steps())  # compiles (and autotunes) on the first steps
            ok, why = sane(torch, ts, peer.done)
            if not ok:
                raise RuntimeError(f"state not sane before timing: {why}")
            if "eager" in wanted or build == "compiled":  # the compiled build also uncaptured: its launch cost
                row[f"{key}_eager_sps"] = round(1 / time_eager(torch, peer, steps, device), 1)
            if cuda and ("graph" in wanted or build == "compiled"):
                wall, gpu = time_graph(torch, peer, steps)
                row[f"{key}_graph_sps"], row[f"{key}_gpu_ms"] = round(1 / wall, 1), round(gpu * 1e3, 4)
            ok, why = sane(torch, ts, peer.done)
            row[f"{key}_ok"] = ok
            if not ok:
                row[f"{key}_error"] = f"state not sane after timing: {why}"
        except Exception as e:  # noqa: BLE001 - the other builds and foxc's figures still stand; say why
            row[f"{key}_ok"] = False
            row[f"{key}_error"] = f"{type(e).__name__}: {e}"[:400]
        finally:
            ts = peer = None
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
    return row


# each peer figure and the flag saying its state was sane
PEER_COLUMNS = {"torch_graph_sps": "torch_ok", "torch_eager_sps": "torch_ok",
                "torch_compiled_graph_sps": "torch_compiled_ok", "torch_compiled_eager_sps": "torch_compiled_ok",
                "jax_sps": "jax_ok"}


def best_peer(row: dict) -> tuple[str, float] | None:
    """The fastest peer figure of a row (its column, steps/s), from sane runs only."""
    found = [(c, row[c]) for c, ok in PEER_COLUMNS.items() if c in row and row.get(ok)]
    return max(found, key=lambda cv: cv[1]) if found else None


COLUMNS = ["B", "foxc_eager_sps", "foxc_graph_sps", "torch_eager_sps", "torch_graph_sps", "torch_compiled_graph_sps",
           "torch_compiled_eager_sps", "jax_sps", "foxc_over_best", "best_peer", "foxc_gpu_ms", "torch_gpu_ms",
           "torch_compiled_gpu_ms"]


def summary(at: dict, device: str) -> str:
    """The last line: foxc against the best torch build at B=1,024 (or the first size run)."""
    parts = [f"at B={at['B']}"]
    if "foxc_graph_sps" in at:
        parts.append(f"foxc's graph step {at['foxc_graph_sps']} steps/s")
    for key, what in (("torch_graph_sps", "torch as a CUDA graph"), ("torch_compiled_graph_sps", "torch.compile + graph"),
                      ("torch_eager_sps", "torch eager"), ("torch_compiled_eager_sps", "torch.compile eager"),
                      ("jax_sps", "jax.jit")):
        if key in at:
            parts.append(f"{what} {at[key]}")
    if "foxc_over_best" in at:
        parts.append(f"foxc/best peer ({at['best_peer']}) {at['foxc_over_best']}x")
    oks = [f"{k.removesuffix('_ok')} {at[k]}" for k in ("torch_ok", "torch_compiled_ok", "jax_ok") if k in at]
    parts.append("state sane: " + ", ".join(oks))
    return "; ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/torch_step.py", description=__doc__.splitlines()[0])
    ap.add_argument("--n-backtests", default=None, help="comma-separated batch sizes (default 256,1024,4096; cpu 8)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per mode (default 200; cpu 3)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--modes", default=None,
                    help="comma-separated of eager, graph, compiled (default all three; cpu eager)")
    ap.add_argument("--seq-len", type=int, default=None, help="window K (default 32; cpu 4)")
    ap.add_argument("--per-capacity", type=int, default=None, help="replay capacity (default 65536; cpu 64)")
    ap.add_argument("--precision", choices=("f32", "tf32"), default="f32")
    ap.add_argument("--rows", type=int, default=None, help="synthetic snapshots (default 1,000,000; cpu 3,000)")
    ap.add_argument("--no-foxc", action="store_true", help="time the torch step only")
    ap.add_argument("--jax", action="store_true",
                    help="also time bench/jax_step.py's step in this process (best peer over torch and JAX)")
    ap.add_argument("--steps-per-call", type=int, default=10, help="with --jax: steps per jitted dispatch")
    ap.add_argument("--compile-mode", choices=COMPILE_MODES, default=COMPILE_MODES[0],
                    help="torch.compile's mode for the compiled build (default max-autotune-no-cudagraphs; "
                         "'default' skips Inductor's GEMM autotuning, which takes minutes per size)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    cuda = args.device == "cuda"
    run = run_sizes(ap, args, cuda, cpu_steps=3)
    sizes, steps, K, capacity, rows_n = run.sizes, run.steps, run.K, run.capacity, run.rows
    modes = (args.modes or ("eager,graph,compiled" if cuda else "eager")).split(",")
    if set(modes) - set(MODES):
        ap.error(f"--modes takes {', '.join(MODES)}, got '{args.modes}'")
    try:
        torch = import_torch()
        if cuda and not torch.cuda.is_available():
            raise MissingTorch(f"torch {torch.__version__} sees no CUDA device (built for CUDA "
                               f"{torch.version.cuda}); use --device cpu for the CPU smoke run")
    except MissingTorch as e:
        print(f"torch_step: {e}", file=sys.stderr)
        return 2
    from foxc.data.labels import LabelConfig, compute_labels
    from foxc.data.synthetic import synthetic_data
    tf32 = args.precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")  # foxc's --precision tf32 | f32
    market = synthetic_data(rows_n, seed=0)
    labels = compute_labels(market.records, market.tick, LabelConfig())
    tmarket = TorchMarket(torch, market, labels, args.device)
    jax_peer = None
    if args.jax:
        import jax_step as jax_peer
        if jax_peer.MISSING_JAX:
            print(f"torch_step: --jax: {jax_peer.MISSING_JAX}", file=sys.stderr)
            return 2
        jax_peer.set_precision(args.precision)
        tables = market_tables(market, labels)
        jmarket = jax_peer.device_market(tables, market.tick)

    rt = None
    with_foxc = cuda and not args.no_foxc
    if with_foxc:
        from foxc.driver import open_runtime
        rt = open_runtime("cuda")
    results = []
    for B in sizes:
        row = {"B": B}
        if with_foxc:
            row.update(bench_foxc(market, labels, B, steps, K, capacity, args.precision, rt))
        cfg = PeerConfig(B=B, K=K, capacity=capacity)
        row.update(bench_torch(torch, tmarket, cfg, steps, args.device, modes, args.compile_mode))
        if jax_peer is not None:
            try:
                row.update(jax_peer.bench_jax(tables, jmarket, cfg, steps, args.steps_per_call))
            except Exception as e:  # noqa: BLE001 - the torch and foxc figures still stand; say why
                row.update(jax_ok=False, jax_error=f"{type(e).__name__}: {e}"[:400])
        best = best_peer(row)
        if best is not None:
            row["best_peer"] = best[0].removesuffix("_sps")
            if "foxc_graph_sps" in row:
                row["foxc_over_best"] = round(row["foxc_graph_sps"] / best[1], 2)
        results.append(row)
    if rt is not None:
        rt.close()

    device_name = torch.cuda.get_device_name() if cuda else platform.processor() or "cpu"
    print(f"torch {torch.__version__} on {device_name}; K={K}, F={FEATURES}, D={HIDDEN_DIM}, PER {capacity}, "
          f"{args.precision}, {steps} timed steps; compiled: {args.compile_mode}")
    from foxc.cli import text_table as table
    print(table(results, [c for c in COLUMNS if any(c in r for r in results)]))
    for r in results:
        for key in ("torch_error", "torch_compiled_error", "jax_error"):
            if key in r:
                print(f"B={r['B']}: {key.removesuffix('_error')}: {r[key]}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "torch_peer", "device": device_name, "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "jax": jax_peer.jax.__version__ if jax_peer else None,
            "host": platform.node(), "commit": git_commit(),
            "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "compile_mode": args.compile_mode,
            "K": K, "per_capacity": capacity, "precision": args.precision, "steps": steps, "rows": results},
            indent=1) + "\n")
    at = next((r for r in results if r["B"] == 1024), results[0])
    print("summary: " + summary(at, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
