"""Preparing a cache (foxc.data.cache): the files DATA names, validated and labelled once, a shard per segment.

    python -m foxc.data prepare DATA --out CACHE [--horizons 10,50,100] [--instrument ID] [--tick T] [--workers N]

Each file goes through the reading pipeline (foxc.data.stream) in a process pool, in two passes: (1) its kept
rows straight into a records.npy per segment; (2) once every file's first time is known and the tick inferred
from sampled rows of all (market.infer_tick, as load() does), each shard's records read once: hashed, checked
against the tick, renumbered where pass 1 guessed its segment wrong, and labelled a block at a time. A worker
holds a chunk and a label block, never a file. It is all written beside CACHE and renamed into place at the
end: a refused input leaves no cache."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import asdict
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import numpy.lib.format as npy

from .cache import (FORMAT, LABELS, MANIFEST, OPTIONAL_READ, READ, RECORDS, SELECTION, VERSION, content_sha256,
                    file_sha256, is_cache, label_dict, shard_dir)
from .chunks import CHUNK_ROWS
from .labels import N_PLANES, LabelConfig, compute_labels
from .lobster import message_path
from .market import check_tick, infer_tick, tick_samples
from .record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE
from .select import selection_id
from .source import expand, in_time_order
from .stream import FileStream, FileSummary
from .validate import DataError, ValidationConfig


def prepare(spec, out, labels: LabelConfig = LabelConfig(), *, workers: int = 1,
            config: ValidationConfig = ValidationConfig(), overwrite: bool = False, rows: int = CHUNK_ROWS,
            instrument: str | None = None, tick: int | None = None, log=lambda msg: None) -> dict:
    """Write the cache of the files `spec` names into `out` (new, empty, or a cache when `overwrite`); its manifest."""
    out = Path(out)
    paths = expand(spec)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    made = _first_missing(tmp)  # removed whole on failure: a refused input leaves nothing behind
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "shards").mkdir(parents=True)
    installed = False
    try:
        with process_pool(workers, len(paths)) as pool:
            read = run_jobs(pool, _read_file, [(i, p, tmp, config, rows, instrument) for i, p in enumerate(paths)],
                            lambda count, r: log(f"  read {count}/{len(paths)}: {r[1].path}: {r[1].rows:,} of "
                                                 f"{r[1].rows_read:,} rows kept"))
            shards = []  # (input, FileSummary of the segment, sources) of each, in segment order
            for i, summary, sources in in_time_order(read):
                for j, part in enumerate(summary.parts()):
                    os.rename(part_dir(tmp, i, j), shard_dir(tmp, len(shards)))
                    shards.append((i, part, sources))
            summaries = [part for _, part, _ in shards]
            plan = zip(summaries, tick_samples(summaries))
            picked = run_jobs(pool, _sample, [(shard_dir(tmp, k) / RECORDS, s.rows, first, step)
                                              for k, (s, (first, step)) in enumerate(plan)])
            tick, origins = infer_tick(spec, summaries, picked, tick)
            files = run_jobs(pool, write_shard, [(shard_dir(tmp, k), k, i, tick, labels, rows, part.path, origin)
                                                 for k, ((i, part, _), origin) in enumerate(zip(shards, origins))])
        manifest = build_manifest(spec, shards, files, tick, labels, config,
                                  selection_id(instrument, [s.instrument_id for s in summaries]))
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        _install(tmp, out, overwrite)
        installed = True
    finally:
        shutil.rmtree(tmp if installed else made, ignore_errors=True)
    return manifest


def _first_missing(path: Path) -> Path:
    """The outermost folder of `path` that does not exist yet (`path` itself when its parent does)."""
    path = path.absolute()
    while not path.parent.exists():
        path = path.parent
    return path


def process_pool(workers: int, jobs: int):
    """A process pool of `workers` (spawned: no inherited threads), or none (None) for one worker."""
    if min(workers, jobs) <= 1:
        return nullcontext()
    return ProcessPoolExecutor(min(workers, jobs), mp_context=get_context("spawn"), initializer=_worker_start,
                               initargs=(max(1, (os.cpu_count() or 1) // workers),))


def _worker_start(threads: int):
    import pyarrow
    pyarrow.set_cpu_count(threads)  # the pool is the parallelism: files side by side


def run_jobs(pool, job, args: list, progress=lambda done, result: None) -> list:
    """job(a) for each a, in the pool's processes (or here); the first error stops the rest and is raised."""
    if pool is None:
        results = []
        for a in args:
            results.append(job(a))
            progress(len(results), results[-1])
        return results
    futures = [pool.submit(job, a) for a in args]
    pending, done = set(futures), 0
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in finished:
            if f.exception() is not None:
                for other in pending:
                    other.cancel()
                wait(pending)  # the running ones end before their folder is removed
                raise f.exception()
            done += 1
            progress(done, f.result())
    return [f.result() for f in futures]


