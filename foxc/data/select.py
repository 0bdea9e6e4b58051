"""The pipeline's selection: `--instrument ID|SYMBOL` keeps one instrument's rows of a file that holds several.

A parent symbol's download (ES.FUT) interleaves every contract's book; read as one book it would make a book that
never was, so FileStream refuses it. `--instrument` keeps an instrument_id's rows, or a symbol's by the ids the file
maps it to (a DBN file's symbol mappings, its metadata's or a live stream's records; a Parquet `symbol` column).
A symbol mapped to several ids (ES.c.0 rolling) keeps each, a segment each; where another symbol maps one of its
ids at other times, the mapping intervals decide its rows (`dated`). A live stream's record maps the rows after it.
Rows are selected before validation; the others are counted per id, never left out without a word. The selection
is part of the data's identity as the instrument_id it kept (`selection_id`: ESM4 and 5482 are one where the files
map one to the other): a cache records it and refuses another (cache.check_selection).
"""
from __future__ import annotations

import argparse
import re

import numpy as np

from .validate import DataError

FLAG = "--instrument"
MAX_ID = 2**32 - 1  # DBN's and Databento Parquet's instrument_id is a u32
SHOWN = 8  # ids named in a message
HELP = ("keep one instrument's rows of files that interleave several (a parent symbol's download, e.g. ES.FUT): an "
        "instrument_id, or a symbol the file maps to ids (DBN symbol mappings, a Parquet symbol column; e.g. ESM4)")


def instrument_arg(text) -> str:
    """--instrument's value (argparse type): an instrument_id's digits without leading zeros, or a symbol."""
    text = str(text).strip()
    if not text:
        raise argparse.ArgumentTypeError("an empty instrument (give an instrument_id, e.g. 5482, or a symbol, e.g. "
                                         "ESM4)")
    if re.fullmatch(r"[+-]?[0-9]+", text):
        if not 0 <= int(text) <= MAX_ID:
            raise argparse.ArgumentTypeError(f"instrument_id {text} is outside 0 to 2^32 - 1 (4294967295)")
        return str(int(text))
    if not text.isprintable() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is neither an instrument_id nor a symbol (a symbol has no spaces)")
    return text


def add_instrument_flag(add):
    """--instrument on a parser (`add`: its add_argument, or the trainer's settings' `add`)."""
    return add(FLAG, type=instrument_arg, metavar="ID", help=HELP)


def selection_id(given: str | None, ids) -> str | None:
    """The selection `given` as the data's identity: the one instrument_id it kept in every file (`ids`), else given."""
    ids = set(ids)
    return str(ids.pop()) if given is not None and len(ids) == 1 and ids != {0} else given


def respelled(a: str | None, b: str | None) -> bool:
    """Whether selections `a` and `b` differ as given yet may keep one instrument (only the files' mappings tell)."""
    return None not in (a, b) and a != b and not (a.isdigit() and b.isdigit())


def map_symbol(meta: dict, symbol: str, iid: int):
    """Record in a reader's `meta` that `symbol` names instrument_id `iid` (an id is named by its first symbol)."""
    ids = meta["symbol_ids"].setdefault(symbol, [])
    if iid not in ids:
        ids.append(iid)
    meta["id_names"].setdefault(iid, symbol)


def symbols_only(meta: dict) -> dict | None:
    """The symbols of a file without instrument_ids by the numbers that stand for them (Parquet); None with ids."""
    return meta["id_names"] if meta.get("instrument_id", 0) is None else None


def dated(mapped: dict | None, symbol: str) -> list[tuple[int, int, int, int]] | None:
    """`symbol`'s mapping intervals (instrument_id, from, to: ns, first row) where another symbol maps one of its ids
    at other times (ES.c.1 holds the contract ES.c.0 rolls to, before the roll); None where its ids alone decide."""
    mapped, ours = mapped or {}, []
    for iid, start, end, _ in sorted(mapped.get(symbol, ())):  # each id's times, adjacent intervals joined
        if ours and ours[-1][0] == iid and start <= ours[-1][2]:
            ours[-1][2] = max(ours[-1][2], end)
        else:
            ours.append([iid, start, end])
    ids = {iid for iid, _, _ in ours}
    foreign = any(iid in ids and not any(i == iid and s <= start and end <= e for i, s, e in ours)
                  for other, spans in mapped.items() if other != symbol for iid, start, end, _ in spans)
    return mapped[symbol] if foreign else None


def ids_text(counts: dict, each=lambda n: f" ({n:,} row{'s' * (n != 1)})", names: dict | None = None) -> str:
    """'instrument_id 5482 (9 rows), 13615 (8 rows)' (`each` None: ids alone; `names`: 'symbol ESH4, ESM4')."""
    items = [((names or {}).get(iid, iid), n) for iid, n in counts.items()]
    shown = ", ".join(f"{iid}{each(n) if each else ''}" for iid, n in items[:SHOWN])
    more = f", ... ({len(items)} instruments in all)" if len(items) > SHOWN else ""
    return ("instrument_id " if names is None else "symbol ") + shown + more


