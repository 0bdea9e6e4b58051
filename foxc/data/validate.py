"""The pipeline's last step: what is skipped (counted per reason) and what refuses a file.

A row that cannot be a usable book is skipped, counted under the first reason of REASONS it fails; a file that
cannot be data at all is a DataError naming the file, the row or column, and why. Nothing is dropped silently.
A reader's flags travel beside its records: a bool mask is `nan_or_inf`, an integer array a code of REASONS
(0: none) for what a record cannot hold (a size below zero); a flagged row is skipped under its flag. Time order,
the one rule across rows, carries the latest time into the next chunk: a file split anywhere counts as one read
whole. A row's trade prices are book prices to the rules of price (nonpositive_price, price_out_of_range); the
trades of a skipped row happened all the same: they go into the next kept row of its instrument (merge_trades),
across chunks, unless a trade rule refused them.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import UserError
from ..numbers import finite
from .record import PRICE_SCALE, PRICE_UNDEF, empty_snapshots

SKIP_REASONS = (
    "nan_or_inf",          # a NaN or infinite price or size in a float source
    "empty_book",          # no bid and no ask at level 0
    "one_sided",           # one side empty at level 0
    "nonpositive_price",   # a non-empty level priced at or below zero
    "price_out_of_range",  # a non-empty level outside [min_price, max_price]
    "crossed",             # best bid above best ask
    "locked",              # best bid equal to best ask
    "unsorted_levels",     # bids not strictly falling or asks not strictly rising with depth
    "trade_volume",        # a side's volume at its extreme trade price above its total, or a volume without a price
    "non_monotonic_ts",    # an event time earlier than the previous kept row's
)
FLAGGED_REASONS = (  # found by a reader in the file's values; a record cannot show them
    "negative_size",       # a size (or order count) below zero at a priced level: a record's are unsigned
)
REASONS = SKIP_REASONS + FLAGGED_REASONS  # skip_reasons' code of each: 1 + its index
NEGATIVE_SIZE = REASONS.index("negative_size") + 1
TIME_ORDER = REASONS.index("non_monotonic_ts") + 1
NO_TIME_YET = np.iinfo(np.int64).min
VALIDATION_JSON = "data_validation.json"  # the report's file in a run's directory


class DataError(UserError):
    """A file that cannot be read as market data; str() is the one line shown to the user."""

    def __init__(self, path, reason: str, row: int | None = None, column: str | None = None):
        where = str(path) + (f", row {row}" if row is not None else "") + \
            (f", column '{column}'" if column is not None else "")
        super().__init__(f"{where}: {reason}")
        self.path, self.row, self.column, self.reason = str(path), row, column, reason

    def __reduce__(self):  # crosses process boundaries intact (foxc.data prepare's workers)
        return DataError, (self.path, self.reason, self.row, self.column)


@dataclass(frozen=True)
class ValidationConfig:
    """Bounds of a reasonable price, in price (the instrument's own currency)."""

    min_price: float = 1e-6
    max_price: float = 1e7

    def __post_init__(self):
        if not (finite(self.min_price) and finite(self.max_price) and 0 <= self.min_price < self.max_price):
            raise ValueError(f"ValidationConfig: need finite numbers 0 <= min_price < max_price (in price), got "
                             f"min_price {self.min_price!r}, max_price {self.max_price!r}")

    @property
    def min_units(self) -> int:
        return _units(self.min_price)

    @property
    def max_units(self) -> int:
        return _units(self.max_price)


def _units(price: float) -> int:
    """A price bound in price units; PRICE_UNDEF for one past every int64 price (1e300 is 1e309 units)."""
    units = price * PRICE_SCALE
    return int(round(units)) if units < PRICE_UNDEF else PRICE_UNDEF


@dataclass
class ValidationReport:
    """Rows read and skipped per file and per reason; with --instrument, the other instruments' rows left out."""

    files: dict[str, dict] = field(default_factory=dict)

    def add(self, path, rows_read: int, skipped: dict[str, int], notes: list[str] | None = None,
            other_instruments: dict[str, int] | None = None, instrument_id: int | None = None, instrument: str = ""):
        """`other_instruments`: rows left out by --instrument (None: no selection) per other id (or symbol), which
        kept `instrument_id`'s (0: a symbol's several ids, or a file without ids), named `instrument`."""
        self.files[str(path)] = {"rows_read": int(rows_read),
                                 "rows_kept": int(rows_read - sum(skipped.values())),
                                 "skipped": {k: int(v) for k, v in skipped.items() if v},
                                 "notes": list(notes or [])}
        if other_instruments is not None:
            self.files[str(path)] |= {"instrument_id": int(instrument_id), "instrument": instrument,
                                      "other_instruments": {k: int(n) for k, n in other_instruments.items()}}

    @property
    def rows_read(self) -> int:
        return sum(f["rows_read"] for f in self.files.values())

    @property
    def rows_kept(self) -> int:
        return sum(f["rows_kept"] for f in self.files.values())

    @property
    def rows_other(self) -> int | None:
        """Rows of other instruments left out by --instrument; None when no file was read with it."""
        selected = [f for f in self.files.values() if "other_instruments" in f]
        return sum(sum(f["other_instruments"].values()) for f in selected) if selected else None

    def skipped(self) -> dict[str, int]:
        total = {r: 0 for r in REASONS}
        for f in self.files.values():
            for reason, n in f["skipped"].items():
                total[reason] = total.get(reason, 0) + n
        return {r: n for r, n in total.items() if n}

    def most_skipped(self) -> str | None:
        """What validation skipped and why, to lead an error, when it skipped most rows; else None."""
        skipped = self.rows_read - self.rows_kept
        if skipped <= self.rows_kept:
            return None
        why = ", ".join(f"{n:,} {reason}" for reason, n in self.skipped().items())
        return f"validation skipped {skipped:,} of its {self.rows_read:,} snapshots ({why})"

    def summary(self) -> str:
        other = self.rows_other
        lines = [f"validation: {self.rows_read} rows read, {self.rows_kept} kept, "
                 f"{self.rows_read - self.rows_kept} skipped in {len(self.files)} file(s)"
                 + (f"; {other} rows of other instruments left out (--instrument)" if other is not None else "")]
        lines += [f"  skipped {n:>10}  {reason}" for reason, n in self.skipped().items()]
        for path, f in self.files.items():
            if "other_instruments" in f:
                left = ", ".join(f"{iid} ({n})" for iid, n in f["other_instruments"].items())
                kind = "instrument_id" if all(k.isdigit() for k in f["other_instruments"]) else "symbol"
                kept = f"instrument_id {f['instrument_id']}" if f["instrument_id"] else f.get("instrument") or "?"
                lines.append(f"  instrument {path}: {kept} kept; rows of other instruments left out: "
                             f"{f'{kind} {left}' if left else 'none'}")
            lines += [f"  note {path}: {note}" for note in f["notes"]]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        other = self.rows_other
        return {"rows_read": self.rows_read, "rows_kept": self.rows_kept, "skipped": self.skipped(),
                **({"rows_other_instruments": other} if other is not None else {}), "files": self.files}

    def write_json(self, run_dir, name: str = VALIDATION_JSON) -> Path:
        path = Path(run_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def skip_reasons(rec: np.ndarray, flags: np.ndarray | None, cfg: ValidationConfig,
                 latest_ts: int = NO_TIME_YET) -> np.ndarray:
    """Per row: 0 when kept, else 1 + the index in REASONS of the first reason it fails (`latest_ts`: the bar)."""
    code = np.zeros(len(rec), np.uint8)
    flags = None if flags is None else np.asarray(flags)
    bad_float = None if flags is None else flags == 1  # the first reason, nan_or_inf (a bool mask's True)
    whole = _whole_books(rec, bad_float, cfg)
    if whole is None or not whole.all():  # the rest, rule by rule
        rest = slice(None) if whole is None else np.flatnonzero(~whole)
        code[rest] = _book_reasons(rec[rest], None if bad_float is None else bad_float[rest], cfg)
    if flags is not None and flags.dtype != bool:  # a reader's other reasons: before every rule of the book
        flagged = np.flatnonzero(flags > 1)
        code[flagged] = flags[flagged]
    ok = np.flatnonzero(code == 0)  # time order among rows that pass everything else
    if len(ok):
        ts = rec["ts_ns"][ok]
        prior_max = np.maximum.accumulate(np.concatenate([[latest_ts], ts[:-1]]))
        code[ok[ts < prior_max]] = TIME_ORDER
    return code


def _whole_books(rec: np.ndarray, bad_float: np.ndarray | None, cfg: ValidationConfig) -> np.ndarray | None:
    """Rows that pass every book rule for certain (the common row, in a few passes): both sides' levels in range
    and strictly moving away from an uncrossed touch; None when the bounds let an empty or non-positive level pass
    these comparisons (then every row takes _book_reasons)."""
    lo, hi = cfg.min_units, cfg.max_units
    if lo < 1 or hi >= PRICE_UNDEF:
        return None
    bid, ask = rec["bid_px"], rec["ask_px"]
    whole = bid[:, 0] < ask[:, 0]  # with ask_9 <= hi < PRICE_UNDEF and the orders below: every level is set
    for lvl in range(bid.shape[1] - 1):
        whole &= bid[:, lvl] > bid[:, lvl + 1]
        whole &= ask[:, lvl] < ask[:, lvl + 1]
    whole &= bid[:, -1] >= lo
    whole &= ask[:, -1] <= hi
    for px, vol, total in TRADE_SIDES:  # lo >= 1 and hi < PRICE_UNDEF: a price in range is set and above 0
        whole &= (rec[vol] == 0) | ((rec[px] >= lo) & (rec[px] <= hi) & (rec[vol] <= rec[total]))
    last = rec["last_px"]
    whole &= (last == PRICE_UNDEF) | ((last >= lo) & (last <= hi))
    if bad_float is not None:
        whole &= ~bad_float
    return whole


def _book_reasons(rec: np.ndarray, bad_float: np.ndarray | None, cfg: ValidationConfig) -> np.ndarray:
    """skip_reasons' codes of every rule but time order, one rule at a time."""
    n = len(rec)
    # contiguous copies: the checks below read each level many times, and a record's fields lie 352 bytes apart
    bid, ask = np.ascontiguousarray(rec["bid_px"]), np.ascontiguousarray(rec["ask_px"])
    bid_set, ask_set = bid != PRICE_UNDEF, ask != PRICE_UNDEF
    lo, hi = cfg.min_units, cfg.max_units
    # an empty level may only be followed by empty levels; set levels strictly move away from the touch
    bid_bad = (bid_set[:, 1:] & ~bid_set[:, :-1]) | (bid_set[:, 1:] & (bid[:, 1:] >= bid[:, :-1]))
    ask_bad = (ask_set[:, 1:] & ~ask_set[:, :-1]) | (ask_set[:, 1:] & (ask[:, 1:] <= ask[:, :-1]))
    nonpositive, out_of_range, volume = trade_checks(rec, lo, hi)
    checks = [bad_float if bad_float is not None else np.zeros(n, bool),  # in the order of SKIP_REASONS
              ~bid_set[:, 0] & ~ask_set[:, 0],
              bid_set[:, 0] != ask_set[:, 0],
              ((bid <= 0) & bid_set).any(1) | ((ask <= 0) & ask_set).any(1) | nonpositive,
              (((bid < lo) | (bid > hi)) & bid_set).any(1) | (((ask < lo) | (ask > hi)) & ask_set).any(1) |
              out_of_range,
              bid[:, 0] > ask[:, 0],
              bid[:, 0] == ask[:, 0],
              bid_bad.any(1) | ask_bad.any(1),
              volume]
    code = np.zeros(n, np.uint8)
    for i in range(len(checks) - 1, -1, -1):  # the earliest reason wins
        code[checks[i]] = i + 1
    return code


TRADE_SIDES = (("sell_lo_px", "sell_lo_vol", "sell_vol"), ("buy_hi_px", "buy_hi_vol", "buy_vol"))


def trade_checks(rec: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, of its trade prices (a side's where its volume there is above 0, last_px where set): one at or below
    zero, one outside [lo, hi] (price units); and a side whose volume at its price is above its total or whose
    volume has no price (PRICE_UNDEF)."""
    last = rec["last_px"]
    last_set = last != PRICE_UNDEF
    nonpositive, out_of_range, volume = last_set & (last <= 0), last_set & ((last < lo) | (last > hi)), \
        np.zeros(len(rec), bool)
    for px, vol, total in TRADE_SIDES:
        traded, price = rec[vol] > 0, rec[px]
        priced = traded & (price != PRICE_UNDEF)
        nonpositive |= priced & (price <= 0)
        out_of_range |= priced & ((price < lo) | (price > hi))
        volume |= (rec[vol] > rec[total]) | (traded & ~priced)
    return nonpositive, out_of_range, volume


def has_trades(rec: np.ndarray) -> np.ndarray:
    """Rows that say a trade happened in their interval (trade_count aside: it counts unpriced trades)."""
    return (rec["last_px"] != PRICE_UNDEF) | (rec["sell_vol"] > 0) | (rec["buy_vol"] > 0)


def merge_trades(into: np.ndarray, group: np.ndarray, src: np.ndarray):
    """Fold the trades of `src` rows (in time order, all before their group's row) into rows into[group]: each side's
    extreme price over them all with the volume at it, the totals summed (at most 2^32 - 1), last_px the latest set;
    trade_count is left as it is (its value is the reader's)."""
    if not len(src):
        return
    targets, group = np.unique(group, return_inverse=True)
    whole_rows, into = into, into[targets]
    rows = np.arange(len(into))
    for (px, vol, total), extreme, none in zip(TRADE_SIDES, (np.minimum, np.maximum),
                                               (PRICE_UNDEF, np.iinfo(np.int64).min)):
        g = np.concatenate([rows, group])
        price = np.concatenate([into[px], src[px]])
        volume = np.concatenate([into[vol], src[vol]]).astype(np.int64)
        g, price, volume = g[volume > 0], price[volume > 0], volume[volume > 0]
        best = np.full(len(into), none, np.int64)
        extreme.at(best, g, price)
        at = np.zeros(len(into), np.int64)
        np.add.at(at, g, np.where(price == best[g], volume, 0))
        whole = into[total].astype(np.int64)
        np.add.at(whole, group, src[total])
        into[px] = np.where(at > 0, best, PRICE_UNDEF)
        into[vol] = np.minimum(at, 2**32 - 1)
        into[total] = np.minimum(whole, 2**32 - 1)
    latest = np.full(len(into), -1, np.int64)
    priced = np.flatnonzero(src["last_px"] != PRICE_UNDEF)
    np.maximum.at(latest, group[priced], priced)
    later = (into["last_px"] == PRICE_UNDEF) & (latest >= 0)
    into["last_px"][later] = src["last_px"][latest[later]]
    whole_rows[targets] = into


class Validator:
    """One file's rows validated chunk by chunk: skips counted per reason, time order carried over."""

    def __init__(self, cfg: ValidationConfig | None = None):
        if cfg is not None and not isinstance(cfg, ValidationConfig):
            raise TypeError(f"config must be a ValidationConfig or None, got a {type(cfg).__name__}")
        self.cfg = cfg or ValidationConfig()
        self.counts = np.zeros(len(REASONS) + 1, np.int64)  # [kept, per reason...]
        self.latest_ts = NO_TIME_YET
        self.pending = empty_snapshots(0)  # skipped rows' trades waiting for their instrument's next kept row: one
        self.waiting = 0                   # row of them all, folded, and how many rows it holds
        self.stranded = 0  # skipped rows whose trades found none (the instrument's or the file's rows ended)

    def keep(self, rec: np.ndarray, flags: np.ndarray | None) -> np.ndarray:
        """The rows of this chunk that are kept (`rec` itself when all are), with the trades of skipped rows."""
        code = skip_reasons(rec, flags, self.cfg, self.latest_ts)
        timed = (code == 0) | (code == TIME_ORDER)  # late rows still raise the bar, as in one pass
        if timed.any():
            self.latest_ts = max(self.latest_ts, int(rec["ts_ns"][timed].max()))
        counts = np.bincount(code, minlength=len(REASONS) + 1)
        self.counts += counts
        kept = rec if counts[0] == len(rec) else rec[code == 0]
        carried = has_trades(rec) & (code != 0) if counts[0] < len(rec) else np.zeros(len(rec), bool)
        if carried.any():
            carried &= ~np.any(trade_checks(rec, self.cfg.min_units, self.cfg.max_units), axis=0)
        if len(self.pending) or carried.any():
            self._carry(np.concatenate([self.pending, rec[carried]]), np.r_[np.full(len(self.pending), -1),
                                                                           np.flatnonzero(carried)],
                        kept, np.flatnonzero(code == 0))
        return kept

    def _carry(self, src: np.ndarray, at: np.ndarray, kept: np.ndarray, kept_at: np.ndarray):
        """Skipped rows' trades (`src`, rows `at` of the chunk, -1 before it) into the next kept row (`kept`, rows
        `kept_at`) where it is of their instrument; those after the last kept row wait for the next chunk's."""
        target = np.searchsorted(kept_at, at)
        inside = target < len(kept)
        ours = np.zeros(len(src), bool)
        ours[inside] = src["instrument_id"][inside] == kept["instrument_id"][target[inside]]
        merge_trades(kept, target[ours], src[ours])
        waiting = ~inside & (src["instrument_id"] == src["instrument_id"][-1])
        rows = np.where(at < 0, self.waiting, 1)  # the rows each of src stands for
        self.stranded += int(rows[~ours & ~waiting].sum())
        self.waiting = int(rows[waiting].sum())
        self.pending = empty_snapshots(1 if self.waiting else 0)
        if self.waiting:
            self.pending["instrument_id"] = src["instrument_id"][-1]
            merge_trades(self.pending, np.zeros(np.count_nonzero(waiting), np.int64), src[waiting])

    def finish(self):
        """At the end of the file: the trades still waiting have no row to go into."""
        self.stranded += self.waiting
        self.pending, self.waiting = empty_snapshots(0), 0

    def trade_notes(self) -> list[str]:
        """Skipped rows' trades that no kept row took (the others went into one, as validation says)."""
        return [f"the trades of {self.stranded:,} skipped row{'s' * (self.stranded != 1)} were left out: no later "
                "row of the instrument was kept"] if self.stranded else []

    @property
    def rows_read(self) -> int:
        return int(self.counts.sum())

    @property
    def rows_kept(self) -> int:
        return int(self.counts[0])

    def skipped(self) -> dict[str, int]:
        return {reason: int(self.counts[i + 1]) for i, reason in enumerate(REASONS)}


def apply(rec: np.ndarray, flags: np.ndarray | None, cfg: ValidationConfig) -> tuple[np.ndarray, dict[str, int]]:
    """The rows kept and the skip count per reason, of records validated in one piece."""
    validator = Validator(cfg)
    kept = validator.keep(rec, flags)
    validator.finish()
    return kept, validator.skipped()
