"""Where a walk-forward cuts its data: F+1 consecutive windows (at rows or segment boundaries), or
rolling folds by calendar day, planned from the segments alone (their first rows and times).

    segs = Segments.of_records(records)        # or Segments.of_manifest(cache manifest): no records read
    bounds, how = split_bounds(segs, k, "auto")                 # k windows [start, stop) of rows
    days, folds = day_folds(segs, train_days=5, eval_days=1)    # FoldWindows: train/eval rows and dates

A day is a UTC date of the snapshots' timestamps, and only a date that holds data counts (a weekend
without snapshots is no day). A segment (a data file, or each contract of one that rolls; a shard of
a cache) belongs whole to the day of its first snapshot: a fold reads whole segments, so one that
runs past midnight stays with the day it began on, and one file holding a week is one day (a week
that rolls, two: the next contract's begins on the day of the roll).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from ..data.record import segment_runs
from ..data.source import no_room
from ..data.validate import DataError

SPLITS = ("auto", "segments", "rows")
MIN_WINDOW_ROWS = 2
DAY_NS = 86_400 * 10**9
CALENDAR_FROM_NS = (date(1980, 1, 1) - date(1970, 1, 1)).days * DAY_NS  # earlier times are not dates


@dataclass(frozen=True)
class Segments:
    starts: np.ndarray     # int64: each segment's first row
    first_ts: np.ndarray   # int64: each segment's first ts_ns
    last_ts: np.ndarray    # int64: each segment's last ts_ns
    rows: int              # of all segments
    names: list[str]       # each segment's file (or shard), for messages

    @classmethod
    def of_records(cls, records: np.ndarray, files: list[str] | None = None) -> "Segments":
        first, last = segment_runs(records["segment"])
        ts = records["ts_ns"]
        # files name the segments where each is one (a file whose instrument_id changes is several)
        names = list(files) if files and len(files) == len(first) else [f"segment {k}" for k in range(len(first))]
        return cls(first, ts[first].astype(np.int64), ts[last].astype(np.int64), len(records), names)

    @classmethod
    def of_manifest(cls, manifest: dict) -> "Segments":
        shards = manifest["shards"]
        rows = np.array([s["rows"] for s in shards], np.int64)
        return cls(np.r_[0, np.cumsum(rows)[:-1]].astype(np.int64),
                   np.array([s["first_ts_ns"] for s in shards], np.int64),
                   np.array([s["last_ts_ns"] for s in shards], np.int64), int(rows.sum()),
                   [f"shard {k} ({s['sources'][0]['path']})" for k, s in enumerate(shards)])

    def describe(self, start: int, stop: int) -> dict:
        """What describe_window says of rows [start, stop), from the segments alone (cut at their boundaries)."""
        a, b = np.searchsorted(self.starts, [start, stop])
        if a >= len(self.starts) or self.starts[a] != start or (b < len(self.starts) and self.starts[b] != stop):
            raise ValueError(f"rows [{start}, {stop}) are not cut at segment boundaries")
        return {"start": int(start), "stop": int(stop), "rows": int(stop - start), "first_ts_ns": int(self.first_ts[a]),
                "last_ts_ns": int(self.last_ts[b - 1]), "segments": int(b - a)}


def split_bounds(segs: Segments, k: int, how: str = "auto") -> tuple[list[tuple[int, int]], str]:
    """k consecutive [start, stop) windows covering the rows, and whether cut at 'segments' or 'rows'.

    'segments' cuts only where a segment begins (the cut nearest each i·n/k that leaves every
    window non-empty; needs at least k segments); 'rows' cuts at round(i·n/k) wherever it falls;
    'auto' takes segments when there are at least k of them, else rows."""
    n = segs.rows
    if k < 2:
        raise ValueError(f"need at least 2 windows (1 fold), got {k}")
    if how not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got '{how}'")
    seg_starts = segs.starts[1:]  # where a new segment begins (row 0 excluded)
    if how == "auto":
        how = "segments" if len(seg_starts) + 1 >= k else "rows"
    if how == "segments":
        if len(seg_starts) + 1 < k:
            raise ValueError(f"{len(seg_starts) + 1} segments cannot make {k} windows at segment boundaries: at most "
                             f"{len(seg_starts)} folds")  # fold i trains on window i and evaluates on i + 1
        cuts, lo = [], 0
        for i in range(1, k):
            # keep k-1-i boundaries after this cut for the later windows
            options = seg_starts[lo:len(seg_starts) - (k - 1 - i)]
            j = lo + int(np.abs(options - i * n / k).argmin())
            cuts.append(int(seg_starts[j]))
            lo = j + 1
    else:
        cuts = [int(round(i * n / k)) for i in range(1, k)]
    bounds = list(zip([0] + cuts, cuts + [n]))
    if any(b - a < MIN_WINDOW_ROWS for a, b in bounds):
        raise ValueError(f"{n} rows cannot make {k} windows of at least {MIN_WINDOW_ROWS} rows")
    return bounds, how


def split_windows(records: np.ndarray, k: int, how: str = "auto") -> tuple[list[tuple[int, int]], str]:
    """split_bounds of the records' segments."""
    return split_bounds(Segments.of_records(records), k, how)


