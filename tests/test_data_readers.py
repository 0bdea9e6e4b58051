"""Readers: Databento DBN (the real samples, the fixtures; field-by-field oracle in test_data_dbn_oracle.py), Parquet, LOBSTER, directories and globs."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


from data_files import FIXTURES, dbn_bytes, shared_sample, write_lobster
from foxc.data.dbn import read_dbn
from foxc.data.parquet import read_parquet, write_parquet
from foxc.data.record import FLAG_NO_TRADES, PRICE_SCALE, PRICE_UNDEF
from foxc.data.source import expand, load
from foxc.data.stream import FileStream
from foxc.data.synthetic import generate
from foxc.data.validate import DataError

BOOK_FIELDS = ("ts_ns", "bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct", "trade_count", "instrument_id")


def same_book(got, want, fields=BOOK_FIELDS):
    for f in fields:
        assert np.array_equal(got[f], want[f]), f


# ---- DBN --------------------------------------------------------------------------------------------
# Field-by-field agreement with Databento's own decoder, on files written by its encoder: test_data_dbn_oracle.py.

@pytest.mark.parametrize("name", ["test_data.mbp-10.dbn", "test_data.mbp-10.v3.dbn.zst"])
def test_databento_sample_files(name):
    path = shared_sample(name)
    rec, bad, meta = read_dbn(path)
    assert bad is None and len(rec) == 2
    assert meta["instrument"] == "ESH1" and meta["instrument_id"] == 5482
    assert meta["dbn"]["dataset"] == "GLBX.MDP3" and meta["dbn"]["version"] == (3 if name.endswith("zst") else 2)
    assert list(rec["ts_ns"]) == [1609160400000704060, 1609160400000750544]  # ts_recv, Databento's index time
    assert rec["bid_px"][0, 0] == 3720250000000 and rec["ask_px"][0, 0] == 3720500000000
    assert (rec["bid_sz"][0, 0], rec["ask_sz"][0, 0], rec["bid_ct"][0, 0], rec["ask_ct"][0, 0]) == (24, 10, 15, 8)
    assert np.all(np.diff(rec["bid_px"][0]) == -250_000_000)  # ES trades in quarter points
    data = load(path)
    assert data.tick == 250_000_000 and data.report.rows_kept == 2


def test_sample_files_agree_across_versions():
    a, b = shared_sample("test_data.mbp-10.dbn"), shared_sample("test_data.mbp-10.v3.dbn.zst")
    same_book(read_dbn(a)[0], read_dbn(b)[0])


def test_dbn_fixtures_read_the_same_compressed_or_not(tmp_path):
    zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
    for name in ("mbp10.v1.dbn", "mbp10.v2.dbn", "mbp10.v3.dbn", "mixed.v3.ts_out.dbn"):
        path = tmp_path / f"{name}.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress((FIXTURES / name).read_bytes()))
        same_book(read_dbn(path)[0], read_dbn(FIXTURES / name)[0], BOOK_FIELDS + ("flags",))


def test_dbn_mixed_record_types():
    got, _, meta = read_dbn(FIXTURES / "mixed.v3.ts_out.dbn")  # Databento's live layout: ts_out, other records
    assert len(got) == 16 and meta["dbn"]["ts_out"] and meta["dbn"]["schema"] == 0xFFFF
    assert "mixed record types" in meta["notes"][0]


def test_a_file_of_interleaved_instruments_is_refused_naming_the_row_and_ids(tmp_path):
    """A parent symbol (ES.FUT) gives every contract's book in one file: read as one book, their rows would
    interleave into a book that never was. The decoder reads them (the oracle compares them); a stream refuses."""
    assert len(np.unique(read_dbn(FIXTURES / "mbp10.v2.dbn")[0]["instrument_id"])) == 3
    for rows in (1, 1 << 14):  # the repeat found across a chunk boundary as within one
        with pytest.raises(DataError) as err:
            list(FileStream(FIXTURES / "mbp10.v2.dbn", rows=rows))
        assert str(err.value).startswith(f"{FIXTURES / 'mbp10.v2.dbn'}, row 3: instrument_id 5482 again after 13615: "
                                         "the books of several instruments interleave (instrument_id 5482, 42005204, "
                                         "13615 so far; a parent symbol's file"), str(err.value)
        assert "give a file of one instrument" in str(err.value)
    rec = generate(300, seed=4)
    rec["instrument_id"][100::7] = 9  # another book now and then
    write_parquet(tmp_path / "parent.parquet", rec, row_group_rows=64)
    with pytest.raises(DataError, match=r"parent\.parquet, row 101: instrument_id 1 again after 9: .*instrument_id 1, "
                                        r"9 so far"):
        load(tmp_path / "parent.parquet")


def test_instruments_one_after_another_are_a_segment_each_noted(tmp_path):
    """A continuous symbol (ES.c.0) rolls from one contract's id to the next: each contract's rows are a segment
    (a window, a label or a position across the roll would take its price gap for a return), noted."""
    rec = generate(300, seed=4)
    write_parquet(tmp_path / "one.parquet", rec)
    rec["instrument_id"][150:] = 7
    rec["instrument_id"][280:] = 2**32 - 1
    write_parquet(tmp_path / "roll.parquet", rec, row_group_rows=100)
    (tmp_path / "roll.dbn").write_bytes(dbn_bytes(rec))
    one = load(tmp_path / "one.parquet")
    assert one.n_segments == 1 and not (one.records["segment"] != 0).any()
    assert not any("instruments" in note for note in one.report.files[str(tmp_path / "one.parquet")]["notes"])
    ts, begins = rec["ts_ns"], [0, 150, 280]
    prev = np.r_[ts[0], ts[:-1]]
    prev[begins] = ts[begins]  # a segment's first row is its own previous
    for name in ("roll.parquet", "roll.dbn"):
        for rows in (1, 64, 150, 1 << 14):  # the roll inside a chunk, at a chunk's first row, at its last
            stream = FileStream(tmp_path / name, rows=rows)
            got = np.concatenate(list(stream))
            assert got["segment"].tolist() == [0] * 150 + [1] * 130 + [2] * 20, (name, rows)
            assert np.array_equal(got["prev_ts_ns"], prev), (name, rows)
            summary = stream.summary()
            assert summary.segments == [(150, ts[0], ts[149]), (130, ts[150], ts[279]), (20, ts[280], ts[299])]
            assert [(p.rows, p.first_ts, p.last_ts, p.rows_read) for p in summary.parts()] == \
                [(n, a, b, 300) for n, a, b in summary.segments]
            assert ("3 instruments one after another (instrument_id 1 from row 0, 7 from row 150, 4294967295 from "
                    "row 280): split into 3 segments at the rows where each begins") in " ".join(summary.notes), name
        data = load(tmp_path / name)
        assert [b.tolist() for b in data.segment_bounds()] == [[0, 150, 280], [150, 280, 300]]
        assert data.files == [str(tmp_path / name)] and np.array_equal(data.records["prev_ts_ns"], prev)
    rec["ask_px"][150:280] = PRICE_UNDEF  # every row of the second contract skipped
    write_parquet(tmp_path / "gone.parquet", rec)
    data = load(tmp_path / "gone.parquet")
    assert [b.tolist() for b in data.segment_bounds()] == [[0, 150], [150, 170]]
    assert "split into 2 segments at the rows where each begins (1 with no row kept)" in \
        data.report.files[str(tmp_path / "gone.parquet")]["notes"][0]


@pytest.mark.parametrize("damage, message", [
    (lambda raw: raw[:-100], "truncated"),
    (lambda raw: b"XYZ" + raw[3:], "not a DBN file"),
    (lambda raw: raw[:3] + bytes([9]) + raw[4:], "version 9"),
    (lambda raw: raw[:20], "metadata"),
    (lambda raw: raw[:4] + (101).to_bytes(4, "little") + raw[8:], "corrupt DBN metadata (length 101"),
    (lambda raw: raw[:8 + int.from_bytes(raw[4:8], "little")], "no records"),
    (lambda raw: b"", "empty"),
])
def test_dbn_bad_files_raise_one_line(tmp_path, damage, message):
    path = tmp_path / "bad.dbn"
    path.write_bytes(damage((FIXTURES / "mbp10.v2.dbn").read_bytes()))
    with pytest.raises(DataError) as err:
        read_dbn(path)
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_dbn_undefined_receive_time_is_refused_naming_the_row(tmp_path):
    """ts_recv of u64 max (Databento's UNDEF_TIMESTAMP) as int64 ns would be a row just before 1970, kept."""
    from foxc.data.dbn import MBP10_DTYPE
    raw = bytearray((FIXTURES / "mbp10.v1.dbn").read_bytes())
    first = 8 + int.from_bytes(raw[4:8], "little")
    length = raw[first] * 4
    at = first + 2 * length + MBP10_DTYPE.fields["ts_recv"][1]  # the third record's
    raw[at:at + 8] = (2**64 - 1).to_bytes(8, "little")
    (tmp_path / "undef.dbn").write_bytes(bytes(raw))
    with pytest.raises(DataError) as err:
        read_dbn(tmp_path / "undef.dbn")
    assert str(err.value).startswith(f"{tmp_path / 'undef.dbn'}, row 2, column 'ts_recv': ts_recv 18446744073709551615")


@pytest.mark.parametrize("spec", ["dir", "dir/*.dbn*"])
def test_a_dbn_file_beside_its_compressed_twin_is_refused(tmp_path, spec):
    """A decompressed copy left beside its .dbn.zst would be loaded as a second, overlapping segment."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "day.dbn.zst").write_bytes((FIXTURES / "mbp10.v3.dbn.zst").read_bytes())
    (tmp_path / "dir" / "day.dbn").write_bytes((FIXTURES / "mbp10.v2.dbn").read_bytes())
    with pytest.raises(DataError, match=r"day\.dbn\.zst: the same data as .*day\.dbn beside it, compressed"):
        load(str(tmp_path / spec))


def test_corrupt_zstd(tmp_path):
    path = tmp_path / "bad.dbn.zst"
    path.write_bytes((FIXTURES / "mbp10.v3.dbn.zst").read_bytes()[:-20])
    with pytest.raises(DataError, match="zstd|truncated"):
        read_dbn(path)


# ---- Parquet ----------------------------------------------------------------------------------------

def test_parquet_round_trip(tmp_path):
    rec = generate(5000, seed=4)
    write_parquet(tmp_path / "s.parquet", rec, symbol="SYN")
    got, bad, meta = read_parquet(tmp_path / "s.parquet")
    same_book(got, rec, BOOK_FIELDS + ("flags",))
    assert not bad.any() and meta["instrument"] == "SYN"


def databento_float_export(rec, time="ts_recv") -> pa.Table:
    """Databento's pretty_px export: float prices with NaN for empty levels, a UTC timestamp index."""
    cols = {time: pa.array(rec["ts_ns"].astype("datetime64[ns]")).cast(pa.timestamp("ns", "UTC"))}
    for side in ("bid", "ask"):
        for lvl in range(10):
            px = rec[f"{side}_px"][:, lvl]
            cols[f"{side}_px_{lvl:02d}"] = pa.array(np.where(px == PRICE_UNDEF, np.nan, px / PRICE_SCALE))
            cols[f"{side}_sz_{lvl:02d}"] = pa.array(rec[f"{side}_sz"][:, lvl])
    return pa.table(cols)


def test_parquet_float_prices_and_timestamps(tmp_path):
    rec = generate(1000, seed=5)
    rec["bid_px"][::7, 9] = PRICE_UNDEF
    rec["bid_sz"][::7, 9] = 0
    pq.write_table(databento_float_export(rec), tmp_path / "f.parquet")
    got, bad, meta = read_parquet(tmp_path / "f.parquet")
    same_book(got, rec, ("ts_ns", "bid_px", "ask_px", "bid_sz", "ask_sz"))
    assert not bad.any() and any("bid_ct" in n for n in meta["notes"])


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
def test_parquet_timestamps_of_any_unit_are_ns(tmp_path, unit):
    """A timestamp column in µs (Spark, parquet format 1.0 writers) was read as ns: 1000 times too early."""
    rec = generate(200, seed=5)
    step = {"s": 10**9, "ms": 10**6, "us": 10**3}[unit]
    table = databento_float_export(rec)
    table = table.set_column(0, "ts_recv", table.column("ts_recv").cast(pa.timestamp(unit, "UTC"), safe=False))
    pq.write_table(table, tmp_path / "t.parquet")
    got, _, _ = read_parquet(tmp_path / "t.parquet")
    assert np.array_equal(got["ts_ns"], rec["ts_ns"] // step * step)


def test_parquet_missing_time_is_refused_naming_the_row(tmp_path):
    """A null time was read as 0 (1970-01-01): kept as the first row, or counted as late further on."""
    rec = generate(300, seed=5)
    write_parquet(tmp_path / "ok.parquet", rec, row_group_rows=100)
    table = pq.read_table(tmp_path / "ok.parquet")
    times = pa.array([None if i == 250 else t for i, t in enumerate(rec["ts_ns"].tolist())], pa.uint64())
    pq.write_table(table.set_column(table.schema.get_field_index("ts_recv"), "ts_recv", times), tmp_path / "t.parquet",
                   row_group_size=100)
    with pytest.raises(DataError, match=r"t.parquet, row 250, column 'ts_recv': missing value"):
        read_parquet(tmp_path / "t.parquet")


def test_parquet_without_ts_recv_uses_ts_event_and_says_so(tmp_path):
    rec = generate(200, seed=6)
    pq.write_table(databento_float_export(rec, time="ts_event"), tmp_path / "e.parquet")
    got, bad, meta = read_parquet(tmp_path / "e.parquet")
    assert np.array_equal(got["ts_ns"], rec["ts_ns"]) and not bad.any()
    assert any("ts_event" in n for n in meta["notes"])


def test_parquet_infinite_price_is_skipped(tmp_path):
    rec = generate(100, seed=5)
    table = databento_float_export(rec)
    px = table.column("ask_px_03").to_numpy().copy()
    px[10] = np.inf
    table = table.set_column(table.schema.get_field_index("ask_px_03"), "ask_px_03", pa.array(px))
    pq.write_table(table, tmp_path / "inf.parquet")
    data = load(tmp_path / "inf.parquet")
    assert data.report.skipped() == {"nan_or_inf": 1} and len(data.records) == 99


def test_parquet_float_price_beyond_int64_is_out_of_range(tmp_path):
    """1e30 × 1e9 does not fit int64: numpy's cast warned on stderr and gave -2^63, a 'nonpositive_price'."""
    rec = generate(100, seed=5)
    table = databento_float_export(rec)
    for name, value in (("ask_px_03", 1e30), ("bid_px_05", -1e30)):
        px = table.column(name).to_numpy().copy()
        px[10 if value > 0 else 20] = value
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(px))
    pq.write_table(table, tmp_path / "huge.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = load(tmp_path / "huge.parquet")
    assert data.report.skipped() == {"nonpositive_price": 1, "price_out_of_range": 1} and len(data.records) == 98


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.drop(["ask_px_04"]), "column 'ask_px_04': missing"),
    (lambda t: t.set_column(t.schema.get_field_index("bid_px_00"), "bid_px_00",
                            pa.array(["x"] * t.num_rows)), "column 'bid_px_00': wrong type"),
    (lambda t: t.slice(0, 0), "no rows"),
    (lambda t: t.set_column(t.schema.get_field_index("ts_recv"), "ts_recv",  # seconds, taken as ns: 1970
                            pa.array(t.column("ts_recv").to_numpy() / 1e9)), "column 'ts_recv': wrong type double"),
    (lambda t: t.set_column(t.schema.get_field_index("instrument_id"), "instrument_id",
                            pa.array(["ESH1"] * t.num_rows)), "column 'instrument_id': wrong type string"),
    (lambda t: t.set_column(t.schema.get_field_index("flags"), "flags", pa.array(["x"] * t.num_rows)),
     "column 'flags': wrong type string"),
    (lambda t: t.set_column(t.schema.get_field_index("action"), "action", pa.array([b"T"] * t.num_rows)),
     "column 'action': wrong type binary"),
    (lambda t: pa.Table.from_arrays([*t.columns, t.column("bid_px_00")], names=[*t.schema.names, "bid_px_00"]),
     "column 'bid_px_00': 2 columns of this name"),
    (lambda t: pa.Table.from_arrays([*t.columns, t.column("ts_recv")], names=[*t.schema.names, "ts_recv"]),
     "column 'ts_recv': 2 columns of this name"),
])
def test_parquet_bad_schema(tmp_path, edit, message):
    rec = generate(50)
    write_parquet(tmp_path / "ok.parquet", rec)
    pq.write_table(edit(pq.read_table(tmp_path / "ok.parquet")), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=message):
        read_parquet(tmp_path / "bad.parquet")


