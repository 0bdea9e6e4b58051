"""The whole training step: steps/s eager and as one CUDA graph, GPU time, host cost per step, a roofline.

Per B: a trainer on the default synthetic market set up as `python -m foxc.train` does runs eagerly until the
replay buffer is full, then `--steps` eager steps and `--steps` graph replays are timed. `event_ms`: per-kernel
event times of eager passes queued behind LEAD graph replays (an upper bound of kernel time). --busy replays
the graph under a CUPTI kernel trace (gpu_busy, kernel_ms, traced_ms, top kernels; refused, never estimated,
when the records are not exactly whole replays); --timeline (implies --busy) prints each kernel's median start
and end within a replay. The roofline line: the step's matrix FLOPs, the kernel time, and the launch floor (a
graph of as many trivial kernels, replayed). docs/guide/benchmarks.md says more.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from .. import vec
from ..cli import positive_int, positive_ints, text_table as table
from ..data.features import FEATURES
from ..nn import model
from ..nn.heads import Q_OUTPUTS
from ..profile import KernelProfiler
from ..trainer.config import TrainConfig
from ..trainer.run import Trainer
from ..trainer.session import run_data
from . import harness
from .cupti import TIMELINE_COLUMNS, trace_graph
from .learn import encoder_flops, heads_flops
from .report import write_json

PROFILED, LEAD = 10, 30  # profiled steps, each behind LEAD graph replays (~20 ms of GPU work at B=1,024)
BUSY_WARMUP = 10  # traced replays before the timed ones: CUPTI sets itself up on the first


def step_flops(B: int, K: int) -> float:
    """Matrix FLOPs of one step: the learner's (encoder forward and backward, every head) and the
    acting path's heads (the shared layer and the C51 head on B states)."""
    D, R = model.HIDDEN_DIM, model.RL_HIDDEN
    return encoder_flops(B, K, FEATURES, D) + heads_flops(B, D) + 2.0 * B * (model.STATE_DIM * R + R * Q_OUTPUTS)


def event_ms(rt, t: Trainer) -> float:
    """The sum of per-launch event times of one eager step (ms), the queue kept full: an upper bound of kernel time."""
    prof = KernelProfiler(rt)
    for _ in range(PROFILED):
        for _ in range(LEAD):
            t.graph.launch(rt.stream)
        prof.profile_step(t.ts.launches())
        t.steps_done += LEAD + 1
    return prof.gpu_ms / prof.steps


def traced_busy(rt, t: Trainer, steps: int) -> dict:
    """cupti.trace_graph of `steps` replays of the trainer's graph, and its copy nodes (not traced)."""
    def replay():
        t.graph.launch(rt.stream)
        t.steps_done += 1

    row = trace_graph(replay, rt.stream.synchronize, steps, BUSY_WARMUP)
    if "busy_unmeasured" in row:
        return {"busy_unmeasured": f"{row['busy_unmeasured']} ({t.graph.kernel_count} kernel nodes a replay)"}
    return {**row, "copy_nodes": t.graph.node_count() - t.graph.kernel_count}


def launch_floor_ms(rt, kernels: int, replays: int) -> float:
    """Per replay, a graph of `kernels` one-element fills: what launching the step's kernels costs."""
    x = rt.device_array(kernels, np.float32, "launch_floor")
    plans = [vec.plan_elementwise(rt, vec.FILL_F32, x.at(i), 0.0, 1) for i in range(kernels)]
    timing, _ = harness.time_graph(rt, plans, replays, warmup=10)
    x.close()
    return timing.gpu_ms / replays


