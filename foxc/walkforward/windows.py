"""Where a walk-forward cuts its data, planned from its segments alone (their first rows and times): F+1
consecutive windows (at rows or segment boundaries), or rolling folds by calendar day; and the data it cuts.

A day is a UTC date that holds snapshots (a weekend without any is no day). A segment (a data file, each contract
of one that rolls, a shard of a cache) belongs whole to the day of its first snapshot: a fold reads whole segments.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import numpy as np

from ..data.cache import SELECTION, check_selection, is_cache, read_manifest
from ..data.markets import market as named_market
from ..data.record import segment_runs
from ..data.source import load
from ..errors import UserError
from ..trainer.heldout import synthetic_rows

SPLITS = ("auto", "segments", "rows")
MIN_WINDOW_ROWS = 2
DAY_NS = 86_400 * 10**9
CALENDAR_FROM_NS = (date(1980, 1, 1) - date(1970, 1, 1)).days * DAY_NS  # earlier times are not dates


class CutError(UserError):
    """Data that cannot be cut as asked; the walk-forward names the flags that asked."""


@dataclass
class CachedData:
    """A prepared cache as the walk-forward's own process sees it: its manifest, never its shards (each fold reads
    its own)."""
    path: Path
    manifest: dict

    @property
    def tick(self) -> int:
        return int(self.manifest["tick"])

    @property
    def source(self) -> str:  # as open_cache's MarketData names it: the files' formats
        return "+".join(sorted({s["read"]["kind"] for s in self.manifest["shards"]}))

    def describe(self) -> dict:
        shards = self.manifest["shards"]
        return {"source": str(self.path), "cache": True, "sha256": self.manifest["sha256"],
                **({SELECTION: self.manifest[SELECTION]} if SELECTION in self.manifest else {}),
                "files": list(dict.fromkeys(s["sources"][0]["path"] for s in shards)),  # as MarketData's: each once
                "instrument": ",".join(sorted({s["read"]["instrument"] for s in shards} - {""})),
                "rows": int(self.manifest["rows"]), "tick": self.tick}


def load_data(spec: str, rows: int, seed: int, segments: int, market: str = "default", instrument: str | None = None,
              tick: int | None = None):
    """`spec` 'synthetic': `rows` of the named market; a prepared cache: its manifest (CachedData), refused unless
    prepared with `instrument` and in `tick` when given; else a file, directory or glob (MarketData)."""
    if is_cache(spec):
        manifest = read_manifest(Path(spec))
        check_selection(Path(spec), manifest, instrument, tick)
        return CachedData(Path(spec), manifest)
    if spec == "synthetic":
        return synthetic_rows(rows, "--synthetic-rows", seed=seed, params=named_market(market).params,
                              n_segments=segments)
    return load(spec, tick=tick, instrument=instrument)


@dataclass(frozen=True)
class Segments:
    starts: np.ndarray     # int64: each segment's first row
    first_ts: np.ndarray   # int64: each segment's first ts_ns
    last_ts: np.ndarray    # int64: each segment's last ts_ns
    rows: int              # of all segments
    names: list[str]       # each segment's file (or shard), for messages

    @classmethod
    def of(cls, data) -> "Segments":
        """Of MarketData's records, or of a cache's manifest (no records read)."""
        if isinstance(data, CachedData):
            shards = data.manifest["shards"]
            rows = np.array([s["rows"] for s in shards], np.int64)
            return cls(np.r_[0, np.cumsum(rows)[:-1]].astype(np.int64),
                       np.array([s["first_ts_ns"] for s in shards], np.int64),
                       np.array([s["last_ts_ns"] for s in shards], np.int64), int(rows.sum()),
                       [f"shard {k} ({s['sources'][0]['path']})" for k, s in enumerate(shards)])
        return cls.of_records(data.records, data.files)

    @classmethod
    def of_records(cls, records: np.ndarray, files: list[str] | None = None) -> "Segments":
        first, last = segment_runs(records["segment"])
        ts = records["ts_ns"]
        # files name the segments where each is one (a file whose instrument_id changes is several)
        names = list(files) if files and len(files) == len(first) else [f"segment {k}" for k in range(len(first))]
        return cls(first, ts[first].astype(np.int64), ts[last].astype(np.int64), len(records), names)

    def describe(self, start: int, stop: int) -> dict:
        """What describe_window says of rows [start, stop), from the segments alone (cut at their boundaries)."""
        a, b = np.searchsorted(self.starts, [start, stop])
        assert self.starts[a] == start and (b == len(self.starts) or self.starts[b] == stop), (start, stop)
        return {"start": int(start), "stop": int(stop), "rows": int(stop - start), "first_ts_ns": int(self.first_ts[a]),
                "last_ts_ns": int(self.last_ts[b - 1]), "segments": int(b - a)}


@dataclass(frozen=True)
class FoldWindows:
    train: tuple[int, int]                    # [start, stop) rows
    eval: tuple[int, int]
    train_days: tuple[str, str] | None = None  # folds by dates: first and last UTC date, ISO (YYYY-MM-DD)
    eval_days: tuple[str, str] | None = None


def split_bounds(segs: Segments, k: int, how: str = "auto") -> tuple[list[tuple[int, int]], str]:
    """k consecutive [start, stop) windows covering the rows, and whether cut at 'segments' or 'rows': 'segments'
    cuts only where a segment begins (the cut nearest each i·n/k that leaves every window non-empty), 'rows' at
    round(i·n/k), 'auto' at segments when there are at least k."""
    assert k >= 2 and how in SPLITS, (k, how)
    n = segs.rows
    seg_starts = segs.starts[1:]  # where a new segment begins (row 0 excluded)
    if how == "auto":
        how = "segments" if len(seg_starts) + 1 >= k else "rows"
    if how == "segments":
        if len(seg_starts) + 1 < k:
            raise CutError(f"{len(seg_starts) + 1} segments cannot make {k} windows at segment boundaries: at most "
                           f"{len(seg_starts)} folds")  # fold i trains on window i and evaluates on i + 1
        cuts, lo = [], 0
        for i in range(1, k):
            options = seg_starts[lo:len(seg_starts) - (k - 1 - i)]  # keep k-1-i boundaries for the later windows
            j = lo + int(np.abs(options - i * n / k).argmin())
            cuts.append(int(seg_starts[j]))
            lo = j + 1
    else:
        cuts = [int(round(i * n / k)) for i in range(1, k)]
    bounds = list(zip([0] + cuts, cuts + [n]))
    if any(b - a < MIN_WINDOW_ROWS for a, b in bounds):
        raise CutError(f"{n} rows cannot make {k} windows of at least {MIN_WINDOW_ROWS} rows")
    return bounds, how


def split_windows(records: np.ndarray, k: int, how: str = "auto") -> tuple[list[tuple[int, int]], str]:
    """split_bounds of the records' segments."""
    return split_bounds(Segments.of_records(records), k, how)


