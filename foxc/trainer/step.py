"""One training step, built once: every component's device state and the ordered launches.

The step, top to bottom (each line one phase; `phases` holds them in this order):

  gather       dataset: redraw finished cursors, gather windows [K, B, F] and label planes
  bridge       simulator cursors, position view (lots, drawdown), perception targets
  encode       encoder forward: h_t for every backtest
  replay_push  the previous step's transitions enter the n-step rings; h_t is their next state
  act          policy logits on h_t, then sampling, the confidence gate and the stop-loss
  simulate     book update, market fills, PnL; then closed trades and drawdown
  reward       equity change, drawdown penalty, PopArt scale, clamp
  replay_sample  a prioritized batch of stored transitions
  learn        perception and RL losses, every backward, the RL gradient into the encoder
  update       gradient clip, AdamW (learning rates from the ISV), target soft update
  priorities   |TD| of the batch into the tree, tree rebuild
  control      step statistics, reward/PopArt, learning-rate plateau and fused controllers
  diagnostics  the step's frame into the mapped-pinned ring, the step counter, the ISV published to the host
  advance      cursors move on

Nothing here reads the host or allocates once built, so the whole list can be captured into one
CUDA graph. The first step skips `replay_push` (there is no previous step); `skip_first` names it.
"""
from __future__ import annotations

import numpy as np

from .. import vec
from ..agent import kernels as agent
from ..agent.diagnostics import DiagnosticsRing
from ..agent.layout import N_ACTIONS, N_STATS
from ..data.device import DeviceDataset
from ..data.features import FEATURES
from ..isv import IsvBus
from ..isv.kernels import plan_step_increment
from ..lobsim.sim import LobSim, LobSimConfig
from ..nn.model import HIDDEN_DIM, Learner, Linear
from ..nn.heads import N_PERCEPTION
from ..replay import ReplayBuffer
from ..rng import seed_states
from . import bridge

MONEY_SCALE = 1e-9  # the simulator's money (price × 1e9 × lots) in price units per lot


class DeviceCopy:
    """A device-to-device copy as a step entry (a memcpy node when captured)."""

    def __init__(self, rt, dst, src, nbytes: int, name: str):
        self.rt, self.dst, self.src, self.nbytes, self.name = rt, dst, src, int(nbytes), name

    def launch(self, stream):
        self.rt.copy_dtod(self.dst.ptr, self.src.ptr, self.nbytes, stream)


