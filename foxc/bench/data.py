"""Market data: Parquet read throughput on the CPU, and the window gather kernel on the device.

    python -m foxc.bench data [--backend auto|cuda|reference] [--rows N] [--backtests B] [--window K]
                              [--launches N] [--prepare] [--workers W] [--json FILE]

--prepare adds `python -m foxc.data prepare` of the rows as W Parquet files (one a day) and the
opening of that cache (every shard verified), in snapshots per second.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from ..data.device import DeviceDataset
from ..data.features import FEATURES, GATHER_MAX_K, HORIZONS, LABEL_PLANES
from ..data.labels import compute_labels
from ..data.parquet import read_parquet, write_parquet
from ..data.record import SNAPSHOT_BYTES
from ..data.synthetic import generate, synthetic_data
from ..cli import int_at_least, positive_int
from . import harness
from .report import table, write_json


def bench_parquet(rows: int) -> dict:
    rec = generate(rows, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.parquet"
        write_parquet(path, rec)
        read_parquet(path)  # warm the page cache
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            got, _, _ = read_parquet(path)
            best = min(best, time.perf_counter() - t0)
        size = path.stat().st_size
    assert len(got) == rows
    return {"what": f"read Databento MBP-10 Parquet ({size / 2**20:.0f} MiB zstd)", "count": rows,
            "ms": round(best * 1e3, 2), "rate": f"{rows / best / 1e6:.2f} M snapshots/s"}


def bench_prepare(rows: int, workers: int) -> list[dict]:
    """Prepare a cache of `rows` snapshots in `workers` files side by side, then open it."""
    from ..data.cache import open_cache, prepare
    from ..data.labels import LabelConfig
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "days"
        folder.mkdir()
        for day in range(workers):
            rec = generate(rows // workers, seed=10 + day)
            rec["ts_ns"] += day * 86_400 * 10**9
            write_parquet(folder / f"day{day}.parquet", rec)
        t0 = time.perf_counter()
        prepare(folder, Path(tmp) / "cache", workers=workers)
        made = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = len(open_cache(Path(tmp) / "cache", LabelConfig()).market.records)
        opened = time.perf_counter() - t0
    return [{"what": f"prepare a cache from {workers} Parquet file(s), {workers} worker(s)", "count": n,
             "ms": round(made * 1e3, 1), "rate": f"{n / made / 1e6:.2f} M snapshots/s"},
            {"what": "open the cache (every shard hashed)", "count": n, "ms": round(opened * 1e3, 1),
             "rate": f"{n / opened / 1e6:.2f} M snapshots/s"}]


def bench_synthetic(rows: int) -> dict:
    generate(1000, seed=0)
    t0 = time.perf_counter()
    generate(rows, seed=1)
    dt = time.perf_counter() - t0
    return {"what": "synthetic generator (one core)", "count": rows, "ms": round(dt * 1e3, 2),
            "rate": f"{rows / dt / 1e6:.2f} M snapshots/s"}


def hbm_bytes_per_s(rt) -> float | None:
    """Peak memory bandwidth from the device's clock and bus width (None on the reference backend)."""
    if rt.backend != "cuda":
        return None
    from cuda.bindings import driver as drv
    from ..driver import check
    attr = drv.CUdevice_attribute
    khz = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, rt.ctx.device),
                "cuDeviceGetAttribute", "reading the memory clock")
    bits = check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, rt.ctx.device),
                 "cuDeviceGetAttribute", "reading the memory bus width")
    return 2.0 * khz * 1e3 * bits / 8 if khz and bits else None


def bench_gather(rt, B: int, K: int, launches: int) -> dict:
    data = synthetic_data(max(200_000, 4 * B * K), seed=2, n_segments=4)
    labels = compute_labels(data.records, data.tick)
    with DeviceDataset(rt, data, labels, B, K, seed=3) as ds:
        for _ in range(3):
            ds.gather()
            ds.advance()
        us = harness.time_launches(rt, ds.gather, launches).gpu_ms * 1e3 / launches
    moved = B * K * SNAPSHOT_BYTES + B * K * FEATURES * 4 + 2 * LABEL_PLANES * B * HORIZONS * 4
    row = {"what": f"gather_windows B={B} K={K}", "count": launches, "us": round(us, 2),
           "rate": f"{moved / (us * 1e-6) / 1e9:.1f} GB/s"}
    peak = hbm_bytes_per_s(rt)
    if peak:
        row["hbm"] = f"{moved / (us * 1e-6) / peak:.1%} of {peak / 1e12:.2f} TB/s"
    return row


def main(argv=None) -> int:
    ap = harness.parser("data", __doc__)
    ap.add_argument("--rows", type=positive_int, default=2_000_000, help="snapshots in the Parquet file (default 2M)")
    ap.add_argument("--backtests", type=positive_int, default=1024, help="B (default 1024)")
    ap.add_argument("--window", type=int_at_least(1, GATHER_MAX_K), default=32, help="K (default 32)")
    ap.add_argument("--launches", type=positive_int, default=1000, help="timed gather launches (default 1000)")
    ap.add_argument("--prepare", action="store_true", help="also time preparing a cache of the rows and opening it")
    ap.add_argument("--workers", type=positive_int, default=2, help="files and workers of --prepare (default 2)")
    return harness.run(ap, argv, _main)


def _main(args, rt) -> int:
    small = rt.backend != "cuda"
    rows = min(args.rows, 200_000) if small else args.rows
    B = min(args.backtests, 64) if small else args.backtests
    launches = min(args.launches, 5) if small else args.launches
    results = [bench_parquet(rows), bench_synthetic(rows), bench_gather(rt, B, args.window, launches)]
    if args.prepare:
        results += bench_prepare(args.rows, args.workers)  # host work only: the full --rows on any backend
    print(f"backend {rt.backend}: {rt.device_name}")
    print(table(results, ["what", "count", "ms", "us", "rate", "hbm"]))
    write_json(args.json, "data", rt, results)
    print(f"summary: parquet {results[0]['rate']}, gather {results[2]['us']} us "
          f"({results[2].get('hbm', results[2]['rate'])}) on {rt.backend}"
          + (f"; prepare {results[3]['rate']}, open {results[4]['rate']}" if args.prepare else ""))
    return 0
