"""LOBSTER values the reader could not place: a value of the wrong type names its row (the refusal named the file, or
the file and the column, only)."""
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
