"""LOBSTER values the reader once let through or could not place: a size below zero is a skipped row counted as
`negative_size` (it was clipped to 0 and the row kept), and a value of the wrong type names its row (the refusal
named the file, or the file and the column, only)."""
import json
import re

import numpy as np
import pytest

from data_files import write_lobster
from foxc.data import lobster
from foxc.data.record import PRICE_UNDEF
from foxc.data.source import load
from foxc.data.synthetic import generate
from foxc.data.validate import DataError


def records(n=400, seed=6):
    rec = generate(n, seed=seed)
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(n) * 1_000_000
    rec["ask_px"][n // 2, 4:] = PRICE_UNDEF  # a thin book: its empty levels carry LOBSTER's dummy prices
    rec["ask_sz"][n // 2, 4:] = 0
    return rec


def edit(path, row: int, column: int, value: str):
    """The field `column` (from 1) of row `row` (from 1) of a CSV set to `value`, as written."""
    lines = path.read_text().splitlines()
    fields = lines[row - 1].split(",")
    fields[column - 1] = value
    lines[row - 1] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")


def test_a_negative_size_is_a_skipped_row_counted_as_such(tmp_path):
    rec = records()
    book = write_lobster(tmp_path, rec, 10)
    edit(book, 11, 2, "-5")  # row 11: the best ask's size
    edit(book, 31, 4 * 2 + 4, "-1")  # row 31: the third bid's size
    edit(book, 201, 4 * 6 + 2, "-3")  # row 201 (rec[200], n // 2): an empty ask level's size, not read
    data = load(book)
    assert data.report.skipped() == {"negative_size": 2}
    every, _, _ = lobster.read_lobster(book)  # unvalidated: every row
    assert np.array_equal(data.records["ts_ns"], np.delete(every["ts_ns"], [10, 30]))
    assert "skipped          2  negative_size" in data.report.summary()
    written = json.loads(data.report.write_json(tmp_path / "run").read_text())
    assert written["skipped"] == {"negative_size": 2} and written["rows_kept"] == 398


def test_a_negative_size_across_chunks_is_counted_once(tmp_path):
    """The reader's flags travel with their chunk: a file read 64 rows at a time counts what it counts whole."""
    from foxc.data.stream import FileStream
    book = write_lobster(tmp_path, records(), 2)
    for row in (3, 64, 65, 300):
        edit(book, row, 4, "-2")  # the best bid's size
    kept = sum(len(chunk) for chunk in FileStream(book, rows=64))
    data = load(book)
    assert kept == len(data.records) == 396 and data.report.skipped() == {"negative_size": 4}


def test_a_readers_flag_is_counted_under_its_reason_before_the_books_rules():
    from foxc.data import validate
    rec = generate(50, seed=1)
    rec["ask_px"][7] = PRICE_UNDEF  # one-sided, and flagged
    rec["ask_px"][20] = PRICE_UNDEF  # one-sided only
    flags = np.zeros(50, np.uint8)
    flags[[7, 9]] = validate.NEGATIVE_SIZE
    flags[3] = 1  # nan_or_inf, as a bool mask's True
    kept, skipped = validate.apply(rec, flags, validate.ValidationConfig())
    assert {k: n for k, n in skipped.items() if n} == {"nan_or_inf": 1, "one_sided": 1, "negative_size": 2}
    assert len(kept) == 46


def test_a_wrong_type_in_the_first_block_names_its_row(tmp_path):
    book = write_lobster(tmp_path, records(), 2)
    edit(book, 7, 2, "12.5")
    with pytest.raises(DataError) as err:
        load(book)
    assert str(err.value) == f"{book}, row 7, column '#2': wrong type double (expected integer)"
    message = book.with_name(book.name.replace("orderbook", "message"))
    edit(book, 7, 2, "12")
    edit(message, 3, 2, "x")
    with pytest.raises(DataError) as err:
        load(book)
    assert str(err.value) == f"{message}, row 3, column '#2': wrong type string (expected a number)"


@pytest.fixture
def small_blocks(monkeypatch):
    """Arrow parses 4 kB at a time: a 400-row file is many blocks, the first of them setting the column types."""
    monkeypatch.setattr(lobster, "CSV_BLOCK_BYTES", 4096)


def test_a_value_that_does_not_fit_a_later_block_names_its_row(tmp_path, small_blocks):
    book = write_lobster(tmp_path, records(), 2)
    edit(book, 300, 1, "1.5")
    with pytest.raises(DataError) as err:
        load(book)
    assert str(err.value) == (f"{book}, row 300, column '#1': not a LOBSTER order-book CSV (In CSV column #0: CSV "
                              "conversion error to int64: invalid value '1.5')")
    edit(book, 300, 1, "1")
    message = book.with_name(book.name.replace("orderbook", "message"))
    edit(message, 250, 1, "noon")
    with pytest.raises(DataError, match=re.escape(f"{message}, row 250, column '#1': not a LOBSTER message CSV")):
        load(book)


def test_a_row_of_too_few_fields_names_its_row(tmp_path, small_blocks):
    book = write_lobster(tmp_path, records(), 2)
    lines = book.read_text().splitlines()
    lines[259] = lines[259].rsplit(",", 1)[0]  # row 260: seven fields of eight
    book.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=re.escape(f"{book}, row 260: not a LOBSTER order-book CSV (CSV parse error: "
                                                  "Expected 8 columns, got 7")):
        load(book)
