"""One data file's validated snapshots, chunk by chunk: what `load()` and `foxc.data prepare` read.

    stream = FileStream(path, config, rows=65_536)
    for chunk in stream:           # SNAPSHOT_DTYPE records, at most `rows`, prev_ts_ns filled
        ...
    stream.summary()               # rows read and kept, skips per reason, notes, first/last time

Each format's reader (`iter_parquet`, `iter_dbn`, `iter_lobster`) yields (records, bad-float
mask or None) chunks of at most `rows` rows and never holds more than the chunk it is
converting (plus the format's own read-ahead: a Parquet batch, a DBN block of `rows` records,
a 16 MiB CSV block). The stream validates each chunk as it comes (foxc.data.validate.Validator
carries time order across chunks), so the rows kept and the counts are those of the whole file
read at once, wherever the chunks fall. A file is one instrument's book: rows of several
instruments interleaved are refused (`Instruments`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

import numpy as np

from .chunks import CHUNK_ROWS, new_meta
from .lobster import is_lobster
from .validate import DataError, ValidationConfig, Validator

SUFFIXES = {".dbn": "dbn", ".dbn.zst": "dbn", ".parquet": "parquet", ".pq": "parquet", ".arrow": "parquet"}


def source_kind(path: Path) -> str:
    kind = next((kind for suffix, kind in SUFFIXES.items() if path.name.lower().endswith(suffix)), None)
    if kind is None and not is_lobster(path):
        raise DataError(path, "unknown format: expected .parquet, .dbn, .dbn.zst or LOBSTER *_orderbook_N.csv")
    return kind or "lobster"


def reader(kind: str):
    """The chunk reader of a format, iter_<kind> of foxc.data.<kind> (imported when first needed):
    f(path, meta, rows) yielding (records, bad-float mask or None)."""
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


class Instruments:
    """The instrument ids of a file's rows in the order they come. Each row is read as the next snapshot of
    one book, so ids that interleave (a parent symbol's file, ES.FUT: every contract's book) are refused;
    ids one after another (a continuous symbol, ES.c.0, rolling to the next contract) are one book, noted."""

    SHOWN = 5  # ids named in a message

    def __init__(self, path):
        self.path, self.last = path, None
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
                raise DataError(self.path, f"instrument_id {iid} again after {self.last}: the books of several "
                                           f"instruments interleave ({self._shown()} so far; a parent symbol's file, "
                                           "e.g. ES.FUT), and a file is read as one book: give a file of one "
                                           "instrument (its raw symbol, e.g. ESM4, or a continuous one, ES.c.0)",
                                row=row + at)
            self.first_row[iid], self.last = row + at, iid

    def _shown(self, rows: bool = False) -> str:
        items = list(self.first_row.items())
        shown = ", ".join(f"{iid} from row {r}" if rows else str(iid) for iid, r in items[:self.SHOWN])
        return "instrument_id " + shown + (", ..." if len(items) > self.SHOWN else "")

    def notes(self) -> list[str]:
        if len(self.first_row) < 2:
            return []
        return [f"{len(self.first_row)} instruments one after another ({self._shown(rows=True)}): read as one book, "
                "one segment (a continuous symbol's roll to the next contract?)"]


class FileStream:
    """A data file's validated records, chunk by chunk; iterate once, then `summary()`.

    A file that cannot be read raises DataError naming it, as soon as the problem is met; one
    whose every row is skipped raises it at the end."""

    def __init__(self, path, config: ValidationConfig | None = None, rows: int = CHUNK_ROWS):
        self.path, self.rows = Path(path), rows
        self.kind = source_kind(self.path)
        self.meta = new_meta()
        self.validator = Validator(config)
        self.instruments = Instruments(self.path)
        self.first_ts = self.last_ts = None

    def __iter__(self):
        try:
            for raw, bad in reader(self.kind)(self.path, self.meta, self.rows):
                self.instruments.see(raw["instrument_id"], self.validator.rows_read)
                kept = self.validator.keep(raw, bad)
                if len(kept):
                    yield self._timed(kept)
        except OSError as e:  # a MemoryError goes to the caller, who knows what it holds (load(): every row)
            raise DataError(self.path, f"cannot read ({e.__class__.__name__}: {e})") from None
        if not self.validator.rows_kept:
            why = ", ".join(f"{n} {reason}" for reason, n in self.validator.skipped().items() if n) or "none"
            raise DataError(self.path, f"no usable rows: all {self.validator.rows_read} skipped ({why})")

    def _timed(self, kept: np.ndarray) -> np.ndarray:
        """prev_ts_ns within the file, carried from the previous chunk."""
        kept["prev_ts_ns"][1:] = kept["ts_ns"][:-1]
        kept["prev_ts_ns"][0] = kept["ts_ns"][0] if self.last_ts is None else self.last_ts
        if self.first_ts is None:
            self.first_ts = int(kept["ts_ns"][0])
        self.last_ts = int(kept["ts_ns"][-1])
        return kept

    def summary(self) -> FileSummary:
        meta = self.meta
        return FileSummary(str(self.path), self.kind, self.validator.rows_read, self.validator.rows_kept,
                           self.validator.skipped(), [*meta["notes"], *self.instruments.notes()], meta["instrument"],
                           int(meta["instrument_id"]), self.first_ts, self.last_ts,
                           {k: v for k, v in meta.items() if k not in ("instrument", "instrument_id", "notes")})
