"""A run's persistent device state as a checkpoint state dict, and back.

Only what carries from one step to the next is saved: scratch that every step rewrites is
left out. The resume-identity tests hold this list to account: a missing array makes the
resumed run drift from the uninterrupted one.
"""
from __future__ import annotations

import numpy as np

from ..checkpoint import AdamState
from ..nn.optim import ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_WD

DATA_STATE = ("cursors", "episode_steps", "done", "last", "rng")
SIM_STATE = ("bid_px", "ask_px", "bid_sz", "ask_sz", "book_ts", "book_idx", "mid_x2", "atr_ema", "skip_range",
             "skip_crossed", "actions", "stop_loss", "fee_per_lot", "pos", "trade_log", "dones")
AGENT_STATE = ("act_rng", "prev_trades", "h_saved", "reward_scaled", "reward_raw", "log_prob")


def persistent_arrays(ts) -> dict:
    """name -> device array of everything that carries across steps (besides the model and replay)."""
    arrays = {f"data.{k}": getattr(ts.data, k) for k in DATA_STATE}
    arrays.update({f"sim.{k}": getattr(ts.sim, k) for k in SIM_STATE})
    arrays.update({f"agent.{k}": getattr(ts, k) for k in AGENT_STATE})
    return arrays


def _plain(host: np.ndarray) -> np.ndarray:
    """Structured records travel as raw bytes (the format holds plain numeric dtypes)."""
    return host.reshape(-1).view(np.uint8) if host.dtype.fields else host


def export_state(ts) -> dict:
    """The state dict of a TrainStep (synchronizes the stream)."""
    ts.rt.stream.synchronize()
    params, isv = ts.learner.params, ts.isv
    state = {"isv": isv.values.copy()}
    theta, m, v = params.host("theta"), params.host("adam_m"), params.host("adam_v")
    steps = params.adam_steps.download()
    for i, t in enumerate(params.tensors):
        state[t.name] = theta[t.name]
        state[f"adam_{t.name}"] = AdamState(m[t.name].reshape(-1), v[t.name].reshape(-1), int(steps[i]),
                                            isv[t.lr_slot], ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_WD)
    target = params.target.download()
    for name in ("dqn_w", "dqn_b"):
        t = params.by_name[name]
        start = t.offset - params.target_offset
        state[f"{name}_target"] = target[start:start + t.size].reshape(t.shape)
    replay = ts.replay.export_state()
    state.update({f"replay.{k}": np.asarray(a) for k, a in replay.items()})
    for name, arr in persistent_arrays(ts).items():
        state[name] = _plain(arr.download())
    return state


def import_state(ts, sections: dict):
    """Load a state dict written by export_state into a TrainStep built with the same configuration."""
    params = ts.learner.params
    ts.isv.values[:] = sections["isv"]
    theta = np.zeros(params.size, np.float32)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    steps = np.zeros(len(params.tensors), np.int32)
    for i, t in enumerate(params.tensors):
        theta[t.offset:t.offset + t.size] = np.asarray(sections[t.name]).reshape(-1)
        adam = sections[f"adam_{t.name}"]
        m[t.offset:t.offset + t.size], v[t.offset:t.offset + t.size] = adam.m, adam.v
        steps[i] = adam.step
    target = np.zeros(params.target_size, np.float32)
    for name in ("dqn_w", "dqn_b"):
        t = params.by_name[name]
        start = t.offset - params.target_offset
        target[start:start + t.size] = np.asarray(sections[f"{name}_target"]).reshape(-1)
    params.theta.upload(theta)
    params.adam_m.upload(m)
    params.adam_v.upload(v)
    params.adam_steps.upload(steps)
    params.target.upload(target)
    ts.replay.import_state({k[len("replay."):]: a for k, a in sections.items() if k.startswith("replay.")})
    for name, arr in persistent_arrays(ts).items():
        host = np.asarray(sections[name])
        arr.upload(host.view(arr.dtype).reshape(arr.shape) if arr.dtype.fields else host.reshape(arr.shape))
    ts.rt.stream.synchronize()