class Selection:
    """One file's rows of the instrument `given` names, chunk by chunk; the others counted per id."""

    def __init__(self, path, given: str):
        self.path, self.given = path, instrument_arg(given)
        self.symbol = not self.given.isdigit()
        self.ids = [] if self.symbol else [int(self.given)]  # a symbol's: those the file maps it to, as read so far
        self.meta: dict = {}  # the reader's, from the first chunk
        self.spans = None  # a symbol's mapping intervals where they decide its rows (`dated`)
        self.first: dict[int, int] = {}  # a symbol's ids: the first row its mapping records map (-1: the metadata's)
        self.counted = -1  # the DBN mapping intervals known when spans and first were found (a live stream's grow)
        self.read = 0  # rows seen: the index of the next chunk's first
        self.rows = 0  # of the instrument
        self.others: dict[int, int] = {}  # rows left out of each instrument_id (its own: at other times)

    def keep(self, raw: np.ndarray, bad: np.ndarray | None, meta: dict) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows of this chunk that are the instrument's (`raw` itself when all are)."""
        mapped = meta.get("mapped") or {}
        known = sum(map(len, mapped.values()))
        if self.symbol and known != self.counted:  # a historical DBN file's, all at the first chunk; a live one's grow
            self.spans, self.counted, self.first = dated(mapped, self.given), known, {}
            for iid, _, _, row in mapped.get(self.given, ()):
                self.first[iid] = min(row, self.first.get(iid, row))
        self.meta = meta
        if self.symbol:
            self.ids = meta["symbol_ids"].get(self.given, [])
            if not self.ids and any(spans[0][3] < 0 for spans in mapped.values()):  # a historical file's, up front:
                self.finish()  # refused now, not after reading the whole file for nothing
        elif symbols_only(meta) is not None:
            raise DataError(self.path, f"{FLAG} {self.given}: the file has no instrument_id column, only symbols: "
                                       f"give a symbol ({', '.join(meta['symbol_ids'])} so far)")
        ids = raw["instrument_id"]
        if self.spans:
            mine = self._dated(ids, raw["ts_ns"])
        else:
            mine = ids == self.ids[0] if len(self.ids) == 1 else np.isin(ids, self.ids)
            for iid, row in self.first.items():  # not its rows before the record that maps it (in this chunk)
                if row > self.read:
                    mine[:row - self.read] &= ids[:row - self.read] != iid
        self.read += len(raw)
        n = int(np.count_nonzero(mine))
        self.rows += n
        if n == len(raw):
            return raw, bad
        for iid, count in zip(*(x.tolist() for x in np.unique(ids[~mine], return_counts=True))):
            self.others[iid] = self.others.get(iid, 0) + count
        return raw[mine], None if bad is None else bad[mine]

    def _dated(self, ids: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """The rows whose time (ts_recv, Databento's index time) is in an interval of the symbol that maps their id,
        after the record that gave it (the `dbn` crate's TsSymbolMap::get_for_rec; databento's InstrumentMap)."""
        mine = np.zeros(len(ids), bool)
        lo, hi = (int(ts.min()), int(ts.max())) if len(ts) else (0, -1)
        for iid, start, end, row in self.spans:
            if start <= hi and end > lo:
                ours = (ids == iid) & (ts >= start) & (ts < end)
                ours[:max(row - self.read, 0)] = False
                mine |= ours
        return mine

    def known(self, meta: dict):
        """A symbol the file's symbols, read ahead (parquet_symbols), do not name is refused before the rows."""
        if self.symbol and self.given not in meta["symbol_ids"]:
            self.meta = meta
            self.finish()

    @property
    def id(self) -> int:
        """The instrument_id kept: 0 for none, several, or some of its rows only (the mapping decided)."""
        return self.ids[0] if len(self.ids) == 1 and not self.spans and self.ids[0] not in self.others \
            and symbols_only(self.meta) is None else 0

    def what(self) -> str:
        """'instrument_id 5482', 'instrument_id 5482/13615', 'symbol ESM4'."""
        return f"symbol {self.given}" if symbols_only(self.meta) is not None else \
            "instrument_id " + "/".join(map(str, self.ids)) + " on its mapping dates" * bool(self.spans)

    def finish(self):
        """At the end of the file: refused when no row was the instrument's, naming what the file holds."""
        mapped, why = self.meta.get("symbol_ids", {}), f"{FLAG} {self.given}: not an instrument_id, and"
        if self.symbol and not self.ids and mapped:
            names = symbols_only(self.meta) is not None
            listing = ", ".join(s if names else f"{s} to {'/'.join(map(str, i))}"
                                for s, i in list(mapped.items())[:SHOWN])
            more = f", ... ({len(mapped)} symbols in all)" if len(mapped) > SHOWN else ""
            raise DataError(self.path, f"{why} the file's symbols do not name it (they {'are' if names else 'map'} "
                                       f"{listing}{more}): give one of those symbols or an instrument_id")
        if self.symbol and not self.ids:
            raise DataError(self.path, f"{why} the file maps no symbol to an instrument_id (DBN symbol mappings and "
                                       "a Parquet symbol column do): give the instrument_id")
        if self.rows == 0:
            of = f" ({self.given} in its symbol mappings)" if self.symbol else ""
            raise DataError(self.path, f"{FLAG} {self.given}: no row of the file is {self.what()}{of}; it holds "
                                       f"{ids_text(self.others)}")

    def name(self, meta: dict) -> str:
        """The kept instrument's symbol ("" where the file names none); a symbol that rolls: as given."""
        if self.symbol and not self.id:
            return self.given
        return meta["id_names"].get(self.id) or (meta["instrument"] if meta["instrument_id"] == self.id else "")

    @property
    def other_instruments(self) -> dict[str, int]:
        """Rows left out per other instrument_id (as text; the symbol where ids stand for symbols)."""
        names = symbols_only(self.meta) or {}
        return {str(names.get(iid, iid)): n for iid, n in sorted(self.others.items())}
