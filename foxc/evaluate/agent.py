"""The trained agent as an evaluation policy, on the device with the training step's own kernels.

Each call gathers the windows ending at the evaluation simulator's own cursors (nothing uploaded per step), encodes
them, builds the agent's state from its positions and acts greedily with `agent_act`: the state features and action
rules of training. A backtest with fewer than K - 1 earlier snapshots in its segment holds (no full window).
"""
from __future__ import annotations

import numpy as np

from ..agent.actor import Actor
from ..agent.layout import HOLD
from ..data.device import DeviceDataset
from ..data.features import FEATURES, HORIZONS, LABEL_PLANES
from ..data.record import segment_runs
from ..data.market import MarketData
from ..isv import IsvBus
from ..nn.model import Encoder, HIDDEN_DIM, Parameters

NAME = "rl: foxc agent (greedy)"
FLAT_NAME = "flat: never trades"
# what a run's validation kept (foxc.evaluate.selection.Kept), as its checkpoint holds it
RECORD = ("step", "val_pnl_ticks", "val_se", "val_trades", "validations")  # float64 fields; step -1: none kept
KEPT_THETA, KEPT_ISV, KEPT_RECORD = "selection.theta", "selection.isv", "selection.record"  # checkpoint sections


def kept_record(values) -> dict | None:
    """The kept record of a checkpoint's section as a dict (None: a checkpoint without one)."""
    if values is None:
        return None
    out = dict(zip(RECORD, np.asarray(values, np.float64).reshape(-1).tolist()))
    for name in ("step", "val_trades", "validations"):
        out[name] = int(out[name])
    return out


class FlatPolicy:
    """Never trades: the policy a run keeps when no validated weights beat it (and the comparison beside any)."""
    is_baseline = True

    def __init__(self, name: str = FLAT_NAME):
        self.name = name

    def __call__(self, ctx):
        return np.full(len(ctx.cursor), HOLD, np.int32)

    def close(self):
        pass

    release = close


class AgentPolicy:
    name = NAME
    is_baseline = False
    run_settings: dict = {}  # the training settings of a checkpoint's agent (its --orders: how to evaluate it)

    def __init__(self, rt, params: Parameters, isv, seq_len: int, actor: str = "q", precision: str = "f32"):
        """`params`, `isv`: the agent's weights and ISV on this runtime (shared, read only)."""
        self.rt, self.params, self.isv = rt, params, isv
        self.seq_len, self.actor_kind, self.precision = int(seq_len), actor, precision
        self._bound = None  # (records, sim) the device parts below were built for
        self._parts = []
        self._owned = []  # the weights and ISV of from_arrays

    @classmethod
    def from_arrays(cls, rt, theta: np.ndarray, isv: np.ndarray, seq_len: int, actor: str = "q",
                    precision: str = "f32", name: str = NAME, orders: str = "market") -> "AgentPolicy":
        """The agent of host arrays: the flat parameter vector (foxc.nn.model's layout for `orders`) and the ISV,
        on `rt`."""
        params = Parameters(rt, FEATURES, HIDDEN_DIM, orders=orders)
        params.load(np.asarray(theta, np.float32))
        bus = IsvBus(rt)
        bus.load(np.asarray(isv, np.float32))
        policy = cls(rt, params, bus, seq_len, actor, precision)
        policy.name, policy._owned = name, [params, bus]
        return policy

    @classmethod
    def from_checkpoint(cls, rt, ckpt):
        """The policy a checkpoint's run keeps: the weights its validation kept, FlatPolicy when it kept none, its
        final weights when it validated nothing (--val-frac 0)."""
        config = ckpt.config  # first: a file without foxc's meta (the seed's) is refused by name here
        policy = cls._of_checkpoint(rt, ckpt, config)
        policy.run_settings = dict(config)
        return policy

    @classmethod
    def _of_checkpoint(cls, rt, ckpt, config: dict):
        record = kept_record(ckpt.sections.get(KEPT_RECORD))
        args = (config["seq_len"], config.get("actor", "q"), config.get("precision", "f32"))
        orders = config.get("orders", "market")  # a run from before --orders placed market orders
        if record is not None and record["validations"] > 0:
            if record["step"] < 0:
                return FlatPolicy(f"{FLAT_NAME} (its validation kept no weights)")
            return cls.from_arrays(rt, ckpt[KEPT_THETA], ckpt[KEPT_ISV], *args,
                                   name=f"{NAME}, kept at step {record['step']}", orders=orders)
        params = Parameters(rt, FEATURES, HIDDEN_DIM, orders=orders)
        theta = np.zeros(params.size, np.float32)
        for t in params.tensors:
            theta[t.offset:t.offset + t.size] = np.asarray(ckpt[t.name], np.float32).reshape(-1)
        params.close()
        return cls.from_arrays(rt, theta, ckpt["isv"], *args, orders=orders)

    def _bind(self, ctx):  # the gather, encoder and actor of this window and simulator (once per pair)
        self.close()
        records, sim, B, K = ctx.records, ctx.sim, len(ctx.cursor), self.seq_len
        if sim is None:
            raise ValueError("AgentPolicy runs on the device: it needs the evaluation's simulator (ctx.sim)")
        if sim.rt is not self.rt:  # its kernels would read the simulator's memory through another address space
            raise ValueError("AgentPolicy runs on the runtime it was made on, and this evaluation on another runtime: "
                             "give evaluate(..., rt=policy.rt)")
        first, last = segment_runs(records["segment"])
        self._first_ok = np.repeat(first, last - first + 1) + K - 1  # per row: the first with a whole window
        labels = np.zeros((LABEL_PLANES, HORIZONS, len(records)), np.float32)  # the gather's input; unused here
        renumbered = records
        if len(records) and records["segment"][0] != 0:  # a window cut from the middle of a file starts mid-way
            renumbered = records.copy()
            renumbered["segment"] -= records["segment"][0]
        market = MarketData(renumbered, "", 0, "evaluation", [], ctx.tick)
        unit = ctx.tick * int(self.isv["price_unit_ticks"])  # the unit of price the agent was trained in
        self.data = DeviceDataset(self.rt, market, labels, B, K, cursor=sim.cursor, unit=unit)
        self.encoder = Encoder(self.rt, self.params, B, K, self.data.features, self.precision)
        self.actor = Actor(self.rt, self.params, self.isv, h=self.encoder.h, pos=sim.pos,
                           features=self.data.features, batch=B, seq_len=K, tick=unit, actor=self.actor_kind,
                           greedy=True, precision=self.precision, sim=sim)
        self.actor.reset(0)
        self.plans = [self.data.gather_plan, *self.encoder.forward, *self.actor.state_plans, *self.actor.act_plans]
        self._parts = [self.data, self.actor]
        self._bound = (id(records), id(sim))

    def __call__(self, ctx):
        if self._bound != (id(ctx.records), id(ctx.sim)):
            self._bind(ctx)
        elif ctx.step == 0:  # a new run over the same window: no position history
            self.actor.reset(0)
        cursor = np.asarray(ctx.cursor, np.int64)
        ok = cursor >= self._first_ok[cursor]
        for plan in self.plans:
            plan.launch(self.rt.stream)
        actions = self.actor.actions.download()
        probs = self.actor.probs.download().astype(np.float64)
        actions[~ok] = HOLD
        probs[~ok] = np.eye(probs.shape[1])[HOLD]
        return actions, probs

    def close(self):
        for part in self._parts:
            part.close()
        self._parts, self._bound = [], None

    def release(self):
        """close(), and the weights and ISV it owns (from_arrays)."""
        self.close()
        for part in self._owned:
            part.close()
        self._owned = []

