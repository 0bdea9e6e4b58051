"""The whole training step: steps/s eager and as one CUDA graph, GPU busy fraction, host cost per step.

    python -m foxc.bench train [--backend auto|cuda|reference] [--n-backtests 256,1024,4096] [--steps N]
                               [--seq-len K] [--per-capacity C] [--precision f32|tf32] [--json FILE]

Per batch size B: a trainer on synthetic data runs its eager warm-up until the replay buffer is
full (ceil(per_capacity / B) + n_step steps), timing the last `steps` eager steps; then the step is
captured once and `steps` graph replays are timed with events. GPU busy = event time over wall
time of the replays; host-bound share (eager) = 1 - graph GPU time per step / eager wall per step,
the part of an eager step the GPU spends waiting for Python and the driver. The checkpoint of
the B=1,024 trainer is saved and loaded once and timed.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ..data.labels import LabelConfig, compute_labels
from ..data.synthetic import synthetic_data
from ..cli import ArgumentParser, open_runtime, output_file, positive_int, positive_ints, run as run_cli
from ..driver import BACKENDS
from ..trainer.config import TrainConfig
from ..trainer.run import Trainer
from .report import table, write_json


def bench_one(rt, market, labels, B: int, steps: int, K: int, capacity: int, precision: str,
              checkpoint_dir=None) -> dict:
    cfg = TrainConfig(n_backtests=B, n_steps=0, seq_len=K, per_capacity=capacity, synthetic_rows=len(market.records),
                      precision=precision, graph="on", log_every=10**9, checkpoint_every=0)
    t = Trainer(rt, cfg, market, labels, checkpoint_dir)
    stream = rt.stream
    warm = t.capture_after
    timed = min(steps, max(warm - 1, 1))
    while t.steps_done < warm - timed:  # untimed warm-up
        t.step()
    stream.synchronize()
    t0 = time.perf_counter()
    while t.steps_done < warm:
        t.step()
    stream.synchronize()
    eager_wall = (time.perf_counter() - t0) / timed

    t.capture()
    t.graph.launch(stream)  # the captured step runs once before timing
    t.steps_done += 1
    stream.synchronize()
    start, end = rt.event("start"), rt.event("end")
    host = 0.0
    start.record(stream)
    t0 = time.perf_counter()
    for _ in range(steps):
        h0 = time.perf_counter()
        t.graph.launch(stream)
        host += time.perf_counter() - h0
    end.record(stream)
    stream.synchronize()
    graph_wall = (time.perf_counter() - t0) / steps
    gpu = start.elapsed_ms(end) * 1e-3 / steps
    t.steps_done += steps
    p0 = time.perf_counter()
    frames = t.ts.diagnostics.poll()
    poll = (time.perf_counter() - p0) / max(len(frames), 1)
    row = {
        "B": B, "kernels": t.ts.kernel_count(), "eager_sps": round(1 / eager_wall, 1),
        "graph_sps": round(1 / graph_wall, 1), "speedup": round(eager_wall / graph_wall, 2),
        "gpu_ms_per_step": round(gpu * 1e3, 4), "gpu_busy": round(gpu / graph_wall, 3),
        "host_us_per_step": round((host / steps + poll) * 1e6, 2),
        "host_bound_share_eager": round(max(0.0, 1 - gpu / eager_wall), 3),
        "env_steps_per_s": round(B / graph_wall),
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
    ap = ArgumentParser(prog="python -m foxc.bench train", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=BACKENDS, default=None)
    ap.add_argument("--n-backtests", type=positive_ints, default=None,
                    help="comma-separated batch sizes (default 256,1024,4096)")
    ap.add_argument("--steps", type=positive_int, default=None, help="timed steps per mode (default 200)")
    ap.add_argument("--seq-len", type=positive_int, default=None, help="window K (default 32)")
    ap.add_argument("--per-capacity", type=positive_int, default=None, help="replay capacity (default 65536)")
    ap.add_argument("--precision", choices=("f32", "tf32"), default="f32")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    return run_cli(ap.prog, lambda: _main(args))


def _main(args) -> int:
    if args.json:
        output_file("--json", args.json)
    rt = open_runtime(args.backend)
    small = rt.backend != "cuda"
    sizes = args.n_backtests or ([16] if small else [256, 1024, 4096])
    steps = args.steps or (4 if small else 200)
    K = args.seq_len or (4 if small else 32)
    capacity = args.per_capacity or (64 if small else 65536)
    for B in sizes:  # a bad size fails here, naming its flag, before any data is made
        TrainConfig(n_backtests=B, n_steps=0, seq_len=K, per_capacity=capacity, synthetic_rows=20_000,
                    precision=args.precision, graph="on")
    market = synthetic_data(20_000 if small else 1_000_000, seed=0)
    labels = compute_labels(market.records, market.tick, LabelConfig())
    with tempfile.TemporaryDirectory() as tmp:  # the checkpoint of the B=1,024 run (or the first) is timed too
        timed_ckpt = 1024 if 1024 in sizes else sizes[0]
        rows = [bench_one(rt, market, labels, B, steps, K, capacity, args.precision,
                          Path(tmp) / str(B) if B == timed_ckpt else None) for B in sizes]
    print(f"backend {rt.backend}: {rt.device_name}; K={K}, PER {capacity}, {args.precision}, {steps} timed steps")
    print(table(rows, ["B", "kernels", "eager_sps", "graph_sps", "speedup", "gpu_ms_per_step", "gpu_busy",
                       "host_us_per_step", "host_bound_share_eager", "env_steps_per_s"]))
    ck = next(r for r in rows if "ckpt_mb" in r)
    print(f"checkpoint at B={ck['B']}, PER {capacity}: {ck['ckpt_mb']} MB, save {ck['ckpt_save_ms']} ms "
          f"(device -> mapped-pinned -> file, atomic), load {ck['ckpt_load_ms']} ms (verify, upload)")
    write_json(args.json, "train", rt, rows, {"K": K, "per_capacity": capacity, "precision": args.precision})
    best = max(rows, key=lambda r: r["graph_sps"])
    at = next((r for r in rows if r["B"] == 1024), rows[0])
    print(f"summary: {at['graph_sps']} steps/s at B={at['B']} as a graph ({at['speedup']}x eager, GPU busy "
          f"{at['gpu_busy']:.0%}, {at['kernels']} kernels/step); best {best['graph_sps']} at B={best['B']} ({rt.backend})")
    return 0
