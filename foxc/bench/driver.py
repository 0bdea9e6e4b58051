"""Driver micro-benchmarks: host cost of one eager launch, and per kernel inside a replayed graph.

Host µs: launches timed in bursts of BURST on a drained stream (far below the driver's queue depth of about
a thousand, so no launch waits for the GPU); wall µs: all of them back to back.
"""
from __future__ import annotations

import time

import numpy as np

from .. import vec
from ..cli import positive_int, text_table as table
from . import harness
from .report import write_json

GRAPH_KERNELS, BURST = 100, 64


def bench_eager(rt, launches: int) -> dict:
    x = rt.device_array(256, np.float32, "x")
    plan = vec.plan_elementwise(rt, vec.FILL_F32, x, 1.0, 256)
    for _ in range(min(1000, launches)):
        plan.launch(rt.stream)
    bursts, host = max(1, launches // BURST), 0.0
    for _ in range(bursts):
        rt.stream.synchronize()
        t0 = time.perf_counter()
        for _ in range(BURST):
            plan.launch(rt.stream)
        host += time.perf_counter() - t0
    wall = harness.time_launches(rt, lambda: plan.launch(rt.stream), launches).wall_s
    return {"what": "eager launch (fill_f32, 256 floats)", "count": launches,
            "host_us_per_kernel": round(host / (bursts * BURST) * 1e6, 3),
            "wall_us_per_kernel": round(wall / launches * 1e6, 3)}


def bench_graph(rt, replays: int) -> dict:
    x = rt.device_array(256 * GRAPH_KERNELS, np.float32, "x")
    plans = [vec.plan_elementwise(rt, vec.FILL_F32, x.at(256 * i), float(i), 256) for i in range(GRAPH_KERNELS)]
    t, _ = harness.time_graph(rt, plans, replays, warmup=10)
    n = replays * GRAPH_KERNELS
    return {"what": f"graph of {GRAPH_KERNELS} kernels (fill_f32)", "count": n,
            "host_us_per_kernel": round(t.host_s / n * 1e6, 3), "wall_us_per_kernel": round(t.wall_s / n * 1e6, 3),
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