def _read_file(args) -> tuple[int, FileSummary, list[dict]]:
    """Pass 1, one file: each segment's kept rows into a records.npy of its own; its summary and source files."""
    index, path, tmp, config, rows, instrument = args
    stream, fh, n, made = FileStream(path, config, rows, instrument), None, 0, 0  # segment made - 1's records.npy
    try:
        for chunk in stream:
            for part in np.split(chunk, np.flatnonzero(np.diff(chunk["segment"])) + 1):  # cut at a roll
                if part["segment"][0] == made:  # the next segment begins
                    if fh is not None:
                        _finish_records(fh, n)
                    folder = part_dir(tmp, index, made)
                    folder.mkdir()
                    fh, n, made = open(folder / RECORDS, "wb"), 0, made + 1
                    fh.write(bytes(RECORDS_AT))  # the header, once the rows are counted
                part["segment"] = index
                fh.write(part.data)
                n += len(part)
        _finish_records(fh, n)
    finally:
        if fh is not None:
            fh.close()
    book = stream.path  # and a LOBSTER book's message file: the files its rows come from
    messages = [message_path(book)] if stream.kind == "lobster" and message_path(book).is_file() else []
    return index, stream.summary(), [{"path": str(p), "bytes": p.stat().st_size, "sha256": file_sha256(p)}
                                     for p in [book, *messages]]


def part_dir(tmp: Path, index: int, segment: int) -> Path:
    """Where pass 1 writes segment `segment` of input `index` (renamed to its shard once the order is known)."""
    return tmp / f"part-{index:05d}-{segment:05d}"


def _finish_records(fh, n: int):
    """Its header, for its n rows, and closed."""
    fh.flush()  # the buffered rows first: flushed after the header, they would write the zeros over it
    os.pwrite(fh.fileno(), records_header(n), 0)
    fh.close()


def _sample(args) -> np.ndarray:
    """Rows first, first + step, ... of a records.npy of n rows (a strided copy of its map)."""
    path, n, first, step = args
    return np.array(np.memmap(path, SNAPSHOT_DTYPE, "r", offset=RECORDS_AT, shape=(n,))[first::step])


