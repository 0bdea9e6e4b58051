"""foxc's training step written in PyTorch: steps/s eager and as one torch.cuda.CUDAGraph, beside foxc's own.

    PYTHONPATH=$PWD python bench/torch_step.py [--n-backtests 256,1024,4096] [--steps N] [--device cuda|cpu]
                                               [--seq-len K] [--per-capacity C] [--precision f32|tf32]
                                               [--no-foxc] [--json FILE]

The peer of issue #8 item 6: one training step with foxc's shapes and losses, written the way a
PyTorch user would (nn.Linear, autograd, torch.optim.AdamW, clip_grad_norm_), with the dataset
gather, the simulator, the n-step rings and the prioritized replay as torch tensor ops on the
device. Per batch size B it times the step eagerly and captured once into a torch.cuda.CUDAGraph
(replayed per step), and times foxc's mega-graph step in the same process through
`foxc.bench.train.bench_one`; the table's ratio column is foxc's graph steps/s over torch's.

This file lives outside the foxc package and foxc never imports it; torch is not a foxc
dependency. `--device cpu` runs the torch step eagerly on the CPU at tiny sizes (a smoke run:
no CUDA graphs, no foxc comparison).

What one step does, top to bottom (the order of foxc/trainer/step.py):
  gather      windows [K, B, F] of the per-snapshot feature table at the cursors, the window-relative
              mid feature computed on the fly, perception labels and masks at the cursors
  bridge      position lots and drawdown for the actor
  encode      input projection to 4D, the selective diagonal scan over K (a Python loop of torch ops),
              h = tanh(y W_out + b_out); kept in autograd for the perception loss
  replay_push the previous step's entry into the n-step rings; the oldest entry leaves as a transition
              (truncated n-step return, gamma^m, done) with next state h, stored at max priority
  act         policy logits on h (no grad), softmax mixed with the exploration floor, inverse-CDF sampling
              on torch's RNG, confidence gate, stop-loss
  simulate    10-level books at the cursors, market orders walking the levels, fees, mark to the next
              snapshot's mid, closed trades, drawdown
  reward      equity change, drawdown penalty, PopArt scale, clamp
  replay_sample  stratified proportional sampling over the 65,536 priorities (cumsum + searchsorted),
              importance weights (N P)^-beta over the batch maximum
  learn       masked BCE on h; C51 (target network, projection, PER-weighted cross-entropy), value MSE,
              policy loss on the replayed h_t; one backward (the RL gradient on h reaches the encoder
              scaled by lambda, see `rl_input`)
  update      clip_grad_norm_, AdamW per head learning rate, soft target update (lerp with tau)
  priorities  (|TD| + 1e-6)^alpha into the priority tensor, running maximum
  control     step statistics, PopArt and |PnL| EMAs, loss EMAs, PER beta annealing
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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # foxc from this checkout when run as `python bench/torch_step.py`
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from foxc.data.features import F_MID_REL, FEATURES, snapshot_features  # noqa: E402
from foxc.data.labels import LabelConfig, compute_labels  # noqa: E402
from foxc.data.record import PRICE_SCALE, PRICE_UNDEF  # noqa: E402
from foxc.data.synthetic import synthetic_data  # noqa: E402
from foxc.isv.registry import slot  # noqa: E402

HIDDEN_DIM = 128
N_ACTIONS = 5
C51_ATOMS = 51
N_PERCEPTION = 9
HOLD, LONG, SHORT, FLAT_FROM_LONG, FLAT_FROM_SHORT = range(5)
N_STEP = 3
EPISODE_STEPS = 2000   # foxc's TrainConfig.episode_steps default
FRAME = 16             # diagnostics frame length (floats)
RING = 1024            # diagnostics ring length (frames)
ADAM_BETAS, ADAM_EPS, ADAM_WD = (0.9, 0.999), 1e-8, 0.01   # foxc/nn/optim.py


class MissingTorch(RuntimeError):
    """torch is not importable, or CUDA was asked for and torch sees no GPU."""


def import_torch():
    try:
        import torch
    except ImportError as e:
        raise MissingTorch(f"PyTorch is not installed ({e}); this peer benchmark needs torch "
                           "(pip install torch), foxc itself does not") from None
    return torch


def isv(name: str) -> float:
    """The bootstrap value of an ISV slot: the torch step runs with foxc's starting settings."""
    return slot(name).bootstrap


