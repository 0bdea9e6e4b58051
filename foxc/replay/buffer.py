"""`ReplayBuffer`: the device arrays and launch plans of GPU prioritized replay.

    rb = ReplayBuffer(rt, isv, capacity=65536, n_backtests=1024, batch=1024, width=132, seed=7)
    rb.inputs["h_t"].upload(...)         # or pass other components' arrays as `inputs=`
    rb.push(); rb.flush(); rb.sample()   # rb.sampled["h_t"], ["index"], ["prob"], ...
    rb.next_state()                      # after input h_tp1 is written: the next states that are h_tp1, ["weight"]
    rb.inputs["td"] <- |TD| of the batch; rb.update_priorities()   # leaves, then the tree's sums

Every method only launches prebuilt plans on the stream: no allocation, no
host reads and no host branches on device data, so a whole step can be
captured into a graph. A transition's states (`h_t`, `h_tp1`) are rows of `width`
floats: the buffer does not care what they hold (the trainer stores the agent's state,
the encoder's h followed by the backtest's position features). Write head, length, running max priority and the
samplers' generator states all live on the device. Only `next_state` reads input h_tp1 (this step's
next state): push, flush and sample need nothing of the current step but the ring's inputs, so a trainer
runs them while h_tp1 is still being computed.
"""
from __future__ import annotations

import numpy as np

from .. import vec
from ..component import Component
from ..numbers import whole
from ..rng import seed_states
from .layout import (CTR_COUNT, CTR_LENGTH, MAX_BACKTESTS, MAX_BATCH, MAX_CAPACITY, MAX_WIDTH, N_STEP_MAX, RING_COLS,
                     ROW_BLOCK, TR_COLS, warp_grid)
from .nstep import FLUSH_WRITE, NEXT_STATE, RING_PUSH
from .priority import plan_update_tree
from .sampling import SAMPLE

# name -> (shape given capacity C, envs E, batch S, ring length N, row width W; dtype)
_STATE = {
    "ring_h": (lambda C, E, S, N, W: (E, N, W), np.float32),
    "ring_rows": (lambda C, E, S, N, W: (E, N, RING_COLS), np.float32),
    "ring_pos": (lambda C, E, S, N, W: (E, 2), np.uint32),
    "counters": (lambda C, E, S, N, W: (CTR_COUNT,), np.uint32),
    "store_h_t": (lambda C, E, S, N, W: (C, W), np.float32),
    "store_h_tp1": (lambda C, E, S, N, W: (C, W), np.float32),
    "store_rows": (lambda C, E, S, N, W: (C, TR_COLS), np.float32),
    "tree": (lambda C, E, S, N, W: (2 * C,), np.float64),
    "max_priority": (lambda C, E, S, N, W: (1,), np.float32),
    "rng": (lambda C, E, S, N, W: (S,), np.uint32),
}
_SCRATCH = {
    "flush": (lambda C, E, S, N, W: (E, 2), np.int32),
    "offsets": (lambda C, E, S, N, W: (E,), np.uint32),
    # flushed slots whose next state is this step's h_tp1: backtest + 1 until replay_next_state (0 between steps)
    "pending": (lambda C, E, S, N, W: (C,), np.int32),
    "drew_pending": (lambda C, E, S, N, W: (S,), np.int32),  # per sample: that backtest, or -1
    "push_ticket": (lambda C, E, S, N, W: (1,), np.uint32),  # replay_ring_push's finished-block count: 0 between
    "block_min": (lambda C, E, S, N, W: (warp_grid(S),), np.float64),  # replay_sample's smallest prob a block
    "tree_ticket": (lambda C, E, S, N, W: (1,), np.uint32),  # replay_update_tree's finished-block count: the same
}
INPUTS = {
    "h_t": (lambda E, S, W: (E, W), np.float32),
    "action": (lambda E, S, W: (E,), np.int32),
    "reward": (lambda E, S, W: (E,), np.float32),
    "reward_raw": (lambda E, S, W: (E,), np.float32),
    "done": (lambda E, S, W: (E,), np.float32),
    "log_pi": (lambda E, S, W: (E,), np.float32),
    "h_tp1": (lambda E, S, W: (E, W), np.float32),
    "td": (lambda E, S, W: (S,), np.float32),
}
SAMPLED = {  # per sample; "row": width floats
    "h_t": (("row",), np.float32), "h_tp1": (("row",), np.float32), "action": ((), np.int32),
    "return": ((), np.float32), "return_raw": ((), np.float32), "done": ((), np.float32),
    "log_pi": ((), np.float32), "gamma_n": ((), np.float32), "index": ((), np.int32),
    "prob": ((), np.float64), "weight": ((), np.float32),
}
STATE_NAMES = tuple(_STATE)