def bench_one(rt, cfg: TrainConfig, data, steps: int, checkpoint_dir=None, busy: bool = False) -> dict:
    B = cfg.n_backtests
    t = Trainer(rt, cfg, data.market, data.labels, checkpoint_dir, data.source)
    t.use_graph = False  # eager until the timed eager steps have run on a full buffer
    while t.steps_done < t.capture_after:  # untimed warm-up: the buffer fills
        t.step()
    eager_wall = harness.time_launches(rt, t.step, steps).wall_s / steps
    t.capture()
    t.graph.launch(rt.stream)  # the captured step runs once before timing
    timed = harness.time_launches(rt, lambda: t.graph.launch(rt.stream), steps)
    graph_wall, gpu, host = timed.wall_s / steps, timed.gpu_ms * 1e-3 / steps, timed.host_s
    t.steps_done += steps + 1
    p0 = time.perf_counter()
    frames = t.ts.diagnostics.poll()
    poll = (time.perf_counter() - p0) / max(len(frames), 1)
    kernels = t.ts.kernel_count()
    on_gpu = rt.backend == "cuda"  # the reference backend's events time numpy on the host: no busy time to speak of
    events_ms = event_ms(rt, t) if on_gpu else None
    floor_ms = launch_floor_ms(rt, kernels, steps) if on_gpu else None
    flops = step_flops(B, cfg.seq_len)
    busy_row = (traced_busy(rt, t, steps) if busy and on_gpu else {"busy_unmeasured": "--busy not given" if not busy
                else f"{rt.backend} backend: no GPU kernels to trace"})
    row = {
        "B": B, "kernels": kernels, "eager_sps": round(1 / eager_wall, 1),
        "graph_sps": round(1 / graph_wall, 1), "speedup": round(eager_wall / graph_wall, 2),
        "gpu_ms_per_step": round(gpu * 1e3, 4), "event_ms": events_ms and round(events_ms, 4),
        "host_us_per_step": round((host / steps + poll) * 1e6, 2),
        "host_bound_share_eager": round(max(0.0, 1 - gpu / eager_wall), 3),
        "env_steps_per_s": round(B / graph_wall),
        "gflop_per_step": round(flops / 1e9, 3), "tflops": round(flops / graph_wall / 1e12, 3),
        "launch_floor_ms": floor_ms and round(floor_ms, 4), **busy_row,
    }
    if checkpoint_dir is not None:
        t0 = time.perf_counter()
        path = t.save()
        row["ckpt_save_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
        row["ckpt_mb"] = round(path.stat().st_size / 1e6, 1)
        t0 = time.perf_counter()
        t.resume(path)
        row["ckpt_load_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    t.close()
    t.ts.diagnostics.ring.close()
    return row


def main(argv=None) -> int:
    ap = harness.parser("train", __doc__)
    ap.add_argument("--n-backtests", type=positive_ints, default=None,
                    help="comma-separated batch sizes (default 256,1024,4096)")
    ap.add_argument("--steps", type=positive_int, default=None, help="timed steps per mode (default 200)")
    ap.add_argument("--seq-len", type=positive_int, default=None, help="window K (default 32)")
    ap.add_argument("--per-capacity", type=positive_int, default=None, help="replay capacity (default 65536)")
    ap.add_argument("--precision", choices=("f32", "tf32"), default="f32")
    ap.add_argument("--orders", choices=("market", "passive"), default="market",
                    help="the agent's orders: market only (default), or also resting quotes (the trainer's --orders)")
    ap.add_argument("--timeline", action="store_true",
                    help="--busy, and print each B's replay timeline: every kernel's median start and end in the step")
    ap.add_argument("--busy", action="store_true",
                    help="also replay the graph under a CUPTI kernel trace: true GPU busy and kernel time per step "
                         "(needs libcupti: found in the CUDA toolkit, the nvidia pip packages, or FOXC_CUPTI)")
    return harness.run(ap, argv, _main)


def _main(args, rt) -> int:
    small = rt.backend != "cuda"
    sizes = args.n_backtests or ([16] if small else [256, 1024, 4096])
    steps = args.steps or (4 if small else 200)
    K = args.seq_len or (4 if small else 32)
    capacity = args.per_capacity or (64 if small else 65536)
    # a bad size fails here, naming its flag, before any data is made
    configs = [TrainConfig(n_backtests=B, n_steps=0, seq_len=K, per_capacity=capacity,
                           synthetic_rows=20_000 if small else 1_000_000, precision=args.precision, graph="on",
                           orders=args.orders,
                           log_every=10**9, checkpoint_every=0, eval_rows=1000 if small else 8_192) for B in sizes]
    data = run_data(configs[0])
    with tempfile.TemporaryDirectory() as tmp:  # the checkpoint of the B=1,024 run (or the first) is timed too
        timed_ckpt = 1024 if 1024 in sizes else sizes[0]
        rows = [bench_one(rt, cfg, data, steps, Path(tmp) / str(cfg.n_backtests)
                          if cfg.n_backtests == timed_ckpt else None, args.busy or args.timeline) for cfg in configs]
    print(f"backend {rt.backend}: {rt.device_name}; K={K}, PER {capacity}, {args.precision}, {args.orders} orders, "
          f"{steps} timed steps")
    print(table(rows, ["B", "kernels", "eager_sps", "graph_sps", "speedup", "gpu_ms_per_step", "event_ms",
                       "gpu_busy", "kernel_ms", "host_us_per_step", "host_bound_share_eager", "env_steps_per_s"]))
    for r in rows:
        if "gpu_busy" in r:
            print(f"busy B={r['B']}: gpu_busy {r['gpu_busy']:.1%} (union of CUPTI kernel intervals over the host's "
                  f"span of {steps} replays, {r['kernels_traced']} kernels each), kernel_ms {r['kernel_ms']:.3f} per "
                  f"step, traced_ms {r['traced_ms']:.3f} per step; top: " + ", ".join(f"{k['name']} {k['ms_per_step']:.3f}" for k in r["top_kernels"][:3]))
        else:
            print(f"busy B={r['B']}: not measured ({r['busy_unmeasured']})")
    for r in rows if args.timeline else []:
        if "timeline" in r:
            print(f"timeline B={r['B']} (µs from the replay's first kernel, medians of {steps} replays):")
            print(table(r["timeline"], TIMELINE_COLUMNS))
    for r in rows if rt.backend == "cuda" else []:
        step_ms = 1e3 / r["graph_sps"]
        if "kernel_ms" in r:  # CUPTI's kernel time: the FLOP rate of the kernels themselves too
            overlap = " (the graph's lanes overlap kernels)" if r["kernel_ms"] > step_ms else ""
            kernels = (f"kernels {r['kernel_ms']:.3f} ms by CUPTI = {r['kernel_ms'] / step_ms:.0%} of the step"
                       f"{overlap}, {r['gflop_per_step'] / r['kernel_ms']:.2f} TFLOP/s in kernels")
        else:
            kernels = f"per-kernel events, an upper bound of kernel time: {r['event_ms']:.3f} ms"
        print(f"roofline B={r['B']}: step {step_ms:.3f} ms ({kernels}); {r['gflop_per_step']} GFLOP per step = "
              f"{r['tflops']} TFLOP/s; launch floor {r['kernels']} kernels = {r['launch_floor_ms']:.3f} ms "
              f"({r['launch_floor_ms'] / step_ms:.0%} of the step)")
    ck = next(r for r in rows if "ckpt_mb" in r)
    print(f"checkpoint at B={ck['B']}, PER {capacity}: {ck['ckpt_mb']} MB, save {ck['ckpt_save_ms']} ms "
          f"(device -> mapped-pinned -> file, atomic), load {ck['ckpt_load_ms']} ms (verify, upload)")
    write_json(args.json, "train", rt, rows, {"K": K, "per_capacity": capacity, "precision": args.precision,
                                              "orders": args.orders})
    best = max(rows, key=lambda r: r["graph_sps"])
    at = next((r for r in rows if r["B"] == 1024), rows[0])
    print(f"summary: {at['graph_sps']} steps/s at B={at['B']} as a graph ({at['speedup']}x eager, "
          f"{at['kernels']} kernels/step); best {best['graph_sps']} at B={best['B']} ({rt.backend})")
    return 0
