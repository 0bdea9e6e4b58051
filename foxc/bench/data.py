"""Market data: Parquet read throughput on the CPU, and the window gather kernel on the device.

--prepare adds `python -m foxc.data prepare` of the rows as W Parquet files (one a day) by W workers, and the
reading and hashing of every shard of that cache. --scale (alone) builds a cache of N synthetic snapshots
(default 500 M), R a shard, in W processes, each shard written, labelled and hashed by prepare's own shard
writer, then freed (no process holds more than one shard and its worker's base day); it reports the build's
rate and peak RSS, the opening of the cache for training, on CUDA training steps/s with shards rotating through
ROTATION_SLOTS device slots against all of them resident, and the verification of every shard. A --dir whose
filesystem lacks SCALE_BYTES a snapshot is refused before anything is written.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ..cli import PathArg, UserError, int_at_least, positive_int, text_table as table
from ..data.cache import MANIFEST, RECORDS, CacheRows, shard_dir
from ..data.chunks import CHUNK_ROWS
from ..data.device import DeviceDataset
from ..data.features import FEATURES, GATHER_MAX_K, HORIZONS, LABEL_PLANES
from ..data.labels import LabelConfig, compute_labels
from ..data.parquet import read_parquet, write_parquet
from ..data.prepare import build_manifest, prepare, process_pool, records_header, run_jobs, write_shard
from ..data.record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE
from ..data.resident import ROW_BYTES
from ..data.stream import FileSummary
from ..data.synthetic import SynthParams, generate, synthetic_data
from ..data.validate import ValidationConfig
from ..driver.device import device_attribute
from ..trainer.config import DEFAULTS, TrainConfig
from ..trainer.run import Trainer
from ..trainer.session import run_data
from . import harness
from .report import write_json


def timed_row(what: str, count: int, seconds: float, unit: str = "s", digits: int = 2) -> dict:
    """A row of `count` snapshots handled in `seconds` (shown in "s" or "ms"), and their rate."""
    return {"what": what, "count": count, unit: round(seconds * (1e3 if unit == "ms" else 1), digits),
            "rate": f"{count / seconds / 1e6:.2f} M snapshots/s"}


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
    return timed_row(f"read Databento MBP-10 Parquet ({size / 2**20:.0f} MiB zstd)", rows, best, "ms")


def _write_day(args):
    folder, day, rows = args
    rec = generate(rows, seed=10 + day)
    rec["ts_ns"] += day * DAY_NS
    write_parquet(folder / f"day{day:03d}.parquet", rec)


def bench_prepare(rows: int, workers: int) -> list[dict]:
    """Prepare a cache from `workers` daily Parquet files of `rows` in all (written first) in `workers`
    processes; then open it for training and verify every shard."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "days"
        folder.mkdir()
        with process_pool(workers, workers) as pool:
            run_jobs(pool, _write_day, [(folder, day, rows // workers) for day in range(workers)])
        t0 = time.perf_counter()
        prepare(folder, Path(tmp) / "cache", workers=workers)
        made = time.perf_counter() - t0
        cache = CacheRows(Path(tmp) / "cache", LabelConfig())
        verified = bench_verify(cache)
    return [timed_row(f"prepare a cache from {workers} Parquet file(s) of {rows // workers:,}, {workers} worker(s)",
                      cache.n_rows, made, "ms", 1), verified]


SCALE_BYTES = SNAPSHOT_BYTES + 4 * LABEL_PLANES * HORIZONS  # records.npy and labels.npy, per snapshot
SHARD_BYTES = 4096  # per shard besides its rows: two .npy headers and its manifest entry, rounded up
SCALE_SEED, DAY_NS = 7, 86_400 * 10**9


def scale_plan(rows: int, shard_rows: int) -> list[int]:
    """The rows of each shard: `shard_rows` each, the last one the rest."""
    return [min(shard_rows, rows - start) for start in range(0, rows, shard_rows)]


def scale_bytes(rows: int, shard_rows: int) -> int:
    return rows * SCALE_BYTES + len(scale_plan(rows, shard_rows)) * SHARD_BYTES


def check_scale_room(rows: int, shard_rows: int, where: str, free: int):
    """Refuse --rows when the cache does not fit in `free` bytes, naming the largest --rows (whole millions,
    or shards when smaller) that does."""
    need = scale_bytes(rows, shard_rows)
    if need <= free:
        return
    unit = min(1_000_000, shard_rows)
    fit = (max(0, free - SHARD_BYTES) // (SCALE_BYTES + SHARD_BYTES / shard_rows)) // unit * unit
    hint = f"give --rows {int(fit):,} or fewer, or" if fit else "give"
    raise UserError(f"--rows {rows:,}: the cache needs {need / 1e9:.1f} GB ({SCALE_BYTES} bytes a snapshot: "
                     f"{SNAPSHOT_BYTES} of records, {SCALE_BYTES - SNAPSHOT_BYTES} of labels), and the filesystem "
                     f"of {where} has {free / 1e9:.1f} GB free: {hint} a --dir with more room")


def existing_parent(path: Path) -> Path:
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return path


@functools.lru_cache(maxsize=1)
def _base_day(rows: int) -> np.ndarray:
    """The synthetic day every shard of a worker is made from (generated once per process)."""
    return generate(rows, seed=SCALE_SEED)


def _scale_shard(args) -> tuple[int, int, float, dict]:
    """(first_ts, last_ts, seconds, its files) of shard k, written in a worker: the base day moved k days and
    k % 64 ticks, a chunk at a time, then labelled and hashed by prepare's shard writer."""
    folder, k, rows, shard_rows, labels = args
    t0 = time.perf_counter()
    base = _base_day(shard_rows)[:rows]  # the last shard, shorter, is a head of the same day
    folder.mkdir(parents=True)
    tick = SynthParams().tick_units
    buffer = np.empty(min(rows, CHUNK_ROWS), SNAPSHOT_DTYPE)  # one buffer for every chunk: no fresh pages
    with open(folder / RECORDS, "wb") as fh:
        fh.write(records_header(rows))
        for start in range(0, rows, CHUNK_ROWS):
            chunk = buffer[:min(CHUNK_ROWS, rows - start)]
            np.copyto(chunk, base[start:start + len(chunk)])
            for name in ("ts_ns", "prev_ts_ns"):
                chunk[name] += k * DAY_NS
            for name in ("bid_px", "ask_px"):
                chunk[name] += (k % 64) * tick
            chunk["segment"] = k
            fh.write(chunk.data)
    files = write_shard((folder, k, k, tick, labels, CHUNK_ROWS))
    first, last = (int(base["ts_ns"][i]) + k * DAY_NS for i in (0, -1))
    return first, last, time.perf_counter() - t0, files


def build_scale_cache(folder: Path, rows: int, shard_rows: int, workers: int) -> dict:
    """The manifest (written last, as prepare writes it) of a synthetic cache of `rows` snapshots in shards of
    `shard_rows`, built in `workers` processes."""
    plan, labels = scale_plan(rows, shard_rows), LabelConfig()
    jobs = [(shard_dir(folder, k), k, n, shard_rows, labels) for k, n in enumerate(plan)]
    with process_pool(workers, len(jobs)) as pool:
        made = run_jobs(pool, _scale_shard, jobs)
    shards = []
    for k, (n, (first, last, _, _)) in enumerate(zip(plan, made)):
        name = f"synthetic:seed={SCALE_SEED}:day={k}"
        summary = FileSummary(name, "synthetic", n, n, {}, [], "SYNTH", SynthParams().instrument_id, first, last)
        shards.append((k, summary, [{"path": name, "bytes": 0, "sha256": ""}]))
    manifest = build_manifest(f"synthetic {rows} rows", shards, [m[3] for m in made], SynthParams().tick_units,
                              labels, ValidationConfig())
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def peak_rss_gb() -> tuple[float, float]:
    """(this process, its largest finished child): peak resident memory in GB (ru_maxrss is in KiB on Linux)."""
    return tuple(resource.getrusage(who).ru_maxrss * 1024 / 1e9
                 for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


ROTATION_STEPS, ROTATION_SLOTS = 5000, 3
RESIDENT_FRACTION = 0.5  # of free device memory, for the all-resident run's data


def bench_rotation(rt, folder: Path, shard_rows: int, n_backtests: int = 1024, steps: int = ROTATION_STEPS,
                   rotate_every: int = 1000) -> dict:
    """Training steps/s from the cache left on disk (as `foxc.train --data CACHE`): every shard on the device
    (the head that fits in RESIDENT_FRACTION of free memory when all does not), then ROTATION_SLOTS slots over
    the whole cache, a shard refilled every `rotate_every` steps; `steps` steps each, timed after the capture
    and a first rotation, the host's rotation work included."""
    shape = {k: DEFAULTS[rt.backend][k] for k in ("seq_len", "per_capacity", "synthetic_rows")}
    base = TrainConfig(data=str(folder), n_backtests=n_backtests, n_steps=0, graph="on", log_every=10**9,
                       checkpoint_every=0, eval_every=0, rotate_every=rotate_every, **shape)
    data = run_data(base)
    fits = int(RESIDENT_FRACTION * rt.free_bytes() // ROW_BYTES) // shard_rows * shard_rows
    resident = data.market if data.market.n_rows <= fits else data.market.head(max(fits, 2 * shard_rows))
    budget_gb = (ROTATION_SLOTS + 0.5) * shard_rows * ROW_BYTES / 1e9
    what = f"training steps/s at B = {n_backtests:,}: shards rotating vs all resident"
    rates, rotations = {}, 0
    for name, market, gb in (("resident", resident, None), ("rotating", data.market, budget_gb)):
        t = Trainer(rt, dataclasses.replace(base, device_data_gb=gb), market, data.labels, None, data.source)
        try:
            if (t.ts.rotation is not None) != (name == "rotating"):
                return {"what": what, "rate": f"not measured (the {name} run's data did not come out {name})"}
            while t.steps_done < t.capture_after + rotate_every:  # warm-up, the capture, a first rotation
                t.step()
            rates[name] = steps / harness.time_launches(rt, t.step, steps).wall_s
            if t.ts.rotation is not None:
                rotations = t.ts.rotation.rotations_by(t.steps_done)
        finally:
            t.close()
    head = "" if resident is data.market else f"; resident: the first {resident.n_rows:,} snapshots"
    return {"what": what, "count": steps, "ratio": round(rates["rotating"] / rates["resident"], 3),
            "rate": f"{rates['rotating']:,.0f} rotating ({ROTATION_SLOTS} slots, refilled every {rotate_every} "
                    f"steps, {rotations} rotations by then) vs {rates['resident']:,.0f} resident "
                    f"= {rates['rotating'] / rates['resident']:.1%}{head}"}


def bench_scale(rt, rows: int, shard_rows: int, workers: int, folder: Path) -> list[dict]:
    plan = scale_plan(rows, shard_rows)
    t0 = time.perf_counter()
    manifest = build_scale_cache(folder, rows, shard_rows, workers)
    built = time.perf_counter() - t0
    own, worker = peak_rss_gb()
    size = scale_bytes(rows, shard_rows)
    results = [{**timed_row(f"build the cache: {len(plan)} shard(s) of {shard_rows:,}, {min(workers, len(plan))} "
                            f"worker(s) (write, label, hash)", manifest["rows"], built), "GB": f"{size / 1e9:.2f} on disk"},
               {"what": "peak RSS while building: this process, largest worker", "GB": f"{own:.2f}, {worker:.2f}"}]
    t0 = time.perf_counter()
    cache = CacheRows(folder, LabelConfig())
    results.append(timed_row("open the cache for training (manifest, every shard file's size; shards are hashed "
                             "as they are read)", cache.n_rows, time.perf_counter() - t0, digits=3))
    if rt.backend == "cuda":
        results.append(bench_rotation(rt, folder, shard_rows))
        results.append({"what": "peak RSS of this process, training included (rows on disk)",
                        "GB": f"{peak_rss_gb()[0]:.2f}"})
    else:
        results.append({"what": "training steps/s: shards rotating vs all resident",
                        "rate": "not measured (reference backend)"})
    results.append(bench_verify(cache))
    return results


def bench_verify(cache) -> dict:
    """Every shard read and hashed, one shard's buffers per thread (as a training run reads them)."""
    threads = min(8, os.cpu_count() or 1, cache.n_segments)
    t0 = time.perf_counter()
    cache.verify(threads)
    return timed_row(f"verify every shard (read and hash, {threads} threads)", cache.n_rows, time.perf_counter() - t0)


def bench_synthetic(rows: int) -> dict:
    generate(1000, seed=0)
    t0 = time.perf_counter()
    generate(rows, seed=1)
    return timed_row("synthetic generator (one core)", rows, time.perf_counter() - t0, "ms")


def hbm_bytes_per_s(rt) -> float | None:
    """Peak memory bandwidth from the device's clock and bus width (None on the reference backend)."""
    if rt.backend != "cuda":
        return None
    khz = device_attribute(rt.ctx.device, "MEMORY_CLOCK_RATE")
    bits = device_attribute(rt.ctx.device, "GLOBAL_MEMORY_BUS_WIDTH")
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
    ap.add_argument("--rows", type=positive_int, default=None,
                    help="snapshots (default 2M; with --scale 500M)")
    ap.add_argument("--n-backtests", type=positive_int, default=1024, help="B (default 1024)")
    ap.add_argument("--seq-len", type=int_at_least(1, GATHER_MAX_K), default=32, help="window K (default 32)")
    ap.add_argument("--launches", type=positive_int, default=1000, help="timed gather launches (default 1000)")
    ap.add_argument("--prepare", action="store_true", help="also time preparing a cache of the rows and opening it")
    ap.add_argument("--workers", type=positive_int, default=None,
                    help="files and workers of --prepare, processes of --scale (default 2)")
    ap.add_argument("--scale", action="store_true",
                    help="only build a synthetic cache of --rows in shards and open it (see the module's help)")
    ap.add_argument("--shard-rows", type=positive_int, default=None,
                    help="snapshots a shard of --scale (default 1,000,000)")
    ap.add_argument("--dir", type=PathArg("a directory"),
                    help="where --scale writes its cache: a new or empty directory, kept (default: a temporary "
                         "directory, removed afterwards)")
    return harness.run(ap, argv, _main, check=_check)


def _check(args):
    """Flags of --scale only with it; its --dir new or empty and large enough, before anything is made."""
    if not args.scale:
        for flag, value, needs in (("--shard-rows", args.shard_rows, "--scale"), ("--dir", args.dir, "--scale"),
                                   ("--workers", None if args.prepare else args.workers, "--prepare or --scale")):
            if value is not None:
                raise UserError(f"{flag} {value}: only with {needs}")
    args.workers = args.workers or 2
    if not args.scale:
        args.rows = args.rows or 2_000_000
        if args.prepare and args.rows < args.workers:
            raise UserError(f"--rows {args.rows} --workers {args.workers}: --prepare writes --workers files of "
                            "--rows / --workers snapshots each (give --rows of at least --workers)")
        return
    if args.prepare:
        raise UserError("--prepare and --scale: --scale runs alone (give one of them)")
    args.rows = args.rows or 500_000_000
    args.shard_rows = min(args.shard_rows or 1_000_000, args.rows)
    folder = Path(args.dir or tempfile.gettempdir())
    if args.dir is not None:
        harness.empty_dir("--dir", folder)
    where = f"--dir {folder}" if args.dir else f"{folder} (no --dir given)"
    check_scale_room(args.rows, args.shard_rows, where, shutil.disk_usage(existing_parent(folder)).free)


def _main(args, rt) -> int:
    if args.scale:
        return _main_scale(args, rt)
    small = rt.backend != "cuda"
    rows = min(args.rows, 200_000) if small else args.rows
    B = min(args.n_backtests, 64) if small else args.n_backtests
    launches = min(args.launches, 5) if small else args.launches
    results = [bench_parquet(rows), bench_synthetic(rows), bench_gather(rt, B, args.seq_len, launches)]
    if args.prepare:
        results += bench_prepare(args.rows, args.workers)  # host work only: the full --rows on any backend
    print(f"backend {rt.backend}: {rt.device_name}")
    print(table(results, ["what", "count", "ms", "s", "us", "rate", "hbm"]))
    write_json(args.json, "data", rt, results)
    print(f"summary: parquet {results[0]['rate']}, gather {results[2]['us']} us "
          f"({results[2].get('hbm', results[2]['rate'])}) on {rt.backend}"
          + (f"; prepare {results[3]['rate']}, verify {results[4]['rate']}" if args.prepare else ""))
    return 0


def _main_scale(args, rt) -> int:
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="foxc-bench-scale-"))
    kept = False
    try:
        results = bench_scale(rt, args.rows, args.shard_rows, args.workers, folder)
        kept = bool(args.dir)
    finally:
        if not kept:  # a failed or interrupted build leaves nothing behind, nor does a temporary one
            shutil.rmtree(folder, ignore_errors=True)
    print(f"backend {rt.backend}: {rt.device_name}; {os.cpu_count()} CPUs")
    print(table(results, ["what", "count", "s", "rate", "GB"]))
    write_json(args.json, "data", rt, results, {"scale": {"rows": args.rows, "shard_rows": args.shard_rows,
                                                         "workers": args.workers}})
    build, rss, opened, rotation = results[:4]
    trained = f", peak RSS training {results[4]['GB']} GB" if len(results) == 6 else ""
    print(f"summary: scale {args.rows:,} snapshots: build {build['rate']}, peak RSS {rss['GB']} GB "
          f"(this process, largest worker), open {opened['s']} s, rotation {rotation['rate']}{trained}, "
          f"verify {results[-1]['rate']}" + (f"; cache kept in {folder}" if kept else ""))
    return 0