class TrainStep:
    def __init__(self, rt, cfg, market, labels):
        self.rt, self.cfg = rt, cfg
        B, K, D = cfg.n_backtests, cfg.seq_len, HIDDEN_DIM
        dev = rt.device_array
        self.isv = IsvBus(rt, device_resident=True)  # kernels use device memory; the host view is published
        self.isv["n_step"] = cfg.n_step

        self.data = DeviceDataset(rt, market, labels, B, K, seed=cfg.seed, max_episode_steps=cfg.episode_steps)
        self.sim_cursor, self.sim_end = dev(B, np.int64, "sim_cursor"), dev(B, np.int64, "sim_end")
        fee = int(round(cfg.fee_per_lot / MONEY_SCALE))
        self.sim = LobSim(rt, LobSimConfig(n_backtests=B, lots_per_entry=cfg.lots_per_entry, fee_per_lot=fee,
                                           reward_scale=MONEY_SCALE), self.data.records, self.sim_cursor, self.sim_end)

        # the agent's per-backtest arrays
        self.lots, self.drawdown = dev(B, np.int32, "agent_lots"), dev(B, np.float32, "agent_drawdown")
        self.labels, self.mask = dev((B, N_PERCEPTION), np.float32, "labels"), dev((B, N_PERCEPTION), np.float32, "mask")
        self.act_logits = dev((B, N_ACTIONS), np.float32, "act_logits")
        self.act_rng = dev(B, np.uint32, "act_rng")
        self.log_prob, self.probs = dev(B, np.float32, "log_prob"), dev((B, N_ACTIONS), np.float32, "act_probs")
        self.flags = dev(B, np.uint32, "act_flags")
        self.reward_raw, self.reward_scaled = dev(B, np.float32, "reward_raw"), dev(B, np.float32, "reward_scaled")
        self.clipped = dev(B, np.uint32, "reward_clipped")
        self.prev_trades, self.closed = dev(B, np.uint32, "prev_trades"), dev(B, np.uint32, "closed")
        self.closed_pnl = dev(B, np.float32, "closed_pnl")
        self.h_saved = dev((B, D), np.float32, "h_saved")  # h of the previous step, then of this one
        self.td = dev(B, np.float32, "replay_td")
        self.stats = dev(N_STATS, np.float64, "step_stats")
        self.losses = rt.mapped_array(4, np.float32, "losses")  # l_q, l_pi, l_v, l_bce

        # replay: the previous step's entries are the simulator's and the agent's arrays as they stand
        # when replay_push runs (before this step's act and simulate overwrite them)
        self.replay = ReplayBuffer(rt, self.isv, capacity=cfg.per_capacity, n_envs=B, batch=B, n_max=cfg.n_step,
                                   seed=cfg.seed, inputs={
                                       "h_t": self.h_saved, "action": self.sim.actions, "reward": self.reward_scaled,
                                       "reward_raw": self.reward_raw, "done": self.sim.dones, "log_pi": self.log_prob,
                                       "h_tp1": self.h_saved, "td": self.td})
        s = self.replay.sampled
        self.learner = Learner(rt, self.isv, B, K, FEATURES, precision=cfg.precision, inputs={
            "features": self.data.features, "labels": self.labels, "mask": self.mask, "h_t": s["h_t"],
            "h_tp1": s["h_tp1"], "action": s["action"], "ret": s["return"], "gamma_n": s["gamma_n"],
            "done": s["done"], "weight": s["weight"], "logp_old": s["log_pi"]})
        enc, rl, perception = self.learner.encoder, self.learner.rl, self.learner.perception
        self.policy = Linear(rt, self.learner.params, "policy_w", "policy_b", enc.h, self.act_logits, B, D, N_ACTIONS,
                             precision=cfg.precision)
        self.diagnostics = DiagnosticsRing(rt, self.isv, self.stats, self.losses)

        g = bridge.grid(B)
        one = lambda spec, *args: rt.plan(spec, 1, 1, args)  # noqa: E731
        self.phases = [
            ("gather", [self.data.gather_plan]),
            ("bridge", [rt.plan(bridge.BRIDGE_BEFORE_ACT, g, bridge.BLOCK, (
                self.data.cursors, self.data.last, self.data.labels_out, self.sim.pos, self.sim_cursor, self.sim_end,
                self.lots, self.drawdown, self.labels, self.mask, MONEY_SCALE, B))]),
            ("encode", enc.forward),
            ("replay_push", [*self.replay.push_plans,
                             DeviceCopy(rt, self.h_saved, enc.h, enc.h.nbytes, "copy_h"), *self.replay.flush_plans]),
            ("act", [*self.policy.forward, rt.plan(agent.AGENT_ACT, agent.per_backtest_grid(B), agent.BLOCK, (
                self.act_logits, self.act_rng, self.lots, self.drawdown, self.isv, self.sim.actions, self.log_prob,
                self.probs, self.flags, self.sim.stop_loss, B))]),
            ("simulate", [*self.sim.plans, rt.plan(bridge.BRIDGE_AFTER_SIM, g, bridge.BLOCK, (
                self.sim.pos, self.sim.trade_log, self.prev_trades, self.closed, self.closed_pnl, self.drawdown,
                MONEY_SCALE, self.sim.config.trade_log_cap, B))]),
            ("reward", [rt.plan(agent.AGENT_REWARD, agent.per_backtest_grid(B), agent.BLOCK, (
                self.sim.rewards, self.drawdown, self.isv, self.reward_raw, self.reward_scaled, self.clipped, B))]),
            ("replay_sample", self.replay.sample_plans),
            ("learn", self.learner.learn),
            ("update", self.learner.update),
            ("priorities", [DeviceCopy(rt, self.td, rl.td_error, rl.td_error.nbytes, "copy_td"),
                            *self.replay.update_plans, *self.replay.rebuild_plans]),
            ("control", [
                vec.plan_elementwise(rt, vec.COPY_F32, self.losses, rl.loss_means, 3),
                vec.plan_elementwise(rt, vec.COPY_F32, self.losses.at(3), perception.loss_mean, 1),
                rt.plan(agent.AGENT_STEP_STATS, 1, 256, (
                    self.probs, self.sim.actions, self.flags, self.reward_raw, self.reward_scaled, self.clipped,
                    self.closed, self.closed_pnl, self.stats, B)),
                one(agent.AGENT_REWARD_CONTROLLER, self.isv, self.stats),
                one(agent.AGENT_LR_PLATEAU, self.isv, self.losses),
                one(agent.AGENT_FUSED_CONTROLLERS, self.isv, self.stats)]),
            ("diagnostics", [self.diagnostics.plan, plan_step_increment(rt, self.isv), self.isv.publish_plan()]),
            ("advance", [self.data.advance_plan]),
        ]
        self.skip_first = {"replay_push"}
        self.reset(cfg.seed)

    def launches(self, first: bool = False) -> list:
        """The step's entries in order; `first` leaves out what needs a previous step."""
        return [entry for name, entries in self.phases if not (first and name in self.skip_first) for entry in entries]

    def kernel_count(self) -> int:
        """Kernel launches in one (non-first) step; composite entries count their plans."""
        return sum(len(e.plans) if hasattr(e, "plans") else int(hasattr(e, "kernel")) for e in self.launches())

    def reset(self, seed: int):
        """A fresh run: bootstrap ISV, initial weights, empty replay, flat simulator, drawn cursors."""
        self.isv.reset()
        self.isv["n_step"] = self.cfg.n_step
        self.learner.params.init(np.random.default_rng([seed, 1]))
        self.act_rng.upload(seed_states(seed, self.cfg.n_backtests, stream=2))
        zero = lambda a: a.upload(np.zeros(a.shape, a.dtype))  # noqa: E731
        for a in (self.prev_trades, self.h_saved, self.reward_raw, self.reward_scaled, self.log_prob, self.lots,
                  self.drawdown, self.flags, self.clipped, self.closed, self.closed_pnl, self.td, self.stats,
                  self.probs):
            zero(a)
        self.losses.host[:] = 0.0
        self.data.reset(seed)
        self.sim.reset_state()

    @property
    def step(self) -> int:
        """Steps completed, from the device counter (read through mapped memory: synchronize first)."""
        return self.isv.step
