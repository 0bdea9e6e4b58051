"""Driver micro-benchmarks: host cost of one eager launch, and per kernel inside a replayed graph.

Host µs: the time the launch call takes, measured in short bursts on a drained stream (a long run
of launches fills the driver's queue and then times the GPU, not the host); wall µs: back to back.

    python -m foxc.bench driver [--backend auto|cuda|reference] [--launches N] [--json FILE]
"""
from __future__ import annotations

import time

import numpy as np

from .. import vec
from ..cli import positive_int
from . import harness
from ..cli import text_table as table
from .report import write_json

GRAPH_KERNELS = 100
# Launches per burst when timing the host's cost: far below the driver's queue depth (about a
# thousand pending launches), so no launch waits for the GPU and the host time is the host's.
BURST = 64


def bench_eager(rt, launches: int) -> dict:
    """Host cost of one launch, timed in bursts of BURST launches on a drained stream, and the wall
    time per launch of all of them back to back (where the queue fills and the GPU sets the pace)."""
    x = rt.device_array(256, np.float32, "x")
    plan = vec.plan_elementwise(rt, vec.FILL_F32, x, 1.0, 256)
    for _ in range(min(1000, launches)):
        plan.launch(rt.stream)
    bursts = max(1, launches // BURST)
    host = 0.0
    for _ in range(bursts):
        rt.stream.synchronize()
        t0 = time.perf_counter()
        for _ in range(BURST):
            plan.launch(rt.stream)
        host += time.perf_counter() - t0
    rt.stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(launches):
        plan.launch(rt.stream)
    rt.stream.synchronize()
    wall = time.perf_counter() - t0
    return {"what": "eager launch (fill_f32, 256 floats)", "count": launches,
            "host_us_per_kernel": round(host / (bursts * BURST) * 1e6, 3),
            "wall_us_per_kernel": round(wall / launches * 1e6, 3)}


def bench_graph(rt, replays: int) -> dict:
    x = rt.device_array(256 * GRAPH_KERNELS, np.float32, "x")
    plans = [vec.plan_elementwise(rt, vec.FILL_F32, x.at(256 * i), float(i), 256) for i in range(GRAPH_KERNELS)]
    t, _ = harness.time_graph(rt, plans, replays, warmup=10)
    n = replays * GRAPH_KERNELS
    return {"what": f"graph of {GRAPH_KERNELS} kernels (fill_f32)", "count": n,
            "host_us_per_kernel": round(t.host_s / n * 1e6, 3),
            "wall_us_per_kernel": round(t.wall_s / n * 1e6, 3),
            "gpu_us_per_kernel": round(t.gpu_ms * 1e3 / n, 3)}


def main(argv=None) -> int:
    ap = harness.parser("driver", __doc__)
    ap.add_argument("--launches", type=positive_int, default=20000, help="eager launches timed (default 20000)")
    return harness.run(ap, argv, _main)


def _main(args, rt) -> int:
    launches = args.launches if rt.backend == "cuda" else min(args.launches, 2000)
    rows = [bench_eager(rt, launches), bench_graph(rt, max(1, launches // GRAPH_KERNELS))]
    print(f"backend {rt.backend}: {rt.device_name}")
    print(table(rows, ["what", "count", "host_us_per_kernel", "wall_us_per_kernel", "gpu_us_per_kernel"]))
    write_json(args.json, "driver", rt, rows)
    print(f"summary: eager launch {rows[0]['host_us_per_kernel']} us host, "
          f"graph {rows[1]['wall_us_per_kernel']} us per kernel ({rt.backend})")
    return 0