def symbols_only(path, symbols):
    """A Parquet file of generated rows that names each row's instrument by its symbol only (no instrument_id)."""
    write_parquet(path, generate(len(symbols), seed=6), row_group_rows=100)
    table = pq.read_table(path).drop(["instrument_id"])
    pq.write_table(table.set_column(table.schema.get_field_index("symbol"), "symbol", symbols), path)
    return path


@pytest.mark.parametrize("encode", [pa.array, lambda s: pa.array(s).dictionary_encode()])
def test_a_change_of_symbol_in_a_file_without_instrument_id_begins_a_segment(tmp_path, encode):
    """Without instrument_id, the symbols tell the instruments apart: a roll is a segment each side, symbols that
    interleave are refused, as ids are, named by their symbols; --instrument takes a symbol, not a number (a number
    the file has none of would name different symbols in different files); no id is made up for a row."""
    path = symbols_only(tmp_path / "roll.parquet", encode(["ESH4"] * 250 + ["ESM4"] * 150))
    data = load(path)
    assert [b.tolist() for b in data.segment_bounds()] == [[0, 250], [250, 400]]
    assert data.records["prev_ts_ns"][250] == data.records["ts_ns"][250] and not data.records["instrument_id"].any()
    stream = FileStream(path, rows=64)  # batches that the roll falls inside
    assert sum(len(chunk) for chunk in stream) == 400 and stream.summary().segments[1][0] == 150
    assert stream.summary().notes == ["2 instruments one after another (symbol ESH4 from row 0, ESM4 from row 250): "
                                      "split into 2 segments at the rows where each begins (a continuous symbol's "
                                      "roll to the next contract?)"]
    assert (data.instrument, data.instrument_id) == ("ESH4", 0)
    one = load(symbols_only(tmp_path / "one.parquet", encode(["ESH4"] * 400)))
    assert one.n_segments == 1 and one.instrument == "ESH4" and not one.records["instrument_id"].any()
    mixed = symbols_only(tmp_path / "mixed.parquet", encode(["ESH4", "ESM4"] * 200))
    with pytest.raises(DataError, match=r"symbol ESH4 again after ESM4: the books of several instruments interleave "
                                        r"\(symbol ESH4, ESM4 so far; .*\(e\.g\. --instrument ESH4\)"):
        load(mixed)
    kept = load(mixed, instrument="ESM4")
    assert len(kept.records) == 200 and (kept.instrument, kept.instrument_id) == ("ESM4", 0)
    assert kept.report.to_dict()["files"][str(mixed)]["other_instruments"] == {"ESH4": 200}
    assert "ESM4 kept; rows of other instruments left out: symbol ESH4 (200)" in kept.report.summary()
    rolled = data.records[250:].copy()
    rolled["segment"] = 0
    assert load(path, instrument="ESM4").records.tobytes() == rolled.tobytes()
    with pytest.raises(DataError, match=r"roll\.parquet: --instrument 1: the file has no instrument_id column, only "
                                        r"symbols: give a symbol \(ESH4, ESM4 so far\)"):
        load(path, instrument="1")
    with pytest.raises(DataError, match=r"--instrument ESU4: not an instrument_id, and the file's symbols do not name "
                                        r"it \(they are ESH4, ESM4\): give one of those symbols"):
        load(path, instrument="ESU4")


