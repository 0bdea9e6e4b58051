"""Loading market data: one file, a directory or a glob, validated and concatenated in time order.

    data = load("data/*.dbn.zst")          # MarketData
    data.records, data.tick, data.report.summary()

Each file is its own segment (windows and labels never cross one). Files are ordered by
their first kept timestamp. Files are read as streams of chunks (foxc.data.stream); a prepared
cache of them (foxc.data.cache) is opened by the trainer instead, not here.
"""
from __future__ import annotations

import glob as globmod
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .record import PRICE_UNDEF, SNAPSHOT_DTYPE
from .validate import DataError, ValidationConfig, ValidationReport


@dataclass
class MarketData:
    records: np.ndarray
    instrument: str
    instrument_id: int
    source: str
    files: list[str]
    tick: int  # price units per tick, inferred from the prices unless given
    report: ValidationReport = field(default_factory=ValidationReport)

    @property
    def n_rows(self) -> int:
        return len(self.records)

    @property
    def n_segments(self) -> int:
        return int(self.records["segment"][-1]) + 1 if len(self.records) else 0

    @property
    def time_range(self) -> tuple[int, int]:
        return int(self.records["ts_ns"][0]), int(self.records["ts_ns"][-1])

    def segment_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) record index per segment, end exclusive."""
        seg = self.records["segment"]
        starts = np.searchsorted(seg, np.arange(self.n_segments), side="left")
        ends = np.searchsorted(seg, np.arange(self.n_segments), side="right")
        return starts.astype(np.int64), ends.astype(np.int64)

    def describe_time(self) -> str:
        lo, hi = self.time_range
        fmt = lambda ns: datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="microseconds")
        return f"{fmt(lo)} .. {fmt(hi)}"


def source_kind(path: Path) -> str:
    from .lobster import is_lobster
    name = path.name.lower()
    if name.endswith((".dbn", ".dbn.zst")):
        return "dbn"
    if name.endswith((".parquet", ".pq", ".arrow")):
        return "parquet"
    if is_lobster(path):
        return "lobster"
    raise DataError(path, "unknown format: expected .parquet, .dbn, .dbn.zst or LOBSTER *_orderbook_N.csv")


def expand(spec) -> list[Path]:
    """The data files named by a path, a directory or a glob (LOBSTER message files are companions)."""
    from .lobster import is_lobster
    from .cache import MANIFEST
    spec = str(spec)
    path = Path(spec)
    if (path / MANIFEST).is_file():
        raise DataError(path, "a prepared cache (it holds manifest.json): python -m foxc.train --data reads one; "
                              "give the data files here")
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        found = [p for p in found if p.name.lower().endswith((".parquet", ".pq", ".arrow", ".dbn", ".dbn.zst"))
                 or is_lobster(p)]
        if not found:
            raise DataError(path, "no data files in the directory (.parquet, .dbn, .dbn.zst, *_orderbook_N.csv)")
        return found
    if any(ch in spec for ch in "*?["):
        found = sorted(Path(p) for p in globmod.glob(spec) if Path(p).is_file() and "message_" not in Path(p).name)
        if not found:
            raise DataError(spec, "the pattern matches no files")
        return found
    if not path.exists():
        raise DataError(path, "no such file or directory")
    return [path]


TICK_SAMPLE = 200_000  # rows the tick is inferred from, at least


def tick_step(rows: int) -> int:
    """Every how many rows of the data the tick is inferred from."""
    return max(1, rows // TICK_SAMPLE)


def infer_tick(rec: np.ndarray) -> int:
    """The largest price step that divides every observed level price (of every tick_step-th row)."""
    return tick_of(rec[::tick_step(len(rec))])


def tick_of(rows: np.ndarray) -> int:
    """The largest price step that divides every level price of `rows`."""
    px = np.concatenate([rows["bid_px"].ravel(), rows["ask_px"].ravel()])
    px = px[px != PRICE_UNDEF]
    if len(px) < 2:
        return 1
    return int(np.gcd.reduce(np.abs(px - px[0]))) or 1  # gcd(0, d) = d; all equal: 0


def finish(rec: np.ndarray) -> np.ndarray:
    """prev_ts_ns within each segment; `segment` must already be set."""
    rec["prev_ts_ns"] = rec["ts_ns"]
    if len(rec) > 1:
        same = rec["segment"][1:] == rec["segment"][:-1]
        rec["prev_ts_ns"][1:] = np.where(same, rec["ts_ns"][:-1], rec["ts_ns"][1:])
    return rec


def from_records(rec: np.ndarray, source: str, instrument: str = "", tick: int | None = None,
                 report: ValidationReport | None = None) -> MarketData:
    """MarketData for records already validated (segments set); fills prev_ts_ns."""
    finish(rec)
    return MarketData(rec, instrument, int(rec["instrument_id"][0]) if len(rec) else 0, source, [],
                      tick or infer_tick(rec), report or ValidationReport())


def load(spec, config: ValidationConfig | None = None, tick: int | None = None) -> MarketData:
    """Read, validate and concatenate the files named by `spec`; raises DataError on a bad file.

    Each file is streamed chunk by chunk (foxc.data.stream); only the kept rows are held."""
    from .stream import FileStream
    files = []
    for path in expand(spec):
        stream = FileStream(path, config)
        files.append((list(stream), stream.summary()))
    report = report_of([summary for _, summary in files])
    files = in_time_order(files, key=lambda f: f[1])
    records = np.empty(sum(summary.rows for _, summary in files), SNAPSHOT_DTYPE)
    row = 0
    for segment, (chunks, _) in enumerate(files):
        for chunk in chunks:
            records[row:row + len(chunk)] = chunk
            records["segment"][row:row + len(chunk)] = segment
            row += len(chunk)
        chunks.clear()
    return market_data(records, [summary for _, summary in files], tick or infer_tick(records), report)


def in_time_order(items: list, key=lambda summary: summary) -> list:
    """Files (FileSummary, or items holding one) as segments: by first kept time, then by path."""
    return sorted(items, key=lambda item: (key(item).first_ts, key(item).path))


def report_of(summaries) -> ValidationReport:
    """The validation report of files given in the order they were named."""
    report = ValidationReport()
    for s in summaries:
        report.add(s.path, s.rows_read, s.skipped, s.notes)
    return report


def market_data(records: np.ndarray, segments, tick: int, report: ValidationReport) -> MarketData:
    """MarketData of records whose segments are the files `segments` (FileSummary, in segment order)."""
    names = sorted({s.instrument for s in segments if s.instrument})
    ids = {s.instrument_id for s in segments}
    return MarketData(records, ",".join(names), ids.pop() if len(ids) == 1 else 0,
                      "+".join(sorted({s.kind for s in segments})), [s.path for s in segments], tick, report)


def validate_summary(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in skipped.items() if n) or "none"
