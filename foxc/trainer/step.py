"""One training step, built once: every component's device state and the ordered launches.

The step, top to bottom (each line one phase; `phases` holds them in this order). A `Beside` runs two
lists of phases that share no array either writes: in the captured graph its side lane runs on a second
stream, concurrently with its main lane, and the step goes on when both are done; eagerly they run one
after the other. Either way each kernel reads the same inputs, so the bits are the same.

  beside       side: replay_push   the previous step's transition (its state, action, reward) enters the
                                   n-step rings; the transitions leaving them get their slots
                     replay_flush  completed n-step transitions into storage (a next state that is s_t: pending)
                     replay_sample a prioritized batch of stored transitions (none of it needs this step's s_t)
               main: gather        dataset: windows [K, B, F] and label planes at each backtest's cursor
                     encode        encoder forward: h_t for every backtest
  state        the agent's state s_t = [h_t | position features] (and lots, the open trade's drawdown)
  beside       side: act           the online C51 head on s_t, epsilon-greedy over the valid actions, gate,
                                   stop-loss
                     simulate      one thread a backtest: book update, market fills, PnL; closed trades and
                                   drawdown; the reward (equity change in ticks, drawdown penalty, PopArt
                                   scale, clamp); the perception targets from the gathered label planes
                     advance       cursors move on, or start new episodes (the next step gathers at them)
               main: replay_next   s_t into the pending next states, in storage and in the batch; the
                                   batch's importance weights
                     rl_forward    the RL heads on the replayed states (and the perception head's layer), their
                                   losses
  beside       side: rl_backward   the RL heads' backward
                     priorities    |TD| of the batch into the tree's leaves, then the tree's sums (one launch)
               main: perception    the perception loss and the loss means, the narrow heads' dW, the
                                   perception head's dX
                     encoder_backward  into the encoder: its output layer, then the scan
  gradients    every split pass's partials added into the gradient (one launch)
  update       gradient clip, AdamW (learning rates from the ISV), target soft update
  control      step statistics, reward/PopArt, learning-rate plateau and other controllers, the step's frame
               into the mapped-pinned ring, the step counter, the ISV published to the host (one kernel; the
               only writer of the ISV, so it comes last)

Nothing here reads the host or allocates once built, so the whole list can be captured into one
CUDA graph. The first step skips `replay_push` and `replay_flush` (there is no previous step);
`skip_first` names them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..agent import kernels as agent
from ..agent.actor import MONEY_SCALE, Actor
from ..agent.diagnostics import DiagnosticsRing
from ..agent.layout import N_STATS
from ..data.device import DeviceDataset
from ..data.features import FEATURES
from ..data.market import market_unit_ticks
from ..data.resident import ResidencyError
from ..evaluate.selection import Kept
from ..isv import IsvBus
from ..lobsim.sim import BLOCK as SIM_BLOCK, LobSim, LobSimConfig
from ..nn.layout import N_PERCEPTION
from ..nn.layout import n_state_features
from ..nn.model import HIDDEN_DIM, Learner
from ..component import Persistent
from ..replay import ReplayBuffer
from ..rng import generator
from . import bridge
from .config import ConfigError


RING_LEN = 1024  # diagnostics frames the mapped-pinned ring holds (the host reads them asynchronously)


@dataclass(frozen=True)
class Beside:
    """Two lanes of (name, entries) phases that share no array either writes: a graph runs `side` on a
    second stream beside `main`; `tests/test_train_lanes.py` runs them in both orders and compares the bits."""
    side: list
    main: list


class TrainStep:
    def __init__(self, rt, cfg, market, labels, ring_len: int = RING_LEN):
        self.rt, self.cfg = rt, cfg
        B, K = cfg.n_backtests, cfg.seq_len
        dev = rt.device_array
        self.isv = IsvBus(rt, device_resident=True)  # kernels use device memory; the host view is published
        # the agent sees prices and earns rewards in spreads (the median one of its rows), not in ticks
        self.unit_ticks = market_unit_ticks(market)
        unit = market.tick * self.unit_ticks
        try:
            self.data = DeviceDataset(rt, market, labels, B, K, seed=cfg.seed, max_episode_steps=cfg.episode_steps,
                                      budget_bytes=cfg.data_budget_bytes, rotate_every=cfg.rotate_every, unit=unit)
        except ResidencyError as e:
            raise ConfigError(f"--device-data-gb {cfg.device_data_gb:g}: {e} (give a larger budget, or split the "
                              "data into more segments: files or days)") from None
        self.cursors = self.data.cursors  # the simulator acts where the dataset gathers
        self.rotation = self.data.rotation  # None when all the data is resident
        fee = int(round(cfg.fee / MONEY_SCALE))
        # rewards in price units per lot: a scale that holds still across instruments and training
        self.sim = LobSim(rt, LobSimConfig(n_backtests=B, lots_per_entry=cfg.lots_per_entry, fee_per_lot=fee,
                                           reward_scale=1.0 / unit, passive=cfg.passive(market.tick)),
                          self.data.records, self.cursors.cursor, self.cursors.episode_end)
        quoting = self.sim.passive is not None  # the agent's actions (0..8) are its own; the simulator gets its split

        # per-backtest arrays of the step
        self.labels, self.mask = dev((B, N_PERCEPTION), np.float32, "labels"), dev((B, N_PERCEPTION), np.float32, "mask")
        keep = self.persistent = Persistent()  # the previous step's rewards (pushed next step) and trade counts
        self.reward_raw = keep("reward_raw", dev(B, np.float32, "reward_raw"))
        self.reward_scaled = keep("reward_scaled", dev(B, np.float32, "reward_scaled"))
        self.clipped = dev(B, np.uint32, "reward_clipped")
        self.prev_trades, self.closed = keep("prev_trades", dev(B, np.uint32, "prev_trades")), dev(B, np.uint32, "closed")
        self.closed_pnl = dev(B, np.float32, "closed_pnl")
        self.td = dev(B, np.float32, "replay_td")
        self.stats = dev(N_STATS, np.float64, "step_stats")

        # replay: the previous step's entries are the simulator's and the agent's arrays as they stand
        # when replay_push runs (before this step's state, act and simulate overwrite them); the flush
        # after `state` reads this step's state as the newest transitions' next state
        width = HIDDEN_DIM + n_state_features(cfg.orders)
        state, log_prob = dev((B, width), np.float32, "agent_state"), dev(B, np.float32, "log_prob")
        # the agent's actions, which the next step's replay_push reads: kept with the rest of the state
        agent_actions = keep("agent_actions", dev(B, np.int32, "agent_actions")) if quoting else self.sim.actions
        self.replay = ReplayBuffer(rt, self.isv, capacity=cfg.per_capacity, n_backtests=B, batch=B, width=width,
                                   n_max=cfg.n_step, seed=cfg.seed, inputs={
                                       "h_t": state, "action": agent_actions, "reward": self.reward_scaled,
                                       "reward_raw": self.reward_raw, "done": self.sim.dones, "log_pi": log_prob,
                                       "h_tp1": state, "td": self.td})
        s = self.replay.sampled
        self.learner = Learner(rt, self.isv, B, K, FEATURES, precision=cfg.precision, inputs={
            "features": self.data.features, "labels": self.labels, "mask": self.mask, "h_t": s["h_t"],
            "h_tp1": s["h_tp1"], "action": s["action"], "ret": s["return"], "gamma_n": s["gamma_n"],
            "done": s["done"], "weight": s["weight"]}, td_error=self.td, orders=cfg.orders)  # |TD| where the replay reads it
        enc = self.learner.encoder
        self.losses = self.learner.losses  # l_q, l_pi, l_v, l_bce: mapped, written in `learn`
        self.actor = act = Actor(rt, self.learner.params, self.isv, h=enc.h, pos=self.sim.pos,
                                 features=self.data.features, batch=B, seq_len=K, tick=unit, actor=cfg.actor,
                                 state=state, log_prob=log_prob, actions=agent_actions,
                                 stop_loss=self.sim.stop_loss, precision=cfg.precision, sim=self.sim)
        self.diagnostics = DiagnosticsRing(rt, ring_len=ring_len)
        self.kept = Kept(rt, self.learner.params, self.isv)  # the weights the validation keeps (run.py)

        learner, replay = self.learner, self.replay
        self.phases = [
            # the replay's push, flush and sample need only the previous step's arrays: beside the encoder,
            # off the path between agent_state and the RL heads
            Beside(side=[("replay_push", replay.push_plans), ("replay_flush", replay.flush_plans),
                         ("replay_sample", replay.sample_plans)],
                   main=[("gather", [self.data.gather_plan]), ("encode", enc.forward)]),
            ("state", act.state_plans),
            Beside(side=[("act", act.act_plans),
                         ("simulate", [rt.plan(bridge.BACKTEST_STEP_PASSIVE if quoting else bridge.BACKTEST_STEP,
                                               self.sim.grid, SIM_BLOCK, dict(
                             **self.sim.all_step_args, prev_trades=self.prev_trades, closed=self.closed,
                             closed_pnl=self.closed_pnl, drawdown=act.drawdown, money_scale=MONEY_SCALE, isv=self.isv,
                             reward_raw=self.reward_raw, reward_scaled=self.reward_scaled, clipped=self.clipped,
                             labels_out=self.data.labels_out, labels=self.labels, mask=self.mask))]),
                         ("advance", [self.cursors.advance_plan])],
                   main=[("replay_next", replay.next_plans), ("rl_forward", learner.rl.forward)]),
            # the priorities first: they read only the forward's TD errors, and last they waited for the
            # RL backward, whose last pass waits for the encoder's backward to leave SMs free (B = 4,096)
            Beside(side=[("priorities", replay.update_plans), ("rl_backward", learner.rl.backward)],
                   main=[("perception", learner.perception_backward),
                         ("encoder_backward", enc.backward)]),
            ("gradients", [learner.partials]),
            ("update", learner.update),
            ("control", [
                rt.plan(agent.STEP_END_KERNELS[self.learner.params.n_actions], 1, agent.STATS_BLOCK, dict(
                    probs=act.probs, actions=agent_actions, flags=act.flags, reward_raw=self.reward_raw,
                    reward_scaled=self.reward_scaled, clipped=self.clipped, closed=self.closed,
                    closed_pnl=self.closed_pnl, lots=act.lots, B=B, losses=self.losses, stats=self.stats,
                    isv=self.isv, isv_host=self.isv.array, **self.diagnostics.frame_args))]),
        ]
        self.skip_first = {"replay_push", "replay_flush"}
        # a graph's side lanes (eager steps run on one stream), urgent: their short kernels go ahead of the
        # waiting blocks of the main lane's long ones (the encoder's scans) instead of queueing behind them
        self.lane = rt.side_stream("step_lane", urgent=True)
        self.reset(cfg.seed)

    def ordered(self, first: bool = False) -> list[tuple[str, list]]:
        """The phases as one list in an order that runs them correctly on one stream (each Beside's main lane,
        then its side lane); `first` leaves out what needs a previous step."""
        lanes = [lane for item in self.phases
                 for lane in ((item.main, item.side) if isinstance(item, Beside) else ([item],))]
        return [phase for lane in lanes for phase in lane if not (first and phase[0] in self.skip_first)]

    def launches(self, first: bool = False) -> list:
        """The step's entries in order; `first` leaves out what needs a previous step."""
        return [entry for _, entries in self.ordered(first) for entry in entries]

    def capture(self, cap, stream, side_first: bool = False):
        """Launch one (non-first) step into the open capture `cap` on `stream`, each Beside's side lane on
        the step's second stream, forked from and joined back into the capture. `side_first` issues the side
        lane first: on the GPU the graph is the same; the reference backend runs in issue order (tested)."""
        side = self.lane
        for item in self.phases:
            if not isinstance(item, Beside):
                for entry in item[1]:
                    entry.launch(stream)
                continue
            cap.fork(side)
            lanes = [(side, item.side), (stream, item.main)]
            for on, phases in (lanes if side_first else lanes[::-1]):
                for _, entries in phases:
                    for entry in entries:
                        entry.launch(on)
            cap.join(side)

    def kernel_count(self) -> int:
        """Kernel launches in one (non-first) step; composite entries count their plans."""
        return sum(len(e.plans) if hasattr(e, "plans") else int(hasattr(e, "kernel")) for e in self.launches())

    def reset(self, seed: int):
        """A fresh run: bootstrap ISV, then the run's settings (n-step, the configuration's ISV overrides),
        initial weights, empty replay, flat simulator, new episodes."""
        self.isv.reset()
        self.isv["n_step"] = self.cfg.n_step
        self.isv["price_unit_ticks"] = self.unit_ticks
        for name, value in self.cfg.isv_overrides():
            self.isv[name] = value
        self.learner.params.init(generator(seed, "weights"))
        self.actor.reset(seed)
        self.kept.reset()
        for a in (self.prev_trades, self.reward_raw, self.reward_scaled, self.clipped, self.closed, self.closed_pnl,
                  self.td, self.stats):
            a.upload(np.zeros(a.shape, a.dtype))
        self.losses.host[:] = 0.0
        if self.rotation is not None:
            self.rotation.reset()
        self.cursors.reset(seed)
        self.sim.reset_state()

    @property
    def step(self) -> int:
        """Steps completed, from the device counter (read through mapped memory: synchronize first)."""
        return self.isv.step
