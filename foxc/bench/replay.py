"""GPU prioritized replay: one push+flush+sample+next-state+update step, eager and graph; sampling vs a peer.

The peer is TorchRL's PrioritizedReplayBuffer on the GPU when torch and torchrl import, else the numpy sum-tree
below; both are timed in the same run, on the same capacity, batch and priorities, gathering h_t and h_tp1.
"""
from __future__ import annotations

import time

import numpy as np

from ..cli import int_at_least, positive_int, power_of_two, text_table as table
from ..isv import IsvBus
from ..nn.model import STATE_DIM
from ..profile import KernelProfiler
from ..replay import ReplayBuffer
from ..replay.layout import MAX_BACKTESTS, MAX_BATCH, MAX_CAPACITY
from . import harness
from .cupti import TIMELINE_COLUMNS, trace_graph
from .report import write_json

GOAL_GRAPH_US = 25.0  # the replay step as a graph


class NumpySumTree:
    """A plain proportional PER sum-tree in numpy (float64, stratified draws, vectorised walk)."""

    def __init__(self, capacity: int, seed: int = 0):
        self.capacity = capacity
        self.tree = np.zeros(2 * capacity)
        self.h_t = np.zeros((capacity, STATE_DIM), np.float32)
        self.h_tp1 = np.zeros((capacity, STATE_DIM), np.float32)
        self.rng = np.random.default_rng(seed)

    def set_priorities(self, index: np.ndarray, priority: np.ndarray):
        self.tree[self.capacity + index] = priority
        first = self.capacity // 2
        while first >= 1:
            self.tree[first:2 * first] = self.tree[2 * first:4 * first:2] + self.tree[2 * first + 1:4 * first:2]
            first //= 2

    def sample(self, batch: int, beta: float):
        root = self.tree[1]
        u = (np.arange(batch) + self.rng.random(batch)) * (root / batch)
        node = np.ones(batch, np.int64)
        while node[0] < self.capacity:
            left = self.tree[2 * node]
            right = u >= left
            u = np.where(right, u - left, u)
            node = 2 * node + right
        index = node - self.capacity
        prob = self.tree[node] / root
        return index, (prob.min() / prob) ** beta, self.h_t[index], self.h_tp1[index]


def _fill(rb: ReplayBuffer, rng, steps: int):
    e, s = rb.n_backtests, rb.batch
    for _ in range(steps):
        rb.inputs["h_t"].upload(rng.standard_normal((e, STATE_DIM)).astype(np.float32))
        rb.inputs["h_tp1"].upload(rng.standard_normal((e, STATE_DIM)).astype(np.float32))
        rb.inputs["reward"].upload(rng.standard_normal(e).astype(np.float32))
        rb.inputs["done"].upload((rng.random(e) < 0.01).astype(np.float32))
        rb.inputs["td"].upload(rng.standard_normal(s).astype(np.float32))
        rb.step()
    rb.rt.stream.synchronize()


def _timed(rt, launch, reps: int) -> tuple[float, float]:
    """(device µs, wall µs) per repetition, after one untimed."""
    launch()
    t = harness.time_launches(rt, launch, reps)
    return t.gpu_ms * 1e3 / reps, t.wall_s * 1e6 / reps


def _torchrl_peer(capacity: int, batch: int, priorities: np.ndarray, reps: int) -> float:
    """Samples/s of TorchRL's PrioritizedReplayBuffer on the GPU, or raise why it cannot run."""
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, PrioritizedReplayBuffer
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no GPU")
    dev = torch.device("cuda")
    rb = PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(capacity, device=dev),
                                 batch_size=batch)
    rb.extend(TensorDict({"h_t": torch.randn(capacity, STATE_DIM, device=dev),
                          "h_tp1": torch.randn(capacity, STATE_DIM, device=dev)}, batch_size=[capacity]))
    rb.update_priority(torch.arange(capacity), torch.as_tensor(priorities, dtype=torch.float32))  # its trees are FP32
    for _ in range(3):
        rb.sample()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        rb.sample()
    torch.cuda.synchronize()
    return batch * reps / (time.perf_counter() - t0)


def _numpy_peer(capacity: int, batch: int, priorities: np.ndarray, reps: int) -> float:
    tree = NumpySumTree(capacity)
    tree.set_priorities(np.arange(capacity), priorities)
    tree.sample(batch, 0.4)
    t0 = time.perf_counter()
    for _ in range(reps):
        tree.sample(batch, 0.4)
    return batch * reps / (time.perf_counter() - t0)


def graph_timeline(rt, graph, reps: int) -> str:
    """The replayed graph's kernels with each's median start and end (µs) as a table; or why not."""
    traced = trace_graph(lambda: graph.launch(rt.stream), rt.stream.synchronize, reps) if rt.backend == "cuda" \
        else {"busy_unmeasured": f"{rt.backend} backend: no GPU kernels"}
    if "busy_unmeasured" in traced:
        return f"timeline: not traced ({traced['busy_unmeasured']})"
    return (f"timeline of the graph (µs from a replay's first kernel, medians of {reps} replays; "
            f"traced {traced['traced_ms'] * 1e3:.1f} µs a replay):\n" + table(traced["timeline"], TIMELINE_COLUMNS))