def write_shard(args) -> dict:
    """Pass 2, one shard: records.npy hashed (renumbered in place where pass 1's guess, its input, was not its
    segment), its prices checked against the tick (check_tick: a cache's rows need no check when read) and
    labels.npy, in one sequential read of the records; without (path, origin) (foxc.bench's synthetic shards, on
    the tick) no check. Labels are computed `rows` rows at a time on a window reaching the longest horizon past
    them, so every label is the one the whole segment gives."""
    folder, segment, guessed, tick, cfg, rows, *against = args
    path, origin = against or (None, 0)
    n = ((folder / RECORDS).stat().st_size - RECORDS_AT) // SNAPSHOT_BYTES
    records, labels = hashlib.sha256(records_header(n)), folder / LABELS
    shape = (N_PLANES, len(cfg.horizons), n)
    with open(folder / RECORDS, "r+b") as rec_file, open(labels, "wb") as lab_out:
        lab_head = _npy_header(np.dtype(np.float32), shape)
        lab_out.write(lab_head)
        lab_out.truncate(len(lab_head) + 4 * int(np.prod(shape)))
        for start, window in _windows(rec_file, n, rows, max(cfg.horizons), segment):
            block = window[:rows]
            if path is not None:
                check_tick(path, block, tick, origin)
            if segment != guessed:
                os.pwrite(rec_file.fileno(), block.data, RECORDS_AT + start * SNAPSHOT_BYTES)
            records.update(block.data)
            planes = compute_labels(window, tick, cfg)[:, :, :len(block)]
            for p in range(shape[0]):  # each (plane, horizon) row of the file gets this block's stretch
                for k in range(shape[1]):
                    at = len(lab_head) + 4 * ((p * shape[1] + k) * n + start)
                    os.pwrite(lab_out.fileno(), planes[p, k].tobytes(), at)
    return {RECORDS: {"bytes": (folder / RECORDS).stat().st_size, "sha256": records.hexdigest()},
            LABELS: {"bytes": labels.stat().st_size, "sha256": file_sha256(labels)}}


def _windows(fh, n: int, rows: int, reach: int, segment: int):
    """(start, records [start, start + rows + reach)) for start = 0, rows, ...: one buffer, read in order."""
    window = np.empty(min(n, rows + reach), SNAPSHOT_DTYPE)  # a horizon past the shard's end reads no further
    held = 0
    fh.seek(RECORDS_AT)
    for start in range(0, n, rows):
        need = min(n - start, rows + reach)
        if held < need:
            fh.readinto(memoryview(window[held:need].view(np.uint8)))
            window["segment"][held:need] = segment
            held = need
        yield start, window[:need]
        left = max(0, held - rows)
        window[:left] = window[held - left:held].copy()
        held = left


def _npy_header(dtype: np.dtype, shape: tuple) -> bytes:
    head = io.BytesIO()
    npy.write_array_header_1_0(head, {"descr": npy.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
    return head.getvalue()


def records_header(n: int) -> bytes:
    head = _npy_header(SNAPSHOT_DTYPE, (n,))
    assert len(head) == RECORDS_AT, "numpy pads a records header to the same length for any row count"
    return head


RECORDS_AT = len(_npy_header(SNAPSHOT_DTYPE, (0,)))  # where a records.npy's rows begin


def build_manifest(spec, shards: list, files: list[dict], tick: int, labels: LabelConfig,
                   config: ValidationConfig, instrument: str | None = None) -> dict:
    """`instrument`: the --instrument the files were read with, as the id it kept (selection_id), or None."""
    entries = [{"segment": segment, "rows": s.rows, "first_ts_ns": s.first_ts, "last_ts_ns": s.last_ts,
                "sources": sources, "files": shard_files,
                "read": {"input": index, **{key: getattr(s, key) for key in READ if key != "input"},
                         **{key: getattr(s, key) for key in OPTIONAL_READ if getattr(s, key) is not None}}}
               for segment, ((index, s, sources), shard_files) in enumerate(zip(shards, files))]
    manifest = {"format": FORMAT, "version": VERSION, "data": str(spec),
                **({SELECTION: instrument} if instrument is not None else {}), "record_bytes": SNAPSHOT_BYTES,
                "tick": int(tick), "labels": label_dict(labels), "validation": asdict(config),
                "rows": sum(e["rows"] for e in entries), "shards": entries}
    manifest["sha256"] = content_sha256(manifest)
    return manifest


def _install(tmp: Path, out: Path, overwrite: bool):
    """Rename the finished cache into place; an old cache (with overwrite) goes only once the new one is there."""
    old = None
    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not (overwrite and is_cache(out))):
            raise DataError(out, "appeared while preparing and is not an empty directory: nothing written")
        if any(out.iterdir()):
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.rename(out, old)
        else:
            out.rmdir()
    os.rename(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