@dataclass(frozen=True)
class PeerConfig:
    B: int
    K: int = 32
    capacity: int = 65536
    n_step: int = N_STEP
    episode_steps: int = EPISODE_STEPS
    lots: float = 1.0
    fee: float = 0.0  # price units per lot per side (foxc's bench default: no fee)


# ---- the market: foxc's synthetic data as device tensors ------------------------------------------

class TorchMarket:
    """Per-snapshot tables on the device, built once from foxc's MarketData and labels.

    features [N, 46]: foxc's per-snapshot features (snapshot_features) with the mid-relative
    feature left out; the gather fills it per window from mid2 (twice the mid, int64), as foxc's
    gather kernel does. labels / mask [N, 9]: the perception targets the bridge kernel builds.
    Books: best-first prices (float64, price units) and sizes (float32) of 10 levels.
    """

    def __init__(self, torch, market, labels: np.ndarray, device):
        rec = market.records
        n = len(rec)
        tick = market.tick
        bid, ask = rec["bid_px"], rec["ask_px"]
        touch = (bid[:, 0] != PRICE_UNDEF) & (ask[:, 0] != PRICE_UNDEF)
        mid2 = np.where(touch, bid[:, 0] + ask[:, 0], 0).astype(np.int64)
        feats = snapshot_features(rec, tick, mid2)  # mid_rel against its own mid: 0, refilled per window
        planes = labels  # [7, 3, n]
        lab = planes[0:3].transpose(2, 0, 1).reshape(n, N_PERCEPTION)
        mask = np.stack([planes[5], planes[6], planes[6]]).transpose(2, 0, 1).reshape(n, N_PERCEPTION)
        t = lambda a, dt: torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)  # noqa: E731
        self.n, self.tick = n, float(tick)
        self.features = t(feats, torch.float32)
        self.mid2 = t(mid2, torch.int64)
        self.labels, self.mask = t(lab, torch.float32), t(mask, torch.float32)
        for side in ("bid", "ask"):
            px, sz = rec[f"{side}_px"], rec[f"{side}_sz"].astype(np.float32)
            empty = px == PRICE_UNDEF
            setattr(self, f"{side}_px", t(np.where(empty, 0, px).astype(np.float64) / PRICE_SCALE, torch.float64))
            setattr(self, f"{side}_sz", t(np.where(empty, 0, sz), torch.float32))
        mid = np.where(touch, mid2, 0).astype(np.float64) / (2 * PRICE_SCALE)
        self.mid = t(mid, torch.float64)


# ---- the model --------------------------------------------------------------------------------------

def build_model(torch, n_features: int, D: int = HIDDEN_DIM):
    nn = torch.nn

    class Model(nn.Module):
        """foxc's tensors (foxc/nn/model.py layout) as nn.Linear layers: Uniform(+-1/sqrt(fan_in)) weights,
        zero biases."""

        def __init__(self):
            super().__init__()
            self.enc_in = nn.Linear(n_features, 4 * D)
            self.enc_out = nn.Linear(D, D)
            self.perception = nn.Linear(D, N_PERCEPTION)
            self.dqn = nn.Linear(D, N_ACTIONS * C51_ATOMS)
            self.policy = nn.Linear(D, N_ACTIONS)
            self.value = nn.Linear(D, 1)
            with torch.no_grad():
                for m in self.children():
                    bound = 1.0 / math.sqrt(m.in_features)
                    m.weight.uniform_(-bound, bound)
                    m.bias.zero_()

        def encode(self, x):
            """x [K, B, F] -> h [B, D]: z = x W_in + b_in, s_t = a_t s_{t-1} + i_t u_t, y = g_{K-1} s_{K-1}."""
            z = self.enc_in(x)
            u = torch.tanh(z[..., :D])
            a = torch.sigmoid(z[..., D:2 * D])
            iu = torch.sigmoid(z[..., 2 * D:3 * D]) * u
            g = torch.sigmoid(z[-1, :, 3 * D:])
            s = iu[0]
            for t in range(1, x.shape[0]):
                s = a[t] * s + iu[t]
            return torch.tanh(self.enc_out(g * s))

    return Model()


