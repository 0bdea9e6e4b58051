"""The acting path on the device: the agent's state, the head it acts on, and agent_act.

    actor = Actor(rt, params, isv, h=encoder.h, pos=sim.pos, features=data.features, batch=B,
                  seq_len=K, tick=tick, actor="q", greedy=False, actions=sim.actions, stop_loss=sim.stop_loss)
    actor.state_plans   # state = [h | position features] (and lots, the open trade's drawdown)
    actor.act_plans     # the online C51 head (or the policy) on the state, then agent_act

One definition of what the agent sees and how it picks an action, used by the training step
(epsilon-greedy behaviour, actions written straight into the simulator's inputs) and by
evaluation (greedy). The state's position features come from the simulator's position
records (`pos`), so they are the same in both.
"""
from __future__ import annotations

import numpy as np

from ..data.record import PRICE_SCALE
from ..nn.heads import C51_ATOMS, plan_c51_distribution
from ..nn.matmul import ACT_RELU
from ..nn.model import Linear
from ..component import Persistent
from ..rng import seed_states
from . import kernels
from .layout import ACTORS, POS_INDEX, STATE_BLOCK

MONEY_SCALE = 1.0 / PRICE_SCALE  # the simulator's money (price x 1e9 x lots) in price units per lot


class Actor:
    def __init__(self, rt, params, isv, *, h, pos, features, batch: int, seq_len: int, tick: int, actor: str = "q",
                 greedy: bool = False, state=None, log_prob=None, actions=None, stop_loss=None,
                 precision: str = "f32", sim=None):
        """`state`, `log_prob`, `actions`, `stop_loss`: other components' arrays to write into (the
        replay reads the first two, the simulator the last two); allocated here when not given. An agent with
        resting orders (params.orders "passive") reads the order state of `sim` (a LobSim with resting orders)
        and writes its market actions and quote codes (`actions` is then the agent's own, 0..8, for the replay)."""
        if actor not in ACTORS:
            raise ValueError(f"actor must be one of {', '.join(ACTORS)}, got '{actor}'")
        self.rt, self.batch = rt, int(batch)
        B, S, D, R = self.batch, params.state_dim, params.hidden, params.rl_hidden
        A, quoting = params.n_actions, params.orders == "passive"
        assert not quoting or (sim is not None and sim.passive is not None), "a quoting agent needs a passive LobSim"
        self._owned = []
        keep = self.persistent = Persistent()  # the position history, sampling states, exploration segments

        def dev(shape, dtype, name):
            a = rt.device_array(shape, dtype, name)
            self._owned.append(a)
            return a
        self.state = keep("state", state if state is not None else dev((B, S), np.float32, "agent_state"))
        self.trade_steps = keep("trade_steps", dev(B, np.int32, "agent_trade_steps"))
        self.prev_lots = keep("prev_lots", dev(B, np.int32, "agent_prev_lots"))
        self.lots = dev(B, np.int32, "agent_lots")
        self.drawdown = dev(B, np.float32, "agent_drawdown")
        self.z = dev((B, R), np.float32, "act_rl_z")
        self.q_logits = dev((B, params.q_outputs), np.float32, "act_q_logits")
        self.q_probs = dev((B, A, C51_ATOMS), np.float32, "act_q_probs")
        self.q = dev((B, A), np.float32, "act_q")
        self.rng = keep("rng", dev(B, np.uint32, "act_rng"))
        self.explore = keep("explore", dev(B, np.int32, "act_explore"))  # 0, 2 + a segment's position, 16 + quote
        self.actions = actions if actions is not None else dev(B, np.int32, "actions")
        if quoting:  # the time each side's order has rested, counted in steps
            self.quote_since = keep("quote_since", dev((2, B), np.int64, "act_quote_since"))
            self.quote_steps = keep("quote_steps", dev((2, B), np.int32, "act_quote_steps"))
        self.stop_loss = stop_loss if stop_loss is not None else dev(B, np.uint32, "stop_loss")
        self.log_prob = keep("log_prob", log_prob if log_prob is not None else dev(B, np.float32, "log_prob"))
        self.probs = dev((B, A), np.float32, "act_probs")
        self.flags = dev(B, np.uint32, "act_flags")
        side = self.state.at(D + POS_INDEX["side"])
        trunk = Linear(rt, params, "rl_w", "rl_b", self.state, self.z, B, S, R, ACT_RELU, precision=precision)
        q = Linear(rt, params, "dqn_w", "dqn_b", self.z, self.q_logits, B, R, params.q_outputs, precision=precision)
        heads = [*trunk.forward, *q.forward,
                 plan_c51_distribution(rt, [(self.q_probs, self.q, self.q_logits, side)], isv, S, B, A)]
        self.policy_logits = None
        if actor == "policy":
            self.policy_logits = dev((B, A), np.float32, "act_policy_logits")
            heads += Linear(rt, params, "policy_w", "policy_b", self.z, self.policy_logits, B, R, A,
                            precision=precision).forward
        state_args = dict(h=h, pos=pos, features=features, trade_steps=self.trade_steps, prev_lots=self.prev_lots,
                          state=self.state, lots=self.lots, drawdown=self.drawdown, tick=int(tick),
                          money_scale=MONEY_SCALE, D=D, K=int(seq_len), B=B)
        act_args = dict(q=self.q, policy_logits=self.policy_logits if self.policy_logits is not None else self.q,
                        rng_state=self.rng, explore=self.explore, position_lots=self.lots, drawdown=self.drawdown,
                        isv=isv, actions=self.actions, log_prob=self.log_prob, probs=self.probs, flags=self.flags,
                        stop_loss=self.stop_loss, actor=ACTORS[actor], greedy=int(greedy), B=B)
        if quoting:
            state_kernel, act_kernel = kernels.AGENT_STATE_QUOTES, kernels.AGENT_ACT_QUOTES
            state_args.update(snaps=sim.snapshots, cursor=sim.cursor, q_px=sim.q_px, q_state=sim.q_state,
                              q_front=sim.q_front, q_since=sim.q_since, quote_since=self.quote_since,
                              quote_steps=self.quote_steps)
            act_args.update(market=sim.actions, quotes=sim.quotes)
        else:
            state_kernel, act_kernel = kernels.AGENT_STATE, kernels.AGENT_ACT
        self.state_plans = [rt.plan(state_kernel, B, STATE_BLOCK, state_args)]
        self.act_plans = heads + [rt.plan(act_kernel, kernels.per_backtest_grid(B), kernels.BLOCK, act_args)]

    def reset(self, seed: int):
        """No position history, fresh sampling states (host uploads: call outside a capture)."""
        for a in (self.state, self.trade_steps, self.prev_lots, self.explore, self.lots, self.drawdown, self.log_prob,
                  self.probs, self.flags, *((self.quote_since, self.quote_steps) if hasattr(self, "quote_since") else ())):
            a.upload(np.zeros(a.shape, a.dtype))
        self.rng.upload(seed_states(seed, self.batch, "actor"))

    def close(self):
        for a in self._owned:
            a.close()
