"""The reading pipeline of one file: read (the format's reader, chunk by chunk) -> select (--instrument) -> instruments
(one book, a segment per id) -> validate; `FileStream(path, config)` yields its kept SNAPSHOT_DTYPE chunks (at most
`rows` rows, prev_ts_ns and segment set), then `summary()`.

A reader (`iter_<kind>` of foxc.data.<kind>) yields (records, flags) chunks and holds no more than the chunk it
converts (plus its format's read-ahead); validation carries time order and skipped rows' trades across chunks, so the
rows kept and the counts are those of the file read whole. Ids one after another (a continuous symbol's roll) are a segment each."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path

import numpy as np

from ..numbers import whole
from .chunks import CHUNK_ROWS, NOT_EXTRA, new_meta
from .lobster import is_lobster
from .select import FLAG, Selection, ids_text, symbols_only
from .validate import DataError, ValidationConfig, Validator

SUFFIXES = {".dbn": "dbn", ".dbn.zst": "dbn", ".parquet": "parquet", ".pq": "parquet", ".arrow": "parquet"}


def source_kind(path: Path) -> str:
    kind = next((kind for suffix, kind in SUFFIXES.items() if path.name.lower().endswith(suffix)), None)
    if kind is None and not is_lobster(path):
        raise DataError(path, "unknown format: expected .parquet, .dbn, .dbn.zst or LOBSTER *_orderbook_N.csv")
    return kind or "lobster"


def reader(kind: str):
    """The chunk reader of a format, iter_<kind> of foxc.data.<kind> (imported when first needed)."""
    return getattr(import_module(f"{__package__}.{kind}"), f"iter_{kind}")


@dataclass
class FileSummary:
    """One file as read: what the report records and what orders it among the others."""

    path: str
    kind: str
    rows_read: int
    rows: int                      # kept
    skipped: dict[str, int]
    notes: list[str]
    instrument: str
    instrument_id: int
    first_ts: int                  # of the rows kept
    last_ts: int
    extra: dict = field(default_factory=dict)  # format-specific metadata (DBN's version, dataset, ...)
    segments: list = field(default_factory=list)  # (rows, first_ts, last_ts) of each run of one instrument_id kept
    other_instruments: dict | None = None  # --instrument: rows left out per other instrument_id (None: no selection)

    def parts(self) -> list[FileSummary]:
        """The file as its segments, in order, one summary each (what was read, skipped and noted is the file's)."""
        if len(self.segments) <= 1:
            return [self]
        return [replace(self, rows=n, first_ts=a, last_ts=b, segments=[]) for n, a, b in self.segments]


class Instruments:
    """The instrument ids of a file's rows in the order they come. Ids that interleave (a parent symbol's file) are
    refused: a row is the next snapshot of one book; ids one after another (ES.c.0 rolling) are a segment each, noted
    (a window, a label or a position across the roll would see its price gap as a return)."""

    def __init__(self, path, meta: dict):
        self.path, self.meta, self.last = path, meta, None  # meta: the reader's (whose ids may stand for symbols)
        self.first_row: dict[int, int] = {}  # id -> the row it came first at, in that order

    def see(self, ids: np.ndarray, row: int) -> None:
        """The ids of rows row, row + 1, ... (one comparison a row while they stay the same)."""
        if not len(ids) or (ids[0] == self.last and (ids == self.last).all()):
            return
        for at in [0, *(np.flatnonzero(ids[1:] != ids[:-1]) + 1).tolist()]:
            iid = int(ids[at])
            if iid == self.last:
                continue
            if iid in self.first_row:
                found = dict(self.first_row)  # and those of the rest of the chunk, read already: in order of first row
                unique, first = np.unique(ids, return_index=True)
                found.update((int(i), row + int(r)) for r, i in sorted(zip(first, unique)) if int(i) not in found)
                names = symbols_only(self.meta)
                name = (names or {}).get
                raise DataError(self.path, f"{ids_text({iid: 0}, None, names)} again after "
                                           f"{name(self.last, self.last)}: the books of several instruments interleave "
                                           f"({ids_text(found, None, names)} so far; a parent symbol's file, e.g. "
                                           f"ES.FUT), and a file is read as one book: give {FLAG} ID to keep one "
                                           f"instrument's rows (e.g. {FLAG} {name(iid, iid)}), or give a file of one "
                                           "instrument (its raw symbol, e.g. ESM4, or a continuous one, ES.c.0)",
                                row=row + at)
            self.first_row[iid], self.last = row + at, iid

    def notes(self, segments: int) -> list[str]:
        """`segments`: those the file's kept rows make (an id whose every row was skipped makes none)."""
        n = len(self.first_row)
        if n < 2:
            return []
        none = f" ({n - segments} with no row kept)" if segments < n else ""
        shown = ids_text(self.first_row, lambda r: f" from row {r}", symbols_only(self.meta))
        return [f"{n} instruments one after another ({shown}): split into {segments} segment"
                f"{'s' * (segments != 1)} at the rows where each begins{none} (a continuous symbol's roll to the next "
                "contract?)"]


class FileStream:
    """A data file's validated records, chunk by chunk; iterate once, then `summary()`."""

    def __init__(self, path, config: ValidationConfig | None = None, rows: int = CHUNK_ROWS,
                 instrument: str | None = None):
        if not whole(rows) or rows < 1:  # 0 read nothing, then blamed the file
            raise ValueError(f"rows must be a whole number >= 1 (the snapshots a chunk holds at most; default "
                             f"{CHUNK_ROWS:,}), got {rows!r}")
        self.path, self.rows = Path(path), int(rows)
        self.kind = source_kind(self.path)
        self.meta = new_meta()
        self.validator = Validator(config)
        self.instruments = Instruments(self.path, self.meta)
        self.selection = None if instrument is None else Selection(self.path, instrument)
        self.segments: list[list[int]] = []  # [rows, first_ts, last_ts, instrument_id] of each, so far

    def __iter__(self):
        try:
            if self.selection is not None and self.selection.symbol and self.kind == "parquet":
                # its symbols come with its rows: read its symbol column alone first, not a big file for one line
                self.selection.known(import_module(f"{__package__}.parquet").parquet_symbols(self.path))
            for raw, bad in reader(self.kind)(self.path, self.meta, self.rows):
                if self.selection is not None:  # before validation: its counts are the instrument's
                    raw, bad = self.selection.keep(raw, bad, self.meta)
                self.instruments.see(raw["instrument_id"], self.validator.rows_read)
                kept = self.validator.keep(raw, bad)
                if len(kept):
                    yield self._timed(kept)
        except OSError as e:  # named by its file (a MemoryError is foxc.cli.run's)
            raise DataError(self.path, f"cannot read ({e.__class__.__name__}: {e})") from None
        self.validator.finish()
        if self.selection is not None:
            self.selection.finish()
        if not self.validator.rows_kept:
            why = ", ".join(f"{n} {reason}" for reason, n in self.validator.skipped().items() if n) or "none"
            chosen = self.selection
            of = "" if chosen is None else f" of {chosen.what()} ({FLAG} {chosen.given})"
            raise DataError(self.path, f"no usable rows{of}: all {self.validator.rows_read} skipped ({why})")

    def _timed(self, kept: np.ndarray) -> np.ndarray:
        """segment and prev_ts_ns, carried from the previous chunk: a segment begins where the id changes."""
        ids, ts, prev = kept["instrument_id"], kept["ts_ns"], kept["prev_ts_ns"]
        begins = np.r_[not self.segments or ids[0] != self.segments[-1][3], ids[1:] != ids[:-1]]
        prev[1:] = ts[:-1]
        prev[0] = self.segments[-1][2] if self.segments else 0
        prev[begins] = ts[begins]
        kept["segment"] = len(self.segments) - 1 + np.cumsum(begins)
        edges = [0, *(np.flatnonzero(begins[1:]) + 1).tolist(), len(kept)]
        for a, b in zip(edges[:-1], edges[1:]):
            if begins[a]:
                self.segments.append([0, int(ts[a]), 0, int(ids[a])])
            self.segments[-1][0] += b - a
            self.segments[-1][2] = int(ts[b - 1])
        if symbols_only(self.meta) is not None:  # numbers that stood for symbols, in this file only: no ids
            ids[:] = 0
        return kept

    def summary(self) -> FileSummary:
        """What was read; with --instrument, the kept instrument's (its id, its name where the file has one)."""
        meta, segments, chosen = self.meta, [tuple(s[:3]) for s in self.segments], self.selection
        return FileSummary(str(self.path), self.kind, self.validator.rows_read, self.validator.rows_kept,
                           self.validator.skipped(), [*meta["notes"], *self.instruments.notes(len(segments)),
                                                     *self.validator.trade_notes()],
                           meta["instrument"] if chosen is None else chosen.name(meta),
                           (meta["instrument_id"] or 0) if chosen is None else chosen.id,
                           segments[0][1] if segments else None, segments[-1][2] if segments else None,
                           {k: v for k, v in meta.items() if k not in NOT_EXTRA}, segments,
                           None if chosen is None else chosen.other_instruments)
