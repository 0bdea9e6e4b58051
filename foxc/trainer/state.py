"""A run's persistent device state as a checkpoint state dict, and back: what each component declared persistent
where it allocated it (a missing one makes the resume-identity tests' resumed run drift)."""
from __future__ import annotations

import numpy as np

from ..checkpoint import AdamState
from ..nn.model import TARGET_TENSORS
from ..nn.optim import ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_WD
from ..checkpoint.meta import ADAMW, canonical_dtype

def persistent_arrays(ts) -> dict:
    """name -> device array of everything components declared `persistent` (besides the model and replay)."""
    parts = {"cursors": ts.cursors, "sim": ts.sim, "agent": ts, "actor": ts.actor, "selection": ts.kept}
    if ts.rotation is not None:
        parts["resident"] = ts.rotation
    return {f"{part}.{name}": a for part, c in parts.items() for name, a in c.persistent.arrays.items()}


class Staging:
    """Device arrays come to the host through one reused mapped-pinned buffer: one DMA per array."""

    def __init__(self, rt):
        self.rt, self.buffer = rt, None

    def fetch(self, arr) -> np.ndarray:
        if self.buffer is None or self.buffer.nbytes < arr.nbytes:
            self.close()  # a larger one replaces it
            self.buffer = self.rt.mapped_array(max(arr.nbytes, 1 << 20), np.uint8, "checkpoint_staging")
        self.rt.copy_dtod(self.buffer.ptr, arr.ptr, arr.nbytes)
        self.rt.stream.synchronize()
        return self.buffer.host[:arr.nbytes].view(arr.dtype).reshape(arr.shape).copy()

    def close(self):
        if self.buffer is not None:
            self.buffer.close()
            self.buffer = None


def export_state(ts, staging: Staging | None = None) -> dict:
    """The state dict of a TrainStep (synchronizes the stream)."""
    ts.rt.stream.synchronize()
    stage = staging or Staging(ts.rt)
    params, isv = ts.learner.params, ts.isv
    state = {"isv": isv.values.copy()}
    theta, m, v, steps = (stage.fetch(getattr(params, b)) for b in ("theta", "adam_m", "adam_v", "adam_steps"))
    for i, t in enumerate(params.tensors):
        at = slice(t.offset, t.offset + t.size)
        state[t.name] = theta[at].reshape(t.shape)
        state[f"adam_{t.name}"] = AdamState(m[at], v[at], int(steps[i]), isv[t.lr_slot], ADAM_BETA1, ADAM_BETA2,
                                            ADAM_EPS, ADAM_WD)
    target = stage.fetch(params.target)
    for name in TARGET_TENSORS:
        t = params.by_name[name]
        start = t.offset - params.target_offset
        state[f"{name}_target"] = target[start:start + t.size].reshape(t.shape)
    state.update({f"replay.{k}": stage.fetch(a) for k, a in ts.replay.state.items()})
    state["replay.config"] = np.asarray(ts.replay.config())
    for name, arr in persistent_arrays(ts).items():
        host = stage.fetch(arr)  # structured records travel as raw bytes (the format holds plain numeric dtypes)
        state[name] = host.reshape(-1).view(np.uint8) if host.dtype.fields else host
    if staging is None:
        stage.close()
    return state


def expected_sections(ts) -> dict:
    """(dtype, shape) of every section export_state writes, from the arrays' metadata (no download)."""
    params = ts.learner.params
    out = {"isv": (canonical_dtype(np.float32), tuple(ts.isv.values.shape))}
    for t in params.tensors:
        out[t.name] = (canonical_dtype(np.float32), tuple(t.shape))
        out[f"adam_{t.name}"] = (ADAMW, (t.size,))
    for name in TARGET_TENSORS:
        out[f"{name}_target"] = (canonical_dtype(np.float32), tuple(params.by_name[name].shape))
    out.update({f"replay.{k}": (canonical_dtype(a.dtype), tuple(a.shape)) for k, a in ts.replay.state.items()})
    out["replay.config"] = (canonical_dtype(np.int64), (len(ts.replay.config()),))
    for name, arr in persistent_arrays(ts).items():
        plain = (np.dtype(np.uint8), (arr.nbytes,)) if arr.dtype.fields else (arr.dtype, tuple(arr.shape))
        out[name] = (canonical_dtype(plain[0]), plain[1])
    return out


def import_state(ts, sections: dict):
    """Load a state dict written by export_state into a TrainStep built with the same configuration."""
    params = ts.learner.params
    ts.isv.load(sections["isv"])
    theta = np.zeros(params.size, np.float32)
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    steps = np.zeros(len(params.tensors), np.int32)
    for i, t in enumerate(params.tensors):
        theta[t.offset:t.offset + t.size] = np.asarray(sections[t.name]).reshape(-1)
        adam = sections[f"adam_{t.name}"]
        m[t.offset:t.offset + t.size], v[t.offset:t.offset + t.size] = adam.m, adam.v
        steps[i] = adam.step
    target = np.zeros(params.target_size, np.float32)
    for name in TARGET_TENSORS:
        t = params.by_name[name]
        start = t.offset - params.target_offset
        target[start:start + t.size] = np.asarray(sections[f"{name}_target"]).reshape(-1)
    for buffer, host in ((params.theta, theta), (params.adam_m, m), (params.adam_v, v), (params.adam_steps, steps),
                         (params.target, target)):
        buffer.upload(host)
    ts.replay.import_state({k[len("replay."):]: a for k, a in sections.items() if k.startswith("replay.")})
    for name, arr in persistent_arrays(ts).items():
        host = np.asarray(sections[name])
        arr.upload(host.view(arr.dtype).reshape(arr.shape) if arr.dtype.fields else host.reshape(arr.shape))
    if ts.rotation is not None:
        ts.rotation.restore()  # the saved shards back in their slots, the draw table as it was
    ts.rt.stream.synchronize()