def test_parquet_not_data_and_truncated(tmp_path):
    (tmp_path / "text.parquet").write_text("hello, not parquet\n")
    with pytest.raises(DataError, match="not a Parquet file"):
        read_parquet(tmp_path / "text.parquet")
    write_parquet(tmp_path / "ok.parquet", generate(2000))
    raw = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(DataError):
        read_parquet(tmp_path / "cut.parquet")


def test_parquet_with_a_damaged_footer_is_refused_naming_it(tmp_path):
    """Bytes of the footer (the schema) damaged: pyarrow raised ArrowNotImplementedError (a traceback) or
    UnicodeDecodeError (a line naming no file) instead of ArrowInvalid."""
    write_parquet(tmp_path / "ok.parquet", generate(50))
    raw = (tmp_path / "ok.parquet").read_bytes()
    footer = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")
    name = raw.index(b"bid_px_00", footer)
    (tmp_path / "name.parquet").write_bytes(raw[:name] + b"\xc1" + raw[name + 1:])  # a column name not UTF-8
    with pytest.raises(DataError, match="name.parquet: not a Parquet file"):
        read_parquet(tmp_path / "name.parquet")


# ---- LOBSTER ----------------------------------------------------------------------------------------

NY_TZ_NOTE = "times: America/New_York local, stored as UTC ns"


