"""A prepared cache: validated snapshots and their label planes, one shard per segment load() makes (a file, or
each instrument_id's rows of a file that rolls), written by foxc.data.prepare:

    CACHE/manifest.json                  written last: a cache without one is not a cache
    CACHE/shards/00000/records.npy       SNAPSHOT_DTYPE [rows], segment = the shard's index
    CACHE/shards/00000/labels.npy        float32 [7 planes, 3 horizons, rows]

Labels never cross a segment, so the shards side by side are, bit for bit, what load() + compute_labels give.
A run reads it through `CacheRows` (rows left on disk, each shard file hashed whole as it is read and refused,
naming it, unless its size, sha256, dtype and shape are the manifest's); `open_cache` reads all of it. The
manifest is checked by its format, version, declared shape and its own digest, `sha256`: of its shards' hashes,
its tick, labels and --instrument selection (what a resumed run must match; check_selection refuses another)."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import numpy.lib.format as npy

from ..jsonfile import JsonFileError, int64, read_json, shape_problem
from .labels import N_PLANES, PLANES, LabelConfig
from .record import PRICE_SCALE, SNAPSHOT_BYTES, SNAPSHOT_DTYPE
from .market import MarketData, market_data, report_of
from .stream import FileSummary
from .validate import DataError

FORMAT, VERSION = "foxc-cache", 3  # 2: a roll begins a shard; 3: the record carries trades and the feed delay
MANIFEST = "manifest.json"
RECORDS, LABELS = "records.npy", "labels.npy"
HASH_BLOCK = 1 << 22
# what a shard's entry says of its file as read (the same for each shard of a file): its place in DATA's order,
# then its FileSummary's fields
READ = {"input": int, "kind": str, "rows_read": int, "skipped": dict[str, int], "notes": list[str], "instrument": str,
        "instrument_id": int, "extra": dict}
OPTIONAL_READ = {"other_instruments": dict[str, int]}  # --instrument: rows of each other instrument_id left out
SELECTION = "instrument_selection"  # the manifest's --instrument, where the files were read with one
SHARD_FILE = {"bytes": int, "sha256": str}
SHAPE = {"format": str, "version": int, "data": str, SELECTION + "?": str,
         "record_bytes": range(SNAPSHOT_BYTES, SNAPSHOT_BYTES + 1), "tick": range(1, 2**63),
         "labels": {"horizons": tuple[(range(1, 2**63),) * 3], "dead_band_ticks": float, "fee_per_lot": float,
                    "size_scale_ticks": float},
         "validation": dict, "rows": int, "sha256": str,
         "shards": list[{"segment": int, "rows": range(1, 2**63), "first_ts_ns": int64, "last_ts_ns": int64,
                         "sources": list[{"path": str}], "files": {RECORDS: SHARD_FILE, LABELS: SHARD_FILE},
                         "read": {**READ, **{key + "?": t for key, t in OPTIONAL_READ.items()}}}]}


def is_cache(path) -> bool:
    return path is not None and bool(str(path).strip()) and (Path(path) / MANIFEST).is_file()  # "" is not "."


def shard_dir(cache: Path, segment: int) -> Path:
    return cache / "shards" / f"{segment:05d}"


def file_sha256(path) -> str:
    h = hashlib.sha256()
    block = bytearray(HASH_BLOCK)  # one buffer read into again and again: no fresh pages per block
    view = memoryview(block)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(block):
            h.update(view[:n])
    return h.hexdigest()


def label_dict(cfg: LabelConfig) -> dict:
    d = asdict(cfg)
    d["horizons"] = [int(h) for h in cfg.horizons]
    return d


def content_sha256(manifest: dict) -> str:
    """The cache's identity: its shards' hashes, in order, with the tick and the label configuration."""
    what = {"format": FORMAT, "version": VERSION, "tick": manifest["tick"], "labels": manifest["labels"],
            "shards": [[s["files"][RECORDS]["sha256"], s["files"][LABELS]["sha256"]] for s in manifest["shards"]]}
    if manifest.get(SELECTION) is not None:  # absent: the identity of a cache prepared before --instrument existed
        what[SELECTION] = manifest[SELECTION]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------
# open

@dataclass
class Cache:
    path: Path
    manifest: dict
    market: MarketData   # the records of every shard, in segment order
    labels: np.ndarray   # float32 [7, 3, rows]
    sha256: str          # the data's identity (content_sha256)


class CacheRows:
    """Rows [0, stop) of a prepared cache, left on disk and read a shard at a time (a run holds a shard or two)."""

    def __init__(self, path, labels: LabelConfig | None, stop: int | None = None, manifest: dict | None = None):
        """`labels`: the run's label settings, refused unless the cache's (None: the cache's own)."""
        self.path = Path(path)
        self.manifest = manifest if manifest is not None else read_manifest(self.path)
        if labels is None:
            prepared = self.manifest["labels"]
            labels = LabelConfig(**{**prepared, "horizons": tuple(prepared["horizons"])})
        _check_labels(self.path, self.manifest, labels)
        shards = self.manifest["shards"]
        self.label_config, self.horizons = labels, tuple(int(h) for h in labels.horizons)
        whole = np.array([s["rows"] for s in shards], np.int64)
        self.total = int(whole.sum())
        self.stop = self.total if stop is None else int(stop)
        assert 0 < self.stop <= self.total, f"rows [0, {self.stop}) are not within the cache's {self.total} rows"
        first = np.cumsum(whole) - whole
        kept = int(np.searchsorted(first, self.stop, "left"))  # shards holding a row below stop
        self.first, self.rows = first[:kept], np.minimum(first[:kept] + whole[:kept], self.stop) - first[:kept]
        if manifest is None:
            for k in range(kept):
                for name in (RECORDS, LABELS):
                    _check_size(shard_dir(self.path, k) / name, shards[k]["files"][name])
        summaries = [_summary(s) for s in shards]
        named = sorted(range(len(shards)), key=lambda k: shards[k]["read"]["input"])  # the report lists DATA's order
        self.meta = market_data(np.empty(0, SNAPSHOT_DTYPE), summaries, self.manifest["tick"],
                                report_of([summaries[k] for k in named]))
        self.sha256 = self.manifest["sha256"]

    # what MarketData says of its rows
    tick = property(lambda self: self.meta.tick)
    instrument = property(lambda self: self.meta.instrument)
    instrument_id = property(lambda self: self.meta.instrument_id)
    source = property(lambda self: self.meta.source)
    files = property(lambda self: self.meta.files)
    report = property(lambda self: self.meta.report)
    n_rows = property(lambda self: self.stop)
    n_segments = property(lambda self: len(self.rows))

    def segment_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) row of each segment (shard), end exclusive."""
        return self.first.copy(), self.first + self.rows

    def head(self, stop: int) -> "CacheRows":
        """Rows [0, stop) of the same cache (stop <= this one's)."""
        if stop > self.stop:
            raise ValueError(f"rows [0, {stop}) are not within these {self.stop} rows")
        return CacheRows(self.path, self.label_config, stop, self.manifest)

    def read(self, k: int, records: np.ndarray | None = None, labels: np.ndarray | None = None):
        """Segment k's rows into records[:n] and its label planes into labels[:, :, :n], its files verified as read."""
        shard, folder, n = self.manifest["shards"][k], shard_dir(self.path, k), int(self.rows[k])
        whole, cut, h = shard["rows"], int(self.rows[k]) < shard["rows"], len(self.horizons)
        for name, target, dtype, shape in ((RECORDS, records, SNAPSHOT_DTYPE, (whole,)),
                                           (LABELS, labels, np.dtype(np.float32), (N_PLANES, h, whole))):
            if target is not None:  # a cut shard is read whole, then its head kept
                into = np.empty(shape, dtype) if cut else target[..., :n]
                _read_verified(folder / name, shard["files"][name], dtype, shape,
                               [into[i] for i in np.ndindex(shape[:-1])])  # the rows of each (plane, horizon)
                if cut:
                    target[..., :n] = into[..., :n]
        if labels is not None and self.stop < self.total:
            head_labels(labels[:, :, :n], self.horizons, self.stop, int(self.first[k]))

    def load(self) -> tuple[MarketData, np.ndarray]:
        """All these rows in memory: (MarketData, label planes), every file read on threads and verified."""
        records = np.empty(self.n_rows, SNAPSHOT_DTYPE)
        planes = np.empty((N_PLANES, len(self.horizons), self.n_rows), np.float32)
        jobs = [job for k, (a, b) in enumerate(zip(*self.segment_bounds()))
                for job in ((k, records[a:b], None), (k, None, planes[:, :, a:b]))]
        with ThreadPoolExecutor(min(32, os.cpu_count() or 1)) as pool:  # hashing and reading release the GIL
            list(pool.map(lambda job: self.read(*job), jobs))
        return replace(self.meta, records=records), planes

    def verify(self, threads: int = 1, visit=None) -> list:
        """Read (and so hash) every shard into one shard's buffers per thread; `visit(k, records, labels)` of each."""
        local, largest = threading.local(), int(self.rows.max())

        def one(k: int):
            if not hasattr(local, "buffers"):
                local.buffers = (np.empty(largest, SNAPSHOT_DTYPE),
                                 np.empty((N_PLANES, len(self.horizons), largest), np.float32))
            records, labels = local.buffers
            self.read(k, records, labels)
            n = int(self.rows[k])
            return visit(k, records[:n], labels[:, :, :n]) if visit else None
        with ThreadPoolExecutor(max(1, threads)) as pool:
            return list(pool.map(one, range(self.n_segments)))

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Records [start, stop) of the whole cache (not only these rows), verified (read_rows)."""
        return read_rows(self.path, start, stop, self.sha256)

    def labelled(self) -> list[bool]:
        """Per horizon, whether some row keeps a label (outcome weight): the first shard that has one ends the search."""
        plane, cut, found = PLANES.index("outcome_weight"), self.stop < self.total, []
        for j, horizon in enumerate(self.horizons):
            ns = [min(int(n), self.stop - horizon - int(a)) if cut else int(n) for a, n in zip(self.first, self.rows)]
            found.append(any(n > 0 and np.any(self._plane(k, plane, j, n)) for k, n in enumerate(ns)))
        return found

    def _plane(self, k: int, plane: int, j: int, n: int) -> np.ndarray:
        """The first n values of one (plane, horizon) row of shard k's labels.npy (unverified: a check reads it)."""
        whole = self.manifest["shards"][k]["rows"]
        with open(shard_dir(self.path, k) / LABELS, "rb") as fh:
            _read_npy_header(fh)
            fh.seek(fh.tell() + 4 * (plane * len(self.horizons) + j) * whole)
            return np.fromfile(fh, np.float32, n)


def _check_labels(folder: Path, manifest: dict, labels: LabelConfig):
    """Refuse a cache prepared with other label settings than `labels` (horizons named both ways)."""
    want, have = label_dict(labels), manifest["labels"]
    if have["horizons"] != want["horizons"]:
        a, b = (",".join(map(str, d["horizons"])) for d in (have, want))
        raise DataError(folder, f"prepared with label horizons {a}, not this run's --horizons {b} (prepare the "
                                f"cache again with --horizons {b}, or train with --horizons {a})")
    if have != want:
        raise DataError(folder, f"prepared with labels {have}, this run's are {want} (prepare the cache again)")


def check_selection(folder, manifest: dict, instrument: str | None, tick: int | None = None):
    """Refuse a cache of another --instrument than `instrument`, or of another tick than `tick` (--tick; None: any)."""
    have, reads = manifest.get(SELECTION), [s["read"] for s in manifest["shards"]]
    again = (f"python -m foxc.data prepare {shlex.quote(str(manifest['data']))} --out NEWCACHE"
             + (f" --instrument {instrument}" if instrument is not None else ""))
    if tick is not None and tick != manifest["tick"]:
        mine, now = manifest["tick"] / PRICE_SCALE, tick / PRICE_SCALE
        raise DataError(folder, f"prepared in tick {mine:g}, not this --tick {now:g}: its labels are counted in its "
                                f"tick (give --tick {mine:g}, or none, or prepare another cache: {again} --tick "
                                f"{now:g})")
    if have == instrument or None not in (have, instrument) and all(
            instrument in (str(r["instrument_id"] or ""), r["instrument"] if r["kind"] != "lobster" else None)
            for r in reads):  # 0: no one id (a file without ids, a symbol that rolls); LOBSTER maps no symbols
        return
    if have is None:
        raise DataError(folder, f"prepared without --instrument, not with this --instrument {instrument}: its rows "
                                f"cannot be selected again (prepare a cache of that instrument: {again})")
    now = f"not this --instrument {instrument}" if instrument is not None else "and no --instrument is given now"
    raise DataError(folder, f"prepared with --instrument {have}, {now}: its rows are that instrument's (give "
                            f"--instrument {have}, or prepare another cache: {again})")


def open_cache(path, labels: LabelConfig) -> Cache:
    """The cache at `path` in memory (every shard file verified), its labels refused unless `labels`."""
    rows = CacheRows(path, labels)
    market, planes = rows.load()
    return Cache(rows.path, rows.manifest, market, planes, rows.sha256)


def read_rows(path, start: int, stop: int, sha256: str | None = None) -> np.ndarray:
    """Records [start, stop) of the cache (a fold's window) from the shards that hold them, each verified whole."""
    folder = Path(path)
    manifest = read_manifest(folder)
    if sha256 is not None and manifest["sha256"] != sha256:
        raise DataError(folder, f"the cache is {manifest['sha256'][:12]}…, not the {sha256[:12]}… the folds were "
                                "planned on: it was prepared again meanwhile (run the walk-forward again)")
    rows = CacheRows(folder, None, manifest=manifest)
    first, end = rows.segment_bounds()
    if not 0 <= start < stop <= end[-1]:
        raise ValueError(f"rows [{start}, {stop}) are not within the cache's {end[-1]} rows")
    a, b = int(np.searchsorted(end, start, "right")), int(np.searchsorted(end, stop - 1, "right"))
    offset = int(first[a])
    records = np.empty(int(end[b]) - offset, SNAPSHOT_DTYPE)
    with ThreadPoolExecutor(min(32, os.cpu_count() or 1, b + 1 - a)) as pool:
        list(pool.map(lambda k: rows.read(k, records[first[k] - offset:end[k] - offset]), range(a, b + 1)))
    return records[start - offset:stop - offset]


def _read_verified(path: Path, entry: dict, dtype: np.dtype, shape: tuple, targets: list[np.ndarray]):
    """A shard file's data into `targets`, hashed as it is read; refused unless it is what the manifest says."""
    _check_size(path, entry)
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        try:
            got = _read_npy_header(fh)
        except ValueError as e:
            _refuse(path, entry, f"not a .npy file ({e})")
        if got != (shape, False, dtype):
            _refuse(path, entry, f"holds {got[2]} {got[0]}, the manifest says {dtype} {shape}")
        data = fh.tell()
        fh.seek(0)
        h.update(fh.read(data))
        for target in targets:
            view = memoryview(target.view(np.uint8))
            for i in range(0, len(view), HASH_BLOCK):
                part = view[i:i + HASH_BLOCK]
                if fh.readinto(part) != len(part):
                    _refuse(path, entry, "shorter than its header says")
                h.update(part)
    if h.hexdigest() != entry["sha256"]:
        _refuse(path, entry, "")


def _read_npy_header(fh) -> tuple:
    """(shape, fortran_order, dtype) of the .npy file `fh` holds; `fh` is left at its data."""
    version = npy.read_magic(fh)
    return (npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0)(fh)


def _check_size(path: Path, entry: dict):
    if not path.is_file():
        raise DataError(path, "missing from the cache (prepare it again)")
    size = path.stat().st_size
    if size != entry["bytes"]:
        raise DataError(path, f"{size} bytes, the manifest says {entry['bytes']}: the shard changed after it was "
                              "prepared (prepare the cache again)")


def _refuse(path: Path, entry: dict, problem: str):
    """A shard file that is not what the manifest says: named by its hash when that differs, else by `problem`."""
    got = file_sha256(path)
    if got != entry["sha256"]:
        raise DataError(path, f"sha256 {got} differs from the manifest's {entry['sha256']}: the shard changed after "
                              "it was prepared (prepare the cache again)")
    raise DataError(path, problem)


def _summary(shard: dict) -> FileSummary:
    """The FileSummary pass 1 made of the shard's file, from the manifest."""
    return FileSummary(shard["sources"][0]["path"], rows=shard["rows"], first_ts=shard["first_ts_ns"],
                       last_ts=shard["last_ts_ns"], **{key: shard["read"][key] for key in READ if key != "input"},
                       **{key: shard["read"].get(key) for key in OPTIONAL_READ})


def read_manifest(folder: Path) -> dict:
    """The manifest, checked by its format, its version, its declared shape (SHAPE) and its own digest (sha256)."""
    path = folder / MANIFEST
    try:
        manifest = read_json(path)
    except FileNotFoundError:
        raise DataError(folder, f"not a prepared cache (no {MANIFEST})") from None
    except JsonFileError as e:
        raise DataError(path, e.problem) from None
    if manifest.get("format") != FORMAT:
        raise DataError(path, f"not a foxc cache manifest: format is not '{FORMAT}'")
    version = manifest.get("version")
    if version != VERSION:
        again = f"python -m foxc.data prepare {shlex.quote(str(manifest.get('data', 'DATA')))} --out " \
                f"{shlex.quote(str(folder))} --overwrite"
        why = {1: ": a file whose instrument_id changes (a continuous symbol's roll) was one shard then, whose "
                  "windows and labels cross the roll",
               2: ": its records have no trades (the resting orders' queue model needs them) and no feed delay"}
        why = why.get(version, "") if isinstance(version, int) else ""
        which = f"cache version {version!r}, this foxc reads version {VERSION}" if version is not None else \
            "the manifest records no cache version (a cache of another program, or damaged)"
        raise DataError(path, f"{which}{why}; prepare it again: {again}")
    problem = shape_problem(manifest, SHAPE) or (manifest["sha256"] != content_sha256(manifest) and
                                                 "sha256 is not the digest of the shards' hashes (the manifest was "
                                                 "edited)")
    if problem:
        raise DataError(path, f"not a foxc cache manifest: {problem}")
    return manifest


def head_labels(labels: np.ndarray, horizons, rows: int, first: int = 0) -> np.ndarray:
    """The labels the first `rows` records alone give (`labels`: the planes of rows first.., changed in place)."""
    for k, h in enumerate(horizons):
        labels[:, k, max(0, rows - int(h) - first):] = 0
    return labels