@dataclass(frozen=True)
class FoldWindows:
    train: tuple[int, int]                    # [start, stop) rows
    eval: tuple[int, int]
    train_days: tuple[str, str] | None = None  # folds by dates: first and last UTC date, ISO (YYYY-MM-DD)
    eval_days: tuple[str, str] | None = None


def iso_day(day: int) -> str:
    return (date(1970, 1, 1) + timedelta(days=int(day))).isoformat()


def day_folds(segs: Segments, train_days: int, eval_days: int,
              step_days: int | None = None) -> tuple[list[str], list[FoldWindows]]:
    """(the dates that hold data, the folds): fold i trains on days [i·S, i·S + N) and evaluates on
    the next M (N = train_days, M = eval_days, S = step_days, default M), as long as they last.

    Raises ValueError for a setting below 1, timestamps that are not calendar times (before 1980:
    times counted from midnight or from 0) and data of fewer than N + M days."""
    if eval_days is None:
        raise ValueError("--train-days needs --eval-days")
    step_days = eval_days if step_days is None else step_days
    for flag, value in (("--train-days", train_days), ("--eval-days", eval_days), ("--step-days", step_days)):
        if value < 1:
            raise ValueError(f"{flag} must be >= 1, got {value}")
    early = np.flatnonzero(segs.first_ts < CALENDAR_FROM_NS)
    if early.size:
        k = int(early[0])
        raise ValueError(f"{segs.names[k]} begins at ts_ns {int(segs.first_ts[k])} "
                         f"({iso_day(segs.first_ts[k] // DAY_NS)}): "
                         "its timestamps are not calendar times (before 1980), so it has no date; folds by days need "
                         "dated data (LOBSTER files named TICKER_YYYY-MM-DD_...), else use --folds")
    day = segs.first_ts // DAY_NS
    if np.any(np.diff(day) < 0):
        raise ValueError("segments are not in time order")
    days, first = np.unique(day, return_index=True)  # in order, so each day's segments are consecutive
    need = train_days + eval_days
    if len(days) < need:
        raise ValueError(f"the data holds {len(days)} day(s) with snapshots ({iso_day(days[0])} .. "
                         f"{iso_day(days[-1])}); --train-days {train_days} --eval-days {eval_days} need at least "
                         f"{need}")
    begin = [int(r) for r in segs.starts[first]] + [segs.rows]  # the first row of each day, and the end
    folds = []
    for i in range((len(days) - need) // step_days + 1):
        a = i * step_days
        b, c = a + train_days, a + need
        folds.append(FoldWindows((begin[a], begin[b]), (begin[b], begin[c]), (iso_day(days[a]), iso_day(days[b - 1])),
                                 (iso_day(days[b]), iso_day(days[c - 1]))))
    return [iso_day(d) for d in days], folds


def no_room_in_fold(doing: str, why: str, need: str, source: str, config: dict, days: str,
                    smaller: str = "") -> DataError:
    """Out of memory `doing` in a fold: what it needed, and the remedy (`why` it helps) for the walk-forward's data:
    synthetic rows, a prepared cache (`days`: the flag of the window's dates), or data files (held whole: a cache);
    `smaller` ("FLAGS, or "), the flags that shrink what the fold makes of its window, first, then a shorter window."""
    window = ("fewer --synthetic-rows, or more --folds" if source == "synthetic" else
              f"more --folds, or fewer {days}" if config.get("cache") or smaller else "")
    return no_room(doing, "DATA", need, window and f"give {smaller}{window} ({why})")