# ---- the step ---------------------------------------------------------------------------------------

class TorchStep:
    """Every tensor of the step allocated once; `step()` updates them in place (so it can be captured)."""

    def __init__(self, torch, cfg: PeerConfig, market: TorchMarket, device, seed: int = 0):
        self.torch, self.cfg, self.market, self.device = torch, cfg, market, device
        B, K, D, C, n = cfg.B, cfg.K, HIDDEN_DIM, cfg.capacity, cfg.n_step
        torch.manual_seed(seed)
        z32 = lambda *s: torch.zeros(*s, dtype=torch.float32, device=device)  # noqa: E731
        z64 = lambda *s: torch.zeros(*s, dtype=torch.float64, device=device)  # noqa: E731
        zi = lambda *s: torch.zeros(*s, dtype=torch.int64, device=device)  # noqa: E731
        scalar = lambda v: torch.full((), float(v), dtype=torch.float32, device=device)  # noqa: E731
        cuda = torch.device(device).type == "cuda"

        self.model = build_model(torch, FEATURES).to(device)
        m = self.model
        self.target_w = m.dqn.weight.detach().clone()
        self.target_b = m.dqn.bias.detach().clone()
        groups = [([m.enc_in.weight, m.enc_in.bias, m.enc_out.weight, m.enc_out.bias], "lr_encoder"),
                  ([m.perception.weight, m.perception.bias], "lr_perception"),
                  ([m.dqn.weight, m.dqn.bias], "lr_q"), ([m.policy.weight, m.policy.bias], "lr_policy"),
                  ([m.value.weight, m.value.bias], "lr_value")]
        # fused on either device (the CPU smoke run goes through the same call); capturable on CUDA only
        opt_kw = dict(betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=ADAM_WD, fused=True, capturable=cuda)
        self.optimizer = torch.optim.AdamW([{"params": p, "lr": isv(lr)} for p, lr in groups], **opt_kw)
        self.params = [q for ps, _ in groups for q in ps]

        # settings (foxc's ISV bootstrap values); those a controller moves are device scalars
        self.lam = isv("rl_to_encoder_lambda")
        self.tau = isv("tau")
        self.gamma = isv("gamma")
        self.alpha = isv("per_alpha")
        self.beta = scalar(isv("per_beta"))
        self.beta_step = (1.0 - isv("per_beta")) / isv("per_beta_anneal_steps")
        self.entropy_coef = isv("entropy_coef")
        self.clip_norm = isv("grad_clip_norm")
        self.floor = min(max(isv("exploration_floor"), 0.0), 0.2)
        self.gate = isv("gate_threshold")
        self.stop_threshold = isv("stop_loss_threshold")
        self.dd_rate = isv("drawdown_penalty_rate")
        self.reward_scale = isv("reward_scale")
        self.popart_rate = isv("popart_rate")
        self.ema_rate = isv("loss_ema_rate")
        self.popart_mean, self.popart_var = scalar(isv("popart_mean")), scalar(isv("popart_var"))
        self.clamp_lo, self.clamp_hi = scalar(isv("reward_clamp_lo")), scalar(isv("reward_clamp_hi"))
        self.mean_abs_pnl = scalar(isv("mean_abs_pnl_ema"))
        self.loss_ema = z32(4)
        self.support = torch.linspace(isv("c51_v_min"), isv("c51_v_max"), C51_ATOMS, device=device)
        self.v_min, self.v_max = isv("c51_v_min"), isv("c51_v_max")
        self.dz = (self.v_max - self.v_min) / (C51_ATOMS - 1)

        # dataset cursors and episode steps
        self.lo, self.hi = K - 1, market.n - 2  # a window has K - 1 earlier snapshots and one after it
        self.cursor, self.ep_step = zi(B), zi(B)
        self.window = torch.arange(K, device=device).sub_(K - 1)[:, None]  # [K, 1]
        self.x = z32(K, B, FEATURES)
        self.labels, self.mask = z32(B, N_PERCEPTION), z32(B, N_PERCEPTION)

        # agent and simulator state
        self.h_saved = z32(B, D)
        self.action, self.log_prob = zi(B), z32(B)
        self.probs = z32(B, N_ACTIONS)
        self.lots = z32(B)
        self.cash, self.equity, self.peak, self.entry_equity = z64(B), z64(B), z64(B), z64(B)
        self.drawdown = z32(B)
        self.done = z32(B)
        self.reward_raw, self.reward_scaled = z32(B), z32(B)
        self.closed, self.closed_pnl = z32(B), z32(B)
        self.stopped, self.gated = z32(B), z32(B)

        # n-step rings [n, B, ...], written at ring_pos
        self.ring_pos = zi(1)
        self.ring_h, self.ring_action = z32(n, B, D), zi(n, B)
        self.ring_reward, self.ring_done, self.ring_logp = z32(n, B), z32(n, B), z32(n, B)
        self.ring_offsets = torch.arange(1, n + 1, device=device)  # oldest first from ring_pos + 1
        self.discounts = torch.tensor([self.gamma ** k for k in range(n)], dtype=torch.float32, device=device)

        # replay storage [C, ...], priorities, write pointer and fill count
        self.st_h, self.st_h1 = z32(C, D), z32(C, D)
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
        self.reset()

    def reset(self):
        t, cfg = self.torch, self.cfg
        B = cfg.B
        self.cursor.copy_((t.rand(B, device=self.device, dtype=t.float64) * (self.hi - self.lo + 1)).long()
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

    def bridge(self):
        self.drawdown.copy_((self.peak - self.equity).float())

    def replay_push(self, h, emit: bool):
        """Previous step's entry into the rings; the oldest entry leaves as an n-step transition."""
        t = self.torch
        pos = self.ring_pos
        self.ring_h.index_copy_(0, pos, self.h_saved[None])
        self.ring_action.index_copy_(0, pos, self.action[None])
        self.ring_reward.index_copy_(0, pos, self.reward_scaled[None])
        self.ring_done.index_copy_(0, pos, self.done[None])
        self.ring_logp.index_copy_(0, pos, self.log_prob[None])
        if emit:
            order = (pos + self.ring_offsets) % self.cfg.n_step              # oldest ... newest (= pos)
            r, d = self.ring_reward.index_select(0, order), self.ring_done.index_select(0, order)  # [n, B]
            alive = t.cumprod(1 - d, 0)                                     # 1 while no done so far
            before = t.cat([t.ones_like(alive[:1]), alive[:-1]])            # steps used: up to the first done
            ret = (before * r * self.discounts[:, None]).sum(0)
            m = before.sum(0)
            done = 1 - alive[-1]
            oldest = order[:1]
            rows = (self.write + self.rows) % self.cfg.capacity
            self.st_h.index_copy_(0, rows, self.ring_h.index_select(0, oldest)[0])
            self.st_h1.index_copy_(0, rows, h)
            self.st_action.index_copy_(0, rows, self.ring_action.index_select(0, oldest)[0])
            self.st_logp.index_copy_(0, rows, self.ring_logp.index_select(0, oldest)[0])
            self.st_ret.index_copy_(0, rows, ret)
            self.st_gamma.index_copy_(0, rows, t.pow(self.gamma, m))
            self.st_done.index_copy_(0, rows, done)
            self.priority.index_copy_(0, rows, self.max_priority.expand(self.cfg.B))
            self.write.add_(self.cfg.B).remainder_(self.cfg.capacity)
            self.count.add_(self.cfg.B).clamp_(max=self.cfg.capacity)
        pos.add_(1).remainder_(self.cfg.n_step)
        self.h_saved.copy_(h)

    def act(self, h):
        t, m = self.torch, self.model
        B = self.cfg.B
        logits = m.policy(h)
        p = t.softmax(logits, -1).mul_(1 - N_ACTIONS * self.floor).add_(self.floor)
        self.probs.copy_(p)
        u = t.rand(B, 1, device=self.device)
        action = (u >= t.cumsum(p, -1)).sum(-1).clamp_(max=N_ACTIONS - 1)   # inverse CDF
        p_taken = p.gather(1, action[:, None])[:, 0]
        entry = (action == LONG) | (action == SHORT)
        gated = entry & (p_taken < self.gate)
        action = t.where(gated, t.zeros_like(action), action)
        stop = (self.lots != 0) & (self.drawdown / self.mean_abs_pnl.clamp(min=1e-6) > self.stop_threshold)
        action = t.where(stop, t.where(self.lots > 0, FLAT_FROM_LONG, FLAT_FROM_SHORT), action)
        self.action.copy_(action)
        self.log_prob.copy_(t.log(p.gather(1, action[:, None])[:, 0]))
        self.gated.copy_(gated.float())
        self.stopped.copy_(stop.float())

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
        self.reward_raw.copy_(pnl.float())  # reward() turns the equity change into the reward

    def reward(self):
        t = self.torch
        penalty = (self.dd_rate * self.drawdown.clamp(min=0) / self.mean_abs_pnl.clamp(min=1e-6)).clamp(min=0)
        raw = self.reward_scale * self.reward_raw - penalty
        self.reward_raw.copy_(raw)
        self.reward_scaled.copy_(t.clamp(raw / self.popart_var.sqrt(), self.clamp_lo, self.clamp_hi))

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
        return dict(h_t=self.st_h[idx], h_tp1=self.st_h1[idx], action=self.st_action[idx], ret=self.st_ret[idx],
                    gamma_n=self.st_gamma[idx], done=self.st_done[idx], logp_old=self.st_logp[idx],
                    weight=w / w.max())

    def rl_input(self, h_t, h):
        """The heads read the replayed h_t; the encoder receives lambda x their gradient on it.

        foxc's learner adds lambda * dL_rl/dh_t (row b of the replayed batch) to the encoder's dh
        (row b of this step's windows) before the encoder's backward (RlHeads.into_encoder). Here
        the same in one autograd graph: h_t + lambda (h - h.detach()) has h_t's value exactly and
        passes lambda x its gradient to h.
        """
        return h_t + self.lam * (h - h.detach())

    def learn(self, h, batch):
        t, F_, m, B = self.torch, self.torch.nn.functional, self.model, self.cfg.B
        self.optimizer.zero_grad(set_to_none=True)
        # perception: mask * BCE-with-logits, the gradient of its sum / B (foxc's bce_masked)
        logits = m.perception(h)
        bce = F_.binary_cross_entropy_with_logits(logits, self.labels, reduction="none") * self.mask
        l_bce = bce.sum() / B

        x = self.rl_input(batch["h_t"], h)
        action = batch["action"]
        ret, gamma_n, done, weight = batch["ret"], batch["gamma_n"], batch["done"], batch["weight"]
        cont = gamma_n * (1 - done)
        # C51 with the target network: next distribution under its greedy action, projected
        with t.no_grad():
            nl = F_.linear(batch["h_tp1"], self.target_w, self.target_b).view(B, N_ACTIONS, C51_ATOMS)
            npr = t.softmax(nl, -1)
            best = (npr * self.support).sum(-1).argmax(1)
            p = npr.gather(1, best[:, None, None].expand(B, 1, C51_ATOMS))[:, 0]  # [B, 51]
            tz = (ret[:, None] + cont[:, None] * self.support).clamp(self.v_min, self.v_max)
            bj = ((tz - self.v_min) / self.dz).clamp(0, C51_ATOMS - 1)
            lo, hi = bj.floor(), bj.ceil()
            target = t.zeros_like(p)
            target.scatter_add_(1, lo.long(), p * (hi - bj) + p * (lo == hi).float())
            target.scatter_add_(1, hi.long(), p * (bj - lo))
            v_next = m.value(batch["h_tp1"])[:, 0]
        # gather, not advanced indexing: its backward is a scatter-add (index_put_ with accumulate sorts)
        q_a = m.dqn(x).view(B, N_ACTIONS, C51_ATOMS).gather(1, action[:, None, None].expand(B, 1, C51_ATOMS))
        logp_q = t.log_softmax(q_a[:, 0], -1)
        l_q_each = -(target * logp_q).sum(-1)
        l_q = (weight * l_q_each).mean()
        with t.no_grad():
            self.td.copy_(((target - logp_q.exp()) * self.support).sum(-1).abs())
        # value: MSE against ret + gamma^n (1 - done) V(s'), V(s') held constant
        v = m.value(x)[:, 0]
        y = ret + cont * v_next
        l_v = ((v - y) ** 2).mean()
        # policy: -rho A log pi(a) - beta H, rho = min(1, pi / pi_old) and A = y - V(s) held constant
        logp = t.log_softmax(m.policy(x), -1)
        logp_a = logp.gather(1, action[:, None])[:, 0]
        adv = (y - v).detach()
        rho = (logp_a.detach() - batch["logp_old"]).exp().clamp(max=1)
        entropy = -(logp.exp() * logp).sum(-1)
        l_pi = (-rho * adv * logp_a - self.entropy_coef * entropy).mean()

        (l_bce + l_q + l_v + l_pi).backward()
        with t.no_grad():
            # what foxc reports: the unweighted C51 cross-entropy, BCE over every cell
            self.losses.copy_(t.stack([l_q_each.mean(), l_pi, l_v, bce.sum() / bce.numel()]).detach())

    def update(self):
        t = self.torch
        t.nn.utils.clip_grad_norm_(self.params, self.clip_norm)
        self.optimizer.step()
        with t.no_grad():
            t._foreach_lerp_([self.target_w, self.target_b], [self.model.dqn.weight, self.model.dqn.bias], self.tau)

    def priorities(self):
        t = self.torch
        new = (self.td + 1e-6).pow(self.alpha)
        self.priority.index_copy_(0, self.sample_idx, new)
        self.max_priority.copy_(t.maximum(self.max_priority, new.max()))

    def control(self):
        t = self.torch
        raw = self.reward_raw
        mean = raw.mean()
        self.popart_mean.add_(self.popart_rate * (mean - self.popart_mean))
        self.popart_var.add_(self.popart_rate * (((raw - self.popart_mean) ** 2).mean() - self.popart_var))
        self.popart_var.clamp_(min=1e-8)
        n_closed = self.closed.sum()
        mean_abs = (self.closed_pnl.abs() * self.closed).sum() / n_closed.clamp(min=1)
        self.mean_abs_pnl.copy_(t.where(n_closed > 0, self.mean_abs_pnl + 0.01 * (mean_abs - self.mean_abs_pnl),
                                        self.mean_abs_pnl))
        self.loss_ema.add_(self.ema_rate * (self.losses - self.loss_ema))
        self.beta.add_(self.beta_step).clamp_(max=1.0)

    def diagnostics(self):
        t = self.torch
        p = self.probs
        entropy = -(p * p.log()).sum(-1).mean()
        clipped = ((self.reward_scaled <= self.clamp_lo) | (self.reward_scaled >= self.clamp_hi)).float().mean()
        frame = t.stack([
            self.step_count[0].float(), entropy, (self.action == HOLD).float().mean(), self.gated.mean(),
            self.stopped.mean(), self.reward_raw.mean(), self.reward_raw.std(), self.reward_scaled.mean(), clipped,
            self.closed.sum(), self.closed_pnl.sum(), *self.losses.unbind(), self.popart_var])
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
        self.bridge()
        h = self.model.encode(self.x)
        h_act = h.detach()
        if not first:
            self.replay_push(h_act, emit)
        with t.no_grad():
            self.act(h_act)
        self.simulate()
        self.reward()
        batch = self.replay_sample()
        self.learn(h, batch)
        self.update()
        self.priorities()
        self.control()
        self.diagnostics()
        self.advance()

    def warm_steps(self) -> int:
        """Eager steps before the buffer is full: the first, n pushes to fill the rings, capacity / B more."""
        return 1 + self.cfg.n_step + -(-self.cfg.capacity // self.cfg.B) + 1


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


def time_graph(torch, peer: "Peer", steps: int, eager: float) -> dict:
    """Capture one whole step into a torch.cuda.CUDAGraph after a side-stream warm-up, time its replays."""
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
    return {"torch_graph_sps": round(1 / wall, 1), "torch_graph_speedup": round(eager / wall, 2),
            "torch_gpu_ms": round(gpu * 1e3, 4)}


def bench_torch(torch, market: TorchMarket, cfg: PeerConfig, steps: int, device, graph: bool) -> dict:
    ts = TorchStep(torch, cfg, market, device)
    peer = Peer(ts)
    peer.eager(ts.warm_steps())                       # the buffer is full from here on
    sync(torch, device)
    t0 = time.perf_counter()
    peer.eager(steps)
    sync(torch, device)
    eager = (time.perf_counter() - t0) / steps
    row = {"torch_eager_sps": round(1 / eager, 1)}
    if graph:
        try:
            row.update(time_graph(torch, peer, steps, eager))
        except Exception as e:  # noqa: BLE001 - the eager and foxc figures still stand; say why
            row["torch_graph_error"] = f"{type(e).__name__}: {e}"[:300]
            torch.cuda.synchronize()
    # sane: finite weights, and the device step counter saw every step (graph replays included), which
    # a state tensor rebound instead of updated in place would break
    finite = bool(torch.isfinite(torch.cat([p.detach().flatten() for p in ts.params])).all())
    row["torch_ok"] = finite and int(ts.step_count) == peer.done
    del ts, peer
    return row


def bench_foxc(market, labels, B: int, steps: int, K: int, capacity: int, precision: str, rt) -> dict:
    from foxc.bench.train import bench_one
    from foxc.trainer.config import TrainConfig
    from foxc.trainer.session import RunData
    cfg = TrainConfig(n_backtests=B, n_steps=0, seq_len=K, per_capacity=capacity, synthetic_rows=len(market.records),
                      precision=precision, graph="on", log_every=10**9, checkpoint_every=0)
    r = bench_one(rt, cfg, RunData(market, labels, None, None, {"source": "synthetic"}), steps)
    return {"foxc_kernels": r["kernels"], "foxc_eager_sps": r["eager_sps"], "foxc_graph_sps": r["graph_sps"],
            "foxc_gpu_ms": r["gpu_ms_per_step"]}


def git_commit() -> str:
    try:
        from foxc.bench.report import git_commit as commit
        return commit()
    except Exception:  # noqa: BLE001 - the JSON only records it
        return "unknown"


COLUMNS = ["B", "foxc_eager_sps", "foxc_graph_sps", "torch_eager_sps", "torch_graph_sps", "foxc_over_torch_graph",
           "foxc_over_torch_eager", "torch_graph_speedup", "foxc_gpu_ms", "torch_gpu_ms"]


def summary(at: dict, device: str) -> str:
    """The last line: foxc against torch at B=1,024 (or the first size run)."""
    parts = [f"at B={at['B']}"]
    if "foxc_graph_sps" in at:
        parts.append(f"foxc's graph step {at['foxc_graph_sps']} steps/s")
    if "torch_graph_sps" in at:
        parts.append(f"torch {at['torch_graph_sps']} as a CUDA graph, {at['torch_eager_sps']} eager")
    else:
        note = "graph capture failed" if "torch_graph_error" in at else f"no graph on the {device}"
        parts.append(f"torch {at['torch_eager_sps']} eager ({note})")
    if "foxc_over_torch_graph" in at:
        parts.append(f"foxc/torch-graph {at['foxc_over_torch_graph']}x")
    if "foxc_over_torch_eager" in at:
        parts.append(f"foxc/torch-eager {at['foxc_over_torch_eager']}x")
    parts.append(f"torch state sane: {at['torch_ok']}")
    return "; ".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/torch_step.py", description=__doc__.splitlines()[0])
    ap.add_argument("--n-backtests", default=None, help="comma-separated batch sizes (default 256,1024,4096; cpu 8)")
    ap.add_argument("--steps", type=int, default=None, help="timed steps per mode (default 200; cpu 3)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--seq-len", type=int, default=None, help="window K (default 32; cpu 4)")
    ap.add_argument("--per-capacity", type=int, default=None, help="replay capacity (default 65536; cpu 64)")
    ap.add_argument("--precision", choices=("f32", "tf32"), default="f32")
    ap.add_argument("--rows", type=int, default=None, help="synthetic snapshots (default 1,000,000; cpu 3,000)")
    ap.add_argument("--no-foxc", action="store_true", help="time the torch step only")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    try:
        torch = import_torch()
        if args.device == "cuda" and not torch.cuda.is_available():
            raise MissingTorch(f"torch {torch.__version__} sees no CUDA device (built for CUDA "
                               f"{torch.version.cuda}); use --device cpu for the CPU smoke run")
    except MissingTorch as e:
        print(f"torch_step: {e}", file=sys.stderr)
        return 2
    cuda = args.device == "cuda"
    sizes = [int(b) for b in (args.n_backtests or ("256,1024,4096" if cuda else "8")).split(",")]
    steps = args.steps or (200 if cuda else 3)
    K = args.seq_len or (32 if cuda else 4)
    capacity = args.per_capacity or (65536 if cuda else 64)
    rows_n = args.rows or (1_000_000 if cuda else 3_000)
    if capacity & (capacity - 1) or capacity < 2:
        ap.error("--per-capacity must be a power of two")
    tf32 = args.precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")  # foxc's --precision tf32 | f32
    market = synthetic_data(rows_n, seed=0)
    labels = compute_labels(market.records, market.tick, LabelConfig())
    tmarket = TorchMarket(torch, market, labels, args.device)

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
        row.update(bench_torch(torch, tmarket, cfg, steps, args.device, graph=cuda))
        if cuda:
            torch.cuda.empty_cache()
        if "foxc_graph_sps" in row:
            row["foxc_over_torch_eager"] = round(row["foxc_graph_sps"] / row["torch_eager_sps"], 2)
            if "torch_graph_sps" in row:
                row["foxc_over_torch_graph"] = round(row["foxc_graph_sps"] / row["torch_graph_sps"], 2)
        results.append(row)
    if rt is not None:
        rt.close()

    device_name = torch.cuda.get_device_name() if cuda else platform.processor() or "cpu"
    print(f"torch {torch.__version__} on {device_name}; K={K}, F={FEATURES}, D={HIDDEN_DIM}, PER {capacity}, "
          f"{args.precision}, {steps} timed steps")
    from foxc.bench.report import table
    print(table(results, [c for c in COLUMNS if any(c in r for r in results)]))
    for r in results:
        if "torch_graph_error" in r:
            print(f"B={r['B']}: the torch step could not be captured: {r['torch_graph_error']}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "benchmark": "torch_peer", "device": device_name, "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, "host": platform.node(), "commit": git_commit(),
            "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "K": K, "per_capacity": capacity, "precision": args.precision, "steps": steps, "rows": results},
            indent=1) + "\n")
    at = next((r for r in results if r["B"] == 1024), results[0])
    print("summary: " + summary(at, args.device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
