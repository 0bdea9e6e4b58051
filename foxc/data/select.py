"""One instrument's rows of a file that holds several: `--instrument ID`.

A Databento download of a parent symbol (ES.FUT) interleaves every contract's book in one file: read as one
book, its rows would make a book that never was, so foxc.data.stream refuses such a file. `--instrument ID`
keeps the rows of one instrument_id, or of a raw symbol (ESM4) the file's own metadata maps to exactly one id
(DBN's symbol mappings; Parquet and LOBSTER files map none: give the id there). The rows are selected before
validation, so the validator's counts are the kept instrument's; the other instruments' rows are counted per
id (the report's `other_instruments`), never left out without a word. A file with no row of the instrument is
refused naming the ids it holds.

The selection is part of the data's identity as the instrument_id it kept (`selection_id`: ESM4 and 5482 are
one selection where the files map ESM4 to 5482): a cache records it (its manifest's `instrument_selection`, in its
sha256) and is refused for another selection (foxc.data.cache.check_selection); a run's data sha256 mixes it in
(foxc.trainer.session), so a resume may spell it either way.
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
        "instrument_id, or a raw symbol a DBN file's metadata maps to one id (e.g. ESM4)")


def instrument_arg(text) -> str:
    """--instrument's value as recorded (argparse type): an instrument_id's digits without leading zeros, or a
    symbol."""
    text = str(text).strip()
    if not text:
        raise argparse.ArgumentTypeError("an empty instrument (give an instrument_id, e.g. 5482, or a symbol a DBN "
                                         "file's metadata maps to one, e.g. ESM4)")
    if re.fullmatch(r"[+-]?[0-9]+", text):
        if not 0 <= int(text) <= MAX_ID:
            raise argparse.ArgumentTypeError(f"instrument_id {text} is outside 0 to 2^32 - 1 (4294967295)")
        return str(int(text))
    if not text.isprintable() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is neither an instrument_id nor a symbol (a symbol has no spaces)")
    return text


def add_instrument_flag(add):
    """--instrument on a parser (`add`: its add_argument, or the trainer's settings' `add`): one definition for every
    command that reads data files."""
    return add(FLAG, type=instrument_arg, metavar="ID", help=HELP)


def selection_id(given: str | None, ids) -> str | None:
    """The selection `given` as the data's identity: the instrument_id it kept in every file (`ids`: each file's), so
    that a symbol and its id are one; as given where it kept several (a symbol mapped to other ids in other files)."""
    ids = set(ids)
    return str(ids.pop()) if given is not None and len(ids) == 1 else given


def respelled(a: str | None, b: str | None) -> bool:
    """Whether selections `a` and `b` differ as given yet may keep one instrument (a symbol beside an id or another
    symbol): only the files' symbol mappings tell."""
    return None not in (a, b) and a != b and not (a.isdigit() and b.isdigit())


def ids_text(counts: dict, rows: bool = True) -> str:
    """'instrument_id 5482 (9 rows), 13615 (8 rows)': ids (and their rows), the first SHOWN of them."""
    items = list(counts.items())
    shown = ", ".join(f"{iid} ({n:,} row{'s' * (n != 1)})" if rows else str(iid) for iid, n in items[:SHOWN])
    return "instrument_id " + shown + (f", ... ({len(items)} instruments in all)" if len(items) > SHOWN else "")


class Selection:
    """The rows of one file that are the instrument `given` names, chunk by chunk (FileStream selects them before it
    validates them); the other instruments' rows counted per id."""

    def __init__(self, path, given: str):
        self.path, self.given = path, instrument_arg(given)
        self.symbol = not self.given.isdigit()
        self.id: int | None = None if self.symbol else int(self.given)  # a symbol: resolved at the first chunk
        self.rows = 0  # of the instrument
        self.others: dict[int, int] = {}  # rows of each other instrument_id

    def keep(self, raw: np.ndarray, bad: np.ndarray | None, meta: dict) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows of this chunk that are the instrument's (`raw` itself when all are); `meta`: the reader's, filled
        by the time it yields its first chunk."""
        if self.id is None:
            self.id = self._resolve(meta)
        ids = raw["instrument_id"]
        mine = ids == self.id
        n = int(np.count_nonzero(mine))
        self.rows += n
        if n == len(raw):
            return raw, bad
        for iid, count in zip(*(x.tolist() for x in np.unique(ids[~mine], return_counts=True))):
            self.others[iid] = self.others.get(iid, 0) + count
        return raw[mine], None if bad is None else bad[mine]

    def _resolve(self, meta: dict) -> int:
        """The one instrument_id the file's symbol mappings map the symbol to; refused (naming the mappings) when
        they map it to none or to several."""
        mapped, why = meta["symbol_ids"], f"{FLAG} {self.given}: not an instrument_id, and"
        ids = mapped.get(self.given)
        if ids is None and mapped:
            listing = ", ".join(f"{s} to {'/'.join(map(str, i))}" for s, i in list(mapped.items())[:SHOWN])
            more = f", ... ({len(mapped)} symbols in all)" if len(mapped) > SHOWN else ""
            raise DataError(self.path, f"{why} the file's symbol mappings do not name it (they map {listing}{more}): "
                                       "give one of those symbols or an instrument_id")
        if ids is None:
            how = "its DBN metadata holds no symbol mappings" if "dbn" in meta else \
                "the file maps no symbol to an instrument_id (only a DBN file's metadata does)"
            raise DataError(self.path, f"{why} {how}: give the instrument_id")
        if len(ids) > 1:
            raise DataError(self.path, f"{FLAG} {self.given}: the file's symbol mappings map it to {len(ids)} "
                                       f"instruments ({ids_text(dict.fromkeys(ids), rows=False)}): give one "
                                       "instrument_id (a continuous symbol that rolls from one to the next is read "
                                       f"without {FLAG}: each contract is a segment)")
        return ids[0]

    def finish(self):
        """At the end of the file: refused when no row was the instrument's, naming the ids the file holds."""
        if self.rows == 0:
            what = f"instrument_id {self.id}" + (f" ({self.given} in its symbol mappings)" if self.symbol else "")
            raise DataError(self.path, f"{FLAG} {self.given}: no row of the file is {what}; it holds "
                                       f"{ids_text(self.others)}")

    def name(self, meta: dict) -> str:
        """The kept instrument's symbol, where the file names it ("" where not)."""
        return meta["id_names"].get(self.id) or (meta["instrument"] if meta["instrument_id"] == self.id else "")

    @property
    def other_instruments(self) -> dict[str, int]:
        """Rows left out per other instrument_id (JSON's keys: the id as text), by id."""
        return {str(iid): n for iid, n in sorted(self.others.items())}