def main(argv=None) -> int:
    ap = harness.parser("replay", __doc__)
    ap.add_argument("--n-backtests", type=int_at_least(1, min(MAX_BACKTESTS, MAX_BATCH)), default=None,
                    help="backtests pushing per step (default 1024; 32 on reference)")
    ap.add_argument("--per-capacity", type=power_of_two(MAX_CAPACITY), default=None,
                    help="transitions held, a power of two (default 65536; 512 on reference)")
    ap.add_argument("--reps", type=positive_int, default=None, help="timed repetitions (default 500; 5 on reference)")
    ap.add_argument("--peer", choices=("auto", "numpy"), default="auto", help="auto tries TorchRL first")
    ap.add_argument("--profile", action="store_true",
                    help="also time each kernel of the step with CUDA events (eager) and print the table")
    ap.add_argument("--timeline", action="store_true",
                    help="also replay the step's graph under a CUPTI kernel trace and print each kernel's median "
                         "start and end in it (needs libcupti, as bench train --busy)")
    return harness.run(ap, argv, _main)


def _main(args, rt) -> int:
    cuda = rt.backend == "cuda"
    batch = n_backtests = args.n_backtests or (1024 if cuda else 32)
    capacity = args.per_capacity or (65_536 if cuda else 512)
    reps = args.reps or (500 if cuda else 5)
    isv = IsvBus(rt, device_resident=True)  # as in the trainer: kernels read device memory
    rb = ReplayBuffer(rt, isv, capacity=capacity, n_backtests=n_backtests, batch=batch, width=STATE_DIM, seed=0)
    _fill(rb, np.random.default_rng(0), capacity // n_backtests + 2 + int(isv["n_step"]))  # full before capture

    eager_dev, eager_wall = _timed(rt, rb.step, reps)
    if args.profile:
        with KernelProfiler(rt) as kernels:
            for _ in range(min(reps, 100)):
                kernels.profile_step(rb.step_plans)
            print(kernels.table())
    with rt.capture(name="replay step") as cap:
        rb.step()
    graph_dev, graph_wall = _timed(rt, lambda: cap.graph.launch(rt.stream), reps)
    if args.timeline:
        print(graph_timeline(rt, cap.graph, reps))
    with rt.capture(name="replay sample") as cap_sample:  # the batch with its weights: sample, then next state
        rb.sample()
        rb.next_state()
    sample_dev, sample_wall = _timed(rt, lambda: cap_sample.graph.launch(rt.stream), reps)
    ours = batch / (sample_wall * 1e-6)

    leaves = rb.export_state()["tree"][capacity:]
    peer_name, peer_note, peer = "numpy sum-tree", "", None
    if args.peer == "auto" and cuda:
        try:
            peer = _torchrl_peer(capacity, batch, leaves, reps)
            peer_name = "TorchRL PrioritizedReplayBuffer (cuda)"
        except Exception as e:  # any import or runtime failure falls back, with the reason printed
            peer_note = f" (TorchRL not used: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    if peer is None:
        peer = _numpy_peer(capacity, batch, leaves, max(3, reps // 10))
    rows = [
        {"what": f"step eager ({rb.launches_per_step} launches)", "count": reps,
         "device_us": round(eager_dev, 2), "wall_us": round(eager_wall, 2)},
        {"what": "step as a graph", "count": reps, "device_us": round(graph_dev, 2), "wall_us": round(graph_wall, 2)},
        {"what": "sample + next state (graph)", "count": reps, "device_us": round(sample_dev, 2),
         "wall_us": round(sample_wall, 2), "samples_per_s": round(ours)},
        {"what": f"peer: {peer_name}", "count": "", "samples_per_s": round(peer)},
    ]
    print(f"backend {rt.backend}: {rt.device_name}")
    print(f"B={n_backtests} backtests, batch {batch}, capacity {capacity} ({rb.length()} filled), "
          f"n_step {int(isv['n_step'])}")
    print(table(rows, ["what", "count", "device_us", "wall_us", "samples_per_s"]))
    write_json(args.json, "replay", rt, rows, {"n_backtests": n_backtests, "batch": batch, "capacity": capacity,
                                               "peer": peer_name, "sampling_ratio": ours / peer})
    goal = "meets" if graph_wall <= GOAL_GRAPH_US else "misses"
    print(f"summary: replay step {graph_wall:.1f} us as a graph ({goal} the {GOAL_GRAPH_US:.0f} us goal), "
          f"{eager_wall:.1f} us eager; sampling {ours / peer:.2f}x {peer_name}{peer_note} ({rt.backend})")
    for closing in (cap.graph, cap_sample.graph, rb):
        closing.close()
    return 0
