"""Loading market data: one file, a directory or a glob, validated and concatenated in time order.

    data = load("data/*.dbn.zst")          # MarketData
    data.records, data.tick, data.report.summary()

Each file is its own segment (windows and labels never cross one). Files are ordered by
their first kept timestamp.
"""
from __future__ import annotations

import glob as globmod
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from . import validate
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
    spec = str(spec)
    path = Path(spec)
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


def read_file(path: Path):
    kind = source_kind(path)
    try:
        if kind == "dbn":
            from .dbn import read_dbn
            return kind, read_dbn(path)
        if kind == "parquet":
            from .parquet import read_parquet
            return kind, read_parquet(path)
        from .lobster import read_lobster
        return kind, read_lobster(path)
    except (OSError, MemoryError) as e:
        raise DataError(path, f"cannot read ({e.__class__.__name__}: {e})") from None


def infer_tick(rec: np.ndarray, sample: int = 200_000) -> int:
    """The largest price step that divides every observed level price (from a sample of rows)."""
    step = max(1, len(rec) // sample)
    px = np.concatenate([rec["bid_px"][::step].ravel(), rec["ask_px"][::step].ravel()])
    px = px[px != PRICE_UNDEF]
    if len(px) < 2:
        return 1
    diffs = np.unique(np.abs(px - px[0]))
    diffs = diffs[diffs > 0]
    return int(np.gcd.reduce(diffs)) if len(diffs) else 1


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
    """Read, validate and concatenate the files named by `spec`; raises DataError on a bad file."""
    config = config or ValidationConfig()
    report = ValidationReport()
    parts, kinds, instruments, instrument_ids = [], set(), [], []
    for path in expand(spec):
        kind, (rec, bad_float, meta) = read_file(path)
        kept, skipped = validate.apply(rec, bad_float, config)
        report.add(path, len(rec), skipped, meta["notes"])
        if len(kept) == 0:
            raise DataError(path, f"no usable rows: all {len(rec)} skipped ({validate_summary(skipped)})")
        kinds.add(kind)
        instruments.append(meta["instrument"])
        instrument_ids.append(meta["instrument_id"])
        parts.append((int(kept["ts_ns"][0]), str(path), kept))
    parts.sort(key=lambda p: (p[0], p[1]))
    total = sum(len(p[2]) for p in parts)
    records = np.empty(total, SNAPSHOT_DTYPE)
    row = 0
    for segment, (_, _, kept) in enumerate(parts):
        records[row:row + len(kept)] = kept
        records["segment"][row:row + len(kept)] = segment
        row += len(kept)
    finish(records)
    names = sorted({i for i in instruments if i})
    return MarketData(records, ",".join(names), int(instrument_ids[0]) if len(set(instrument_ids)) == 1 else 0,
                      "+".join(sorted(kinds)), [p[1] for p in parts], tick or infer_tick(records), report)


def validate_summary(skipped: dict[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in skipped.items() if n) or "none"