def iso_day(day: int) -> str:
    return (date(1970, 1, 1) + timedelta(days=int(day))).isoformat()


def day_folds(segs: Segments, train_days: int, eval_days: int,
              step_days: int | None = None) -> tuple[list[str], list[FoldWindows]]:
    """(the dates that hold data, the folds): fold i trains on days [i·S, i·S + N) and evaluates on the next M
    (N = train_days, M = eval_days, S = step_days, default M), as long as they last. A CutError for timestamps that
    are no calendar times (before 1980) and data of fewer than N + M days."""
    step_days = eval_days if step_days is None else step_days
    assert min(train_days, eval_days, step_days) >= 1, (train_days, eval_days, step_days)
    early = np.flatnonzero(segs.first_ts < CALENDAR_FROM_NS)
    if early.size:
        k = int(early[0])
        raise CutError(f"{segs.names[k]} begins at ts_ns {int(segs.first_ts[k])} ({iso_day(segs.first_ts[k] // DAY_NS)}):"
                       " its timestamps are not calendar times (before 1980), so it has no date; folds by days need "
                       "dated data (LOBSTER files named TICKER_YYYY-MM-DD_...), else use --folds")
    day = segs.first_ts // DAY_NS
    if np.any(np.diff(day) < 0):
        raise CutError("segments are not in time order")
    days, first = np.unique(day, return_index=True)  # in order, so each day's segments are consecutive
    need = train_days + eval_days
    if len(days) < need:
        raise CutError(f"the data holds {len(days)} day(s) with snapshots ({iso_day(days[0])} .. "
                       f"{iso_day(days[-1])}); --train-days {train_days} --eval-days {eval_days} need at least {need}")
    begin = [int(r) for r in segs.starts[first]] + [segs.rows]  # the first row of each day, and the end
    folds = []
    for i in range((len(days) - need) // step_days + 1):
        a = i * step_days
        b, c = a + train_days, a + need
        folds.append(FoldWindows((begin[a], begin[b]), (begin[b], begin[c]), (iso_day(days[a]), iso_day(days[b - 1])),
                                 (iso_day(days[b]), iso_day(days[c - 1]))))
    return [iso_day(d) for d in days], folds


def plan_folds(segs: Segments, *, folds: int | None = None, split: str = "auto", train_days: int | None = None,
               eval_days: int | None = None, step_days: int | None = None,
               cached: bool = False) -> tuple[list[FoldWindows], dict]:
    """Each fold's windows, and what the report says of the cut: F+1 consecutive windows (`folds`), or rolling folds
    by dates. A cache is cut only where a shard begins. A CutError says why the data cannot be cut so."""
    if train_days is not None:
        days, plan = day_folds(segs, train_days, eval_days, step_days)
        return plan, {"split": "days", "days": {"train": train_days, "eval": eval_days,
                                                "step": step_days or eval_days, "dates": days}}
    assert folds is not None
    if cached and split == "rows":
        raise CutError("a cache is cut where its shards begin (--split segments) or by dates (--train-days), "
                       "not at rows")
    bounds, how = split_bounds(segs, folds + 1, "segments" if cached else split)
    return [FoldWindows(bounds[i], bounds[i + 1]) for i in range(folds)], {"split": how}
