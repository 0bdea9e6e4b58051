"""Market data in memory: the records of a run (segments, tick, where they came from) and how they are put
together from validated files (`foxc.data.source` reads the files; a prepared cache, `foxc.data.cache`, and
the synthetic markets build the same type)."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from .record import PRICE_UNDEF
from .validate import ValidationReport


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

    def segment_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) record index per segment, end exclusive."""
        seg = self.records["segment"]
        starts = np.searchsorted(seg, np.arange(self.n_segments), side="left")
        ends = np.searchsorted(seg, np.arange(self.n_segments), side="right")
        return starts.astype(np.int64), ends.astype(np.int64)

    def describe_time(self) -> str:
        fmt = lambda ns: datetime.fromtimestamp(int(ns) / 1e9, timezone.utc).isoformat(timespec="microseconds")
        return f"{fmt(self.records['ts_ns'][0])} .. {fmt(self.records['ts_ns'][-1])}"


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