def utc_ns(stamp: str) -> int:
    return int(np.datetime64(stamp, "ns").astype(np.int64))


def lobster_records(n=400, seed=6):
    rec = generate(n, seed=seed)
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(n) * 1_000_000
    rec["ask_px"][n // 2, 4:] = PRICE_UNDEF  # a thin book: empty levels carry the dummy prices
    rec["ask_sz"][n // 2, 4:] = 0
    return rec


def read_lobster_file(path):
    from foxc.data.lobster import read_lobster
    return read_lobster(path)


@pytest.mark.parametrize("levels", [1, 5, 10])
def test_lobster_with_messages(tmp_path, levels):
    rec = lobster_records()
    book = write_lobster(tmp_path, rec, levels)
    got, _, meta = read_lobster_file(book)
    midnight_new_york = utc_ns("2012-06-21T04:00")  # EDT, UTC-4
    assert np.array_equal(got["ts_ns"], midnight_new_york + rec["ts_ns"] % (86400 * 10**9))
    assert meta["instrument"] == "AAPL" and meta["notes"] == [NY_TZ_NOTE]
    for f in ("bid_px", "ask_px", "bid_sz", "ask_sz"):
        assert np.array_equal(got[f][:, :levels], rec[f][:, :levels]), f
    assert np.all(got["bid_px"][:, levels:] == PRICE_UNDEF) and np.all(got["ask_sz"][:, levels:] == 0)
    assert np.array_equal(got["trade_count"], rec["trade_count"])


@pytest.mark.parametrize("day, open_utc", [
    ("2012-06-21", "2012-06-21T13:30"),  # summer: EDT, UTC-4
    ("2012-01-03", "2012-01-03T14:30"),  # winter: EST, UTC-5
    ("2012-03-09", "2012-03-09T14:30"),  # the Friday before DST starts (Sunday 2012-03-11)
    ("2012-03-12", "2012-03-12T13:30"),  # the Monday after
    ("2012-11-02", "2012-11-02T13:30"),  # the Friday before DST ends (Sunday 2012-11-04)
    ("2012-11-05", "2012-11-05T14:30"),  # the Monday after
])
def test_lobster_times_are_new_york_stored_as_utc(tmp_path, day, open_utc):
    rec = lobster_records(4)
    seconds = ["34200", "34200.004241176", "45296.123456789", "57599.999999999"]  # 09:30, 12:34:56.1.., 15:59:59.9..
    got, _, meta = read_lobster_file(write_lobster(tmp_path, rec, 2, day=day, seconds=seconds))
    t0 = utc_ns(open_utc)
    assert list(got["ts_ns"]) == [t0, t0 + 4_241_176, t0 + 11_096_123_456_789, t0 + 23_399_999_999_999]
    assert meta["notes"] == [NY_TZ_NOTE]
    data = load(tmp_path)
    assert NY_TZ_NOTE in data.report.summary() and data.describe_time().startswith(open_utc)


def test_new_york_to_utc_across_dst_changes():
    from datetime import date
    from foxc.data.lobster import new_york_to_utc_ns
    h = 3600 * 10**9
    spring = new_york_to_utc_ns(date(2012, 3, 11), np.array([h, 2 * h - 1, 3 * h, 9 * h + h // 2]))
    assert list(spring) == [utc_ns(s) for s in ("2012-03-11T06:00", "2012-03-11T06:59:59.999999999",
                                                "2012-03-11T07:00", "2012-03-11T13:30")]
    autumn = new_york_to_utc_ns(date(2012, 11, 4), np.array([h // 2, 2 * h, 9 * h + h // 2]))
    assert list(autumn) == [utc_ns(s) for s in ("2012-11-04T04:30", "2012-11-04T07:00", "2012-11-04T14:30")]


@pytest.mark.parametrize("day, start_ms, first_utc", [
    ("2012-06-21", 34_200_000, "2012-06-21T13:30"),
    ("2012-01-03", 34_200_000, "2012-01-03T14:30"),
    ("2012-01-03", 36_000_000, "2012-01-03T15:00"),  # a session from 10:00
])
def test_lobster_without_messages_numbers_rows_from_the_session_start(tmp_path, day, start_ms, first_utc):
    book = write_lobster(tmp_path, lobster_records(), 10, day=day, message=False, session=(start_ms, 57_600_000))
    got, _, meta = read_lobster_file(book)
    assert got["ts_ns"][0] == utc_ns(first_utc) and np.all(np.diff(got["ts_ns"]) == 1000)
    assert not got["trade_count"].any() and (got["flags"] == FLAG_NO_TRADES).all()
    assert (got["last_px"] == PRICE_UNDEF).all() and not got["sell_vol"].any() and not got["buy_vol"].any()
    clock = f"{start_ms // 3_600_000:02d}:{start_ms // 60_000 % 60:02d}:00.000"
    assert meta["notes"] == [NY_TZ_NOTE, f"no message file ({book.name.replace('orderbook', 'message')}): timestamps "
                             f"are row order, 1 us apart from the session start {clock} America/New_York "
                             f"({first_utc.replace('T', ' ')}:00 UTC; the name's session {clock}-16:00:00.000); "
                             "no trades: resting orders fill only when the opposite touch moves through them"]
    summary = load(tmp_path).report.summary()
    assert NY_TZ_NOTE in summary and "no message file" in summary and "session start" in summary


def test_lobster_not_named_lobsters_way_keeps_ns_after_midnight(tmp_path):
    rec = lobster_records(3)
    write_lobster(tmp_path, rec, 1, seconds=["34200.5", "34201", "34202.000000001"])
    for kind in ("orderbook", "message"):
        src = next(tmp_path.glob(f"*_{kind}_1.csv"))
        src.rename(tmp_path / f"plain_{kind}_1.csv")
    got, _, meta = read_lobster_file(tmp_path / "plain_orderbook_1.csv")
    assert list(got["ts_ns"]) == [34_200_500_000_000, 34_201_000_000_000, 34_202_000_000_001]
    assert meta["instrument"] == "" and "no date or time zone" in meta["notes"][0] and len(meta["notes"]) == 1
    (tmp_path / "plain_message_1.csv").unlink()
    got, _, meta = read_lobster_file(tmp_path / "plain_orderbook_1.csv")
    assert list(got["ts_ns"]) == [0, 1000, 2000] and "1 us apart from midnight" in meta["notes"][1]


def test_lobster_bad_files(tmp_path):
    (tmp_path / "X_2012-06-21_1_2_orderbook_2.csv").write_text("1,2,3\n4,5,6\n")
    with pytest.raises(DataError, match="3 columns, expected 8"):
        load(tmp_path / "X_2012-06-21_1_2_orderbook_2.csv")
    (tmp_path / "Y_2012-06-21_1_2_orderbook_1.csv").write_text("1,a,3,4\n")
    with pytest.raises(DataError, match="wrong type"):
        load(tmp_path / "Y_2012-06-21_1_2_orderbook_1.csv")
    (tmp_path / "Z_orderbook_1.csv").write_text("")
    with pytest.raises(DataError, match="empty"):
        load(tmp_path / "Z_orderbook_1.csv")
    (tmp_path / "W_2012-02-30_1_2_orderbook_1.csv").write_text("1,2,3,4\n")
    with pytest.raises(DataError, match="2012-02-30 in the file name is not a calendar date"):
        load(tmp_path / "W_2012-02-30_1_2_orderbook_1.csv")


def test_a_lobster_file_with_a_header_line_says_to_remove_it(tmp_path):
    """LOBSTER files have no header line: one added was read as a row, the order book's columns as text:
    `column '#1': wrong type string (expected integer)`, with no hint. A word in a later row keeps that message."""
    book = write_lobster(tmp_path, lobster_records(4), 1)
    rows, message = book.read_text(), book.with_name(book.name.replace("orderbook", "message"))
    header = "Ask Price 1,Ask Size 1,Bid Price 1,Bid Size 1"
    book.write_text(f"{header}\n{rows}")
    with pytest.raises(DataError) as err:
        load(book)
    assert str(err.value) == f"{book}, row 1: a header line ({header}): LOBSTER files have none (remove it)"
    book.write_text(rows)
    events = message.read_text()
    message.write_text(f"Time,Type,Order ID,Size,Price,Direction\n{events}")
    with pytest.raises(DataError) as err:
        load(book)
    assert str(err.value) == (f"{message}, row 1: a header line (Time,Type,Order ID,Size,Price,Direction): LOBSTER "
                              "files have none (remove it)")
    message.write_text(events)
    first, *rest = rows.splitlines(keepends=True)
    book.write_text(first + "".join(rest).replace(rest[0].split(",")[0], "x", 1))
    with pytest.raises(DataError, match=r"column '#1': wrong type string \(expected integer\)"):
        load(book)


def test_lobster_message_time_beyond_int64_ns_is_refused(tmp_path):
    """1e30 s: numpy's cast warned on stderr and gave -2^63 ns, a time in 1720 kept as the first row."""
    book = write_lobster(tmp_path, lobster_records(4), 2, seconds=["1e30", "34200", "34201", "34202"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DataError, match=r"message_2.csv, row 1, column '#1': time 1e\+30 s"):
            load(book)


# ---- directories, globs, segments -------------------------------------------------------------------

def test_directory_in_time_order_with_segments(tmp_path):
    early, late = generate(300, seed=1), generate(200, seed=2)
    late["ts_ns"] += 10**12
    write_parquet(tmp_path / "a_late.parquet", late)
    (tmp_path / "b_early.dbn").write_bytes(dbn_bytes(early))
    data = load(tmp_path)
    assert len(data.records) == 500 and data.n_segments == 2 and data.source == "dbn+parquet"
    same_book(data.records[:300], early)
    same_book(data.records[300:], late)
    assert np.array_equal(data.records["segment"], np.repeat([0, 1], [300, 200]))
    assert data.records["prev_ts_ns"][300] == data.records["ts_ns"][300]
    assert np.array_equal(data.records["prev_ts_ns"][1:300], data.records["ts_ns"][:299])
    starts, ends = data.segment_bounds()
    assert list(starts) == [0, 300] and list(ends) == [300, 500]
    glob = load(str(tmp_path / "*.parquet"))
    assert len(glob.records) == 200


@pytest.mark.parametrize("spec", ["", " "])
def test_an_empty_path_is_not_the_current_directory(tmp_path, monkeypatch, spec):
    """Path("") is ".": `prepare "$DATA"` with DATA unset read whatever data the current directory held."""
    write_parquet(tmp_path / "here.parquet", generate(50))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="an empty path"):
        load(spec)


@pytest.mark.parametrize("odd", ["folder", "dangling link"])
def test_a_data_name_that_is_not_a_file_is_not_skipped(tmp_path, odd):
    """A directory named b.parquet (a Spark dataset) or a dangling link among the files was dropped without a word."""
    write_parquet(tmp_path / "a.parquet", generate(50))
    if odd == "folder":
        (tmp_path / "b.parquet").mkdir()
        write_parquet(tmp_path / "b.parquet" / "part-0.parquet", generate(50, seed=2))
    else:
        (tmp_path / "b.parquet").symlink_to(tmp_path / "gone.parquet")
    for spec in (tmp_path, str(tmp_path / "*.parquet")):
        with pytest.raises(DataError, match=r"b.parquet: named as a data file but not a file"):
            load(spec)


def test_a_fifo_named_as_data_is_refused_at_once(tmp_path):
    """--data naming a FIFO nobody writes hung in its open (the inspector, training, prepare); it is refused naming
    what it is, as a directory's or a glob's FIFO is (foxc.paths.file_kind)."""
    fifo = tmp_path / "live.dbn"
    os.mkfifo(fifo)
    for spec in (fifo, tmp_path, str(tmp_path / "*.dbn")):
        with pytest.raises(DataError, match=r"live.dbn: named as a data file but not a file: a FIFO"):
            expand(spec)
    done = subprocess.run([sys.executable, "-m", "foxc.data", "inspect", str(fifo)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "a FIFO" in done.stderr, done.stderr


def test_missing_and_unknown(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load(tmp_path / "nope.parquet")
    with pytest.raises(DataError, match="matches no files"):
        load(str(tmp_path / "*.dbn"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DataError, match="unknown format"):
        load(tmp_path / "notes.txt")
    with pytest.raises(DataError, match="no data files"):
        load(tmp_path)


def test_load_refuses_a_spec_that_is_no_path_naming_its_type(tmp_path):
    """load([F, G]) said "the pattern matches no files" (the list's str() taken as a glob): one spec, a path, a
    directory or a glob, as --data takes."""
    from foxc.data.source import load
    with pytest.raises(TypeError, match=r"^spec must be a path, a directory or a glob \(a str or a Path\), got a "
                                        r"list: for several files give their directory or a glob$"):
        load([tmp_path / "a.parquet", tmp_path / "b.parquet"])
