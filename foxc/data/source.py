"""The reading pipeline's ends: `expand` names the files (a path, a directory or a glob), `load` streams each
(foxc.data.stream: read -> select -> validate), infers the tick from sampled rows (foxc.data.market.infer_tick),
checks every row against it and joins the files in time order, a segment each (a roll: a segment per id).
A prepared cache (foxc.data.cache) is opened by the trainer instead."""
from __future__ import annotations

import glob as globmod
import os
from pathlib import Path

import numpy as np

from ..paths import empty_path, file_kind
from .cache import MANIFEST
from .labels import N_PLANES
from .lobster import is_lobster
from .market import MarketData, check_tick, checked_tick, infer_tick, market_data, report_of, tick_samples
from .record import SNAPSHOT_BYTES, SNAPSHOT_DTYPE
from .stream import SUFFIXES, FileStream
from .validate import DataError, ValidationConfig


def expand(spec) -> list[Path]:
    """The data files named by a path, a directory or a glob (LOBSTER message files are companions)."""
    if not isinstance(spec, (str, os.PathLike)):  # str() of a list would be taken for a glob matching nothing
        raise TypeError(f"spec must be a path, a directory or a glob (a str or a Path), got a {type(spec).__name__}: "
                        "for several files give their directory or a glob")
    spec = str(spec)
    if problem := empty_path(spec, "a file, a directory or a glob"):
        raise DataError(repr(spec), problem)
    path = Path(spec)
    if (path / MANIFEST).is_file():
        raise DataError(path, "a prepared cache (it holds manifest.json): python -m foxc.train --data reads one; "
                              "give the data files here")
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        found = [p for p in found if p.name.lower().endswith(tuple(SUFFIXES)) or is_lobster(p)]
        if not found:
            raise DataError(path, "no data files in the directory (.parquet, .dbn, .dbn.zst, *_orderbook_N.csv)")
        return files_only(found)
    if any(ch in spec for ch in "*?["):
        found = sorted(Path(p) for p in globmod.glob(spec) if "message_" not in Path(p).name)
        found = [p for p in found if p.is_file() or p.name.lower().endswith(tuple(SUFFIXES)) or is_lobster(p)]
        if not found:
            raise DataError(spec, "the pattern matches no files")
        return files_only(found)
    if not path.exists():
        raise DataError(path, "no such file or directory")
    return files_only([path])  # a FIFO's open waits for a writer, forever


def files_only(paths: list[Path]) -> list[Path]:
    """`paths`, refused if one is not a file, or is a file beside its compressed twin (read twice)."""
    odd = next((p for p in paths if not p.is_file()), None)
    if odd is not None:
        what = file_kind(odd) or ("a link to nothing" if odd.is_symlink() else "not a regular file")
        raise DataError(odd, f"named as a data file but not a file: {what}" +
                        " (give it as a path of its own)" * (what == "a directory"))
    names = {str(p).lower() for p in paths}
    twin = next((p for p in paths if str(p).lower().endswith(".zst") and str(p).lower()[:-4] in names), None)
    if twin is not None:
        raise DataError(twin, f"the same data as {twin.with_suffix('')} beside it, compressed: its rows would be "
                              "read twice (keep one of the two)")
    return paths


def load(spec, config: ValidationConfig | None = None, tick: int | None = None,
         instrument: str | None = None) -> MarketData:
    """The files `spec` names read through the pipeline (of each, `instrument`'s rows only: --instrument), joined in
    time order, counted in `tick` (--tick, price units) or the tick inferred; a bad file, or a tick that does not
    divide its prices, is a DataError. Only the kept rows are held, each chunk until it is joined."""
    tick = None if tick is None else checked_tick(tick)  # before the files are read
    files, held = [], 0
    for path in expand(spec):
        stream, chunks = FileStream(path, config, instrument=instrument), []
        for chunk in stream:
            chunks.append(chunk)
            held += len(chunk)
        files.append((chunks, stream.summary()))
    report = report_of([summary for _, summary in files])
    files = in_time_order(files)
    summaries = [part for _, summary in files for part in summary.parts()]
    records = np.empty(held, SNAPSHOT_DTYPE)
    row = segment = 0
    for chunks, summary in files:
        for i, chunk in enumerate(chunks):
            chunks[i] = None  # freed once copied (records' pages are committed as written: the rows held once)
            records[row:row + len(chunk)] = chunk
            records["segment"][row:row + len(chunk)] += segment  # the stream numbered the file's own from 0
            row += len(chunk)
        segment += len(summary.parts())
    starts = np.cumsum([0] + [s.rows for s in summaries])
    tick, origins = infer_tick(spec, summaries, [records[a + first:a + s.rows:step] for s, a, (first, step) in
                                                 zip(summaries, starts, tick_samples(summaries))], tick)
    for s, a, origin in zip(summaries, starts, origins):
        check_tick(s.path, records[a:a + s.rows], tick, origin)  # every row, as prepare checks a cache's
    return market_data(records, summaries, tick, report)


def records_need(rows: int, of: str = " of records") -> str:
    """What `rows` snapshots take, as an out-of-memory message says it."""
    return f"{rows:,} snapshots take {size(rows * SNAPSHOT_BYTES)}{of} ({SNAPSHOT_BYTES} bytes each)"


def labelled_need(rows: int, horizons: int, copy: bool = False) -> str:
    """What `rows` snapshots and their label planes take; `copy`: and a copy of the records (a held-out cut)."""
    each = 4 * N_PLANES * horizons
    return (records_need(rows)
            + (", as much again for the held-out cut's copy," if copy else "") +
            f" and {size(rows * each)} of label planes ({each} bytes each)")


def size(nbytes: int) -> str:
    return f"{nbytes / 1e9:,.2f} GB" if nbytes >= 1e7 else f"{nbytes / 1e6:,.2f} MB"


def no_room(where, spec, need: str, remedy: str = "") -> DataError:
    """Rows that do not fit in memory: what they needed, and the remedy (by default, a cache of the files `spec`)."""
    return DataError(where, f"out of memory: {need}; " + (remedy or "data files are held in memory whole: prepare a "
                            f"cache of them (python -m foxc.data prepare {spec} --out CACHE), whose rows a run reads "
                            "from disk a shard at a time (--data CACHE)"))


def in_time_order(items: list) -> list:
    """Files, as tuples holding their FileSummary second, by first kept time, then by path."""
    return sorted(items, key=lambda item: (item[1].first_ts, item[1].path))