class ReplayBuffer(Component):
    def __init__(self, rt, isv, *, capacity: int, n_backtests: int, batch: int, width: int, n_max: int = N_STEP_MAX,
                 seed: int = 0, inputs: dict | None = None, name: str = "replay"):
        sizes = dict(capacity=capacity, n_backtests=n_backtests, batch=batch, width=width, n_max=n_max)
        for what, value in sizes.items():  # 64.5 failed on '&', batch=2.5 was cut to 2
            if not whole(value):
                raise ValueError(f"{what} must be a whole number, got {value!r}")
        capacity, n_backtests, batch, width, n_max = (int(v) for v in sizes.values())
        if not whole(seed) or seed < 0:  # 1.7 was cut to 1, -1 failed in numpy
            raise ValueError(f"seed must be a non-negative whole number, got {seed!r}")
        if capacity < 2 or capacity > MAX_CAPACITY or capacity & (capacity - 1):
            raise ValueError(f"capacity must be a power of two in [2, {MAX_CAPACITY}], got {capacity}")
        for what, value, most in (("n_backtests", n_backtests, MAX_BACKTESTS), ("batch", batch, MAX_BATCH),
                                  ("width (floats per state row)", width, MAX_WIDTH),
                                  ("n_max (the ring's length)", n_max, N_STEP_MAX)):
            if not 1 <= value <= most:
                raise ValueError(f"{what} must be in [1, {most}], got {value}")
        unknown = set(inputs or {}) - set(INPUTS)
        if unknown:
            raise ValueError(f"unknown replay inputs {sorted(unknown)}; known: {', '.join(INPUTS)}")
        self.rt, self.isv, self.name, self.seed = rt, isv, name, int(seed)
        self.capacity, self.n_backtests, self.batch, self.n_max, self.width = capacity, n_backtests, batch, n_max, width
        dims = (self.capacity, self.n_backtests, self.batch, self.n_max, self.width)
        for k, found in (inputs or {}).items():  # the kernels read them by pointer: past the end, or int bits as floats
            shape, dt = INPUTS[k]
            want = shape(self.n_backtests, self.batch, self.width)
            if found is not None and (tuple(found.shape) != want or found.dtype != np.dtype(dt)):
                raise ValueError(f"replay input '{k}' must be {np.dtype(dt)} {want}, got {found.dtype} "
                                 f"{tuple(found.shape)}")
        self.state = {k: rt.device_array(shape(*dims), dt, f"{name}.{k}") for k, (shape, dt) in _STATE.items()}
        self.scratch = {k: rt.device_array(shape(*dims), dt, f"{name}.{k}") for k, (shape, dt) in _SCRATCH.items()}
        given = inputs or {}
        self._owned_inputs = {k: rt.device_array(shape(self.n_backtests, self.batch, self.width), dt, f"{name}.in.{k}")
                              for k, (shape, dt) in INPUTS.items() if given.get(k) is None}
        self.inputs = {k: given[k] if given.get(k) is not None else self._owned_inputs[k] for k in INPUTS}
        self.sampled = {k: rt.device_array((self.batch, *(self.width if d == "row" else d for d in shape)), dt,
                                           f"{name}.out.{k}") for k, (shape, dt) in SAMPLED.items()}
        self._build_plans()
        self.reset()

    # --- plans ---------------------------------------------------------------
    def _build_plans(self):
        rt, s, x, i, o = self.rt, self.state, self.scratch, self.inputs, self.sampled
        E, S, N, C, W = self.n_backtests, self.batch, self.n_max, self.capacity, self.width
        ring = {k: s[k] for k in ("ring_h", "ring_rows", "ring_pos")}
        store = {k: s[k] for k in ("store_h_t", "store_h_tp1", "store_rows")}
        slots = dict(flush=x["flush"], offsets=x["offsets"], counters=s["counters"])
        self.push_plans = [rt.plan(RING_PUSH, warp_grid(E), ROW_BLOCK, dict(
            **ring, **slots, ticket=x["push_ticket"],
            **{k: i[k] for k in ("h_t", "action", "reward", "reward_raw", "done", "log_pi")},
            isv=self.isv, n_backtests=E, n_max=N, width=W, capacity=C))]
        self.flush_plans = [rt.plan(FLUSH_WRITE, warp_grid(E), ROW_BLOCK, dict(
            **ring, **slots, isv=self.isv, max_priority=s["max_priority"], **store, tree=s["tree"],
            pending=x["pending"], n_backtests=E, n_max=N, capacity=C, width=W))]
        self.sample_plans = [rt.plan(SAMPLE, warp_grid(S), ROW_BLOCK, dict(
            tree=s["tree"], counters=s["counters"], **store, pending=x["pending"], rng=s["rng"],
            **{f"out_{k}": o[k] for k in ("h_t", "h_tp1", "action", "return", "return_raw", "done", "log_pi",
                                         "gamma_n", "index", "prob")},
            out_next=x["drew_pending"], block_min=x["block_min"], batch=S, capacity=C, width=W))]
        self.next_plans = [rt.plan(NEXT_STATE, warp_grid(E) + warp_grid(S), ROW_BLOCK, dict(
            ring_pos=s["ring_pos"], **slots, h_tp1=i["h_tp1"], pending=x["pending"], store_h_tp1=s["store_h_tp1"],
            out_next=x["drew_pending"], out_prob=o["prob"], block_min=x["block_min"], isv=self.isv, out_h_tp1=o["h_tp1"],
            out_weight=o["weight"], n_backtests=E, batch=S, capacity=C, width=W))]
        tree = dict(tree=s["tree"], max_priority=s["max_priority"], ticket=x["tree_ticket"], index=o["index"],
                    td=i["td"], isv=self.isv)
        self.update_plans = [plan_update_tree(rt, C, S, **tree)]
        self.rebuild_plans = [plan_update_tree(rt, C, 0, **tree)]  # no sample: the sums alone

    def _run(self, plans, stream):
        stream = stream or self.rt.stream
        for plan in plans:
            plan.launch(stream)

    # --- one step, in the trainer's order ---------------------------------------
    def push(self, stream=None):
        """Append inputs h_t, action, reward, reward_raw, done, log_pi to every backtest's ring; give the
        transitions leaving the rings their slots."""
        self._run(self.push_plans, stream)

    def flush(self, stream=None):
        """Move completed n-step transitions into storage at the running max priority; a next state that is
        this step's input h_tp1 stays pending until `next_state`."""
        self._run(self.flush_plans, stream)

    def sample(self, stream=None):
        """Draw `batch` transitions into `sampled` (one launch); a drawn transition whose next state is pending
        gets its h_tp1 row from `next_state`, and every sample its importance weight."""
        self._run(self.sample_plans, stream)

    def next_state(self, stream=None):
        """Input h_tp1 into the pending next states, in storage and in `sampled`, and the batch's importance
        weights into `sampled["weight"]` (after flush and sample, once h_tp1 is written; one launch)."""
        self._run(self.next_plans, stream)

    def update_priorities(self, stream=None):
        """Set the sampled leaves' priorities from input td (|TD error|), then recompute the tree's internal
        sums (the flushed leaves' too): one launch."""
        self._run(self.update_plans, stream)

    def rebuild(self, stream=None):
        """Recompute the tree's internal sums alone, after leaves were written some other way."""
        self._run(self.rebuild_plans, stream)

    def step(self, stream=None):
        """push, flush, sample, next_state, update_priorities: what a training step launches (TD comes from
        outside)."""
        for part in (self.push, self.flush, self.sample, self.next_state, self.update_priorities):
            part(stream)

    @property
    def step_plans(self) -> list:
        """The plans `step` launches, in its order."""
        return self.push_plans + self.flush_plans + self.sample_plans + self.next_plans + self.update_plans

    @property
    def launches_per_step(self) -> int:
        return len(self.step_plans)

    # --- state outside a step -----------------------------------------------------
    def reset(self):
        """Empty rings and storage, max priority 1, generator states from the seed, no draw awaiting a next
        state; zeroes the inputs it owns."""
        rt, stream = self.rt, self.rt.stream
        for arr in (*self.state.values(), *self.scratch.values(), *self._owned_inputs.values()):
            words = arr.nbytes // 4
            vec.plan_elementwise(rt, vec.FILL_U32, arr, 0, words).launch(stream)
        vec.plan_elementwise(rt, vec.FILL_F32, self.state["max_priority"], 1.0, 1).launch(stream)
        self._nothing_pending()
        self.state["rng"].upload(seed_states(self.seed, self.batch, "replay"), stream)
        stream.synchronize()

    def _nothing_pending(self):
        """No slot awaits its next state and no draw a row (flush / sample leave them for next_state)."""
        rt, stream = self.rt, self.rt.stream
        vec.plan_elementwise(rt, vec.FILL_U32, self.scratch["pending"], 0, self.capacity).launch(stream)
        vec.plan_elementwise(rt, vec.FILL_U32, self.scratch["drew_pending"], 0xFFFFFFFF, self.batch).launch(stream)  # -1

    def length(self) -> int:
        """Filled slots (reads the device: not for use inside a step)."""
        return int(self.state["counters"].download()[CTR_LENGTH])

    def config(self) -> np.ndarray:
        return np.array([self.capacity, self.n_backtests, self.batch, self.n_max, self.width], np.int64)

    def export_state(self) -> dict[str, np.ndarray]:
        """Every array needed to resume exactly, as numpy (plus `config`); synchronizes the stream."""
        self.rt.stream.synchronize()
        out = {k: arr.download() for k, arr in self.state.items()}
        out["config"] = self.config()
        return out

    def import_state(self, state: dict[str, np.ndarray]):
        """Restore what export_state returned; shapes, dtypes and config must match this buffer."""
        missing = (set(_STATE) | {"config"}) - set(state)
        if missing:
            raise ValueError(f"replay state lacks {sorted(missing)}")
        if not np.array_equal(np.asarray(state["config"]), self.config()):
            raise ValueError(f"replay state was saved with (capacity, n_backtests, batch, n_max, width) = "
                             f"{tuple(int(v) for v in state['config'])}, this buffer has {tuple(self.config())}")
        for k, arr in self.state.items():
            host = np.asarray(state[k])
            if host.shape != arr.shape or host.dtype != arr.dtype:
                raise ValueError(f"replay state '{k}': expected {arr.shape} {arr.dtype}, got {host.shape} {host.dtype}")
        for k, arr in self.state.items():
            arr.upload(np.asarray(state[k]), self.rt.stream)
        self._nothing_pending()  # marks of a flush before the import would point into the imported storage
        self.rt.stream.synchronize()

    def buffers(self) -> list:
        return [*self.state.values(), *self.scratch.values(), *self.sampled.values(), *self._owned_inputs.values()]
