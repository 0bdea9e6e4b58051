"""Readers: Databento DBN (real sample files and generated ones), Parquet, LOBSTER, directories and globs."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


from data_files import SHARED_DATA, dbn_bytes, write_lobster
from foxc.data.dbn import read_dbn
from foxc.data.parquet import read_parquet, write_parquet
from foxc.data.record import PRICE_SCALE, PRICE_UNDEF
from foxc.data.source import load
from foxc.data.synthetic import generate
from foxc.data.validate import DataError

BOOK_FIELDS = ("ts_ns", "bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct", "trade_count", "instrument_id")


def same_book(got, want, fields=BOOK_FIELDS):
    for f in fields:
        assert np.array_equal(got[f], want[f]), f


# ---- DBN --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["test_data.mbp-10.dbn", "test_data.mbp-10.v3.dbn.zst"])
def test_databento_sample_files(name):
    path = SHARED_DATA / name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    rec, bad, meta = read_dbn(path)
    assert bad is None and len(rec) == 2
    assert meta["instrument"] == "ESH1" and meta["instrument_id"] == 5482
    assert meta["dbn"]["dataset"] == "GLBX.MDP3" and meta["dbn"]["version"] == (3 if name.endswith("zst") else 2)
    assert list(rec["ts_ns"]) == [1609160400000429831, 1609160400000435673]
    assert rec["bid_px"][0, 0] == 3720250000000 and rec["ask_px"][0, 0] == 3720500000000
    assert (rec["bid_sz"][0, 0], rec["ask_sz"][0, 0], rec["bid_ct"][0, 0], rec["ask_ct"][0, 0]) == (24, 10, 15, 8)
    assert np.all(np.diff(rec["bid_px"][0]) == -250_000_000)  # ES trades in quarter points
    data = load(path)
    assert data.tick == 250_000_000 and data.report.rows_kept == 2


def test_sample_files_agree_across_versions():
    a, b = SHARED_DATA / "test_data.mbp-10.dbn", SHARED_DATA / "test_data.mbp-10.v3.dbn.zst"
    if not (a.is_file() and b.is_file()):
        pytest.skip("shared sample files not present")
    same_book(read_dbn(a)[0], read_dbn(b)[0])


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("ts_out", [False, True])
def test_dbn_round_trip(tmp_path, version, ts_out):
    rec = generate(300, seed=version)
    path = tmp_path / "x.dbn"
    path.write_bytes(dbn_bytes(rec, version, "ESZ4", ts_out))
    got, _, meta = read_dbn(path)
    same_book(got, rec)
    assert meta["instrument"] == "ESZ4" and meta["dbn"]["ts_out"] == ts_out
    zpath = tmp_path / "x.dbn.zst"
    zstandard = pytest.importorskip("zstandard")
    zpath.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
    same_book(read_dbn(zpath)[0], rec)


def test_dbn_mixed_record_types(tmp_path):
    rec = generate(5, seed=1)
    raw = dbn_bytes(rec)
    head = raw[:8 + int.from_bytes(raw[4:8], "little")]
    body = raw[len(head):]
    other = bytes([6, 0x17]) + bytes(22)  # a 24-byte non-MBP record (system message type)
    mixed = head + body[:368] + other + body[368:]
    path = tmp_path / "m.dbn"
    path.write_bytes(mixed)
    got, _, meta = read_dbn(path)
    same_book(got, rec)
    assert "mixed record types" in meta["notes"][0]


@pytest.mark.parametrize("damage, message", [
    (lambda raw: raw[:-100], "truncated"),
    (lambda raw: b"XYZ" + raw[3:], "not a DBN file"),
    (lambda raw: raw[:3] + bytes([9]) + raw[4:], "version 9"),
    (lambda raw: raw[:20], "metadata"),
    (lambda raw: b"", "empty"),
])
def test_dbn_bad_files_raise_one_line(tmp_path, damage, message):
    path = tmp_path / "bad.dbn"
    path.write_bytes(damage(dbn_bytes(generate(10))))
    with pytest.raises(DataError) as err:
        read_dbn(path)
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_corrupt_zstd(tmp_path):
    path = tmp_path / "bad.dbn.zst"
    zstandard = pytest.importorskip("zstandard")
    path.write_bytes(zstandard.ZstdCompressor().compress(dbn_bytes(generate(10)))[:-20])
    with pytest.raises(DataError, match="zstd|truncated"):
        read_dbn(path)


# ---- Parquet ----------------------------------------------------------------------------------------

def test_parquet_round_trip(tmp_path):
    rec = generate(5000, seed=4)
    write_parquet(tmp_path / "s.parquet", rec, symbol="SYN")
    got, bad, meta = read_parquet(tmp_path / "s.parquet")
    same_book(got, rec, BOOK_FIELDS + ("flags",))
    assert not bad.any() and meta["instrument"] == "SYN"


def databento_float_export(rec) -> pa.Table:
    """Databento's pretty_px export: float prices with NaN for empty levels, a UTC timestamp index."""
    cols = {"ts_event": pa.array(rec["ts_ns"].astype("datetime64[ns]")).cast(pa.timestamp("ns", "UTC"))}
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


def test_parquet_infinite_price_is_skipped(tmp_path):
    rec = generate(100, seed=5)
    table = databento_float_export(rec)
    px = table.column("ask_px_03").to_numpy().copy()
    px[10] = np.inf
    table = table.set_column(table.schema.get_field_index("ask_px_03"), "ask_px_03", pa.array(px))
    pq.write_table(table, tmp_path / "inf.parquet")
    data = load(tmp_path / "inf.parquet")
    assert data.report.skipped() == {"nan_or_inf": 1} and len(data.records) == 99


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.drop(["ask_px_04"]), "column 'ask_px_04': missing"),
    (lambda t: t.set_column(t.schema.get_field_index("bid_px_00"), "bid_px_00",
                            pa.array(["x"] * t.num_rows)), "column 'bid_px_00': wrong type"),
    (lambda t: t.slice(0, 0), "no rows"),
])
def test_parquet_bad_schema(tmp_path, edit, message):
    rec = generate(50)
    write_parquet(tmp_path / "ok.parquet", rec)
    pq.write_table(edit(pq.read_table(tmp_path / "ok.parquet")), tmp_path / "bad.parquet")
    with pytest.raises(DataError, match=message):
        read_parquet(tmp_path / "bad.parquet")


def test_parquet_not_data_and_truncated(tmp_path):
    (tmp_path / "text.parquet").write_text("hello, not parquet\n")
    with pytest.raises(DataError, match="not a Parquet file"):
        read_parquet(tmp_path / "text.parquet")
    write_parquet(tmp_path / "ok.parquet", generate(2000))
    raw = (tmp_path / "ok.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(DataError):
        read_parquet(tmp_path / "cut.parquet")


# ---- LOBSTER ----------------------------------------------------------------------------------------

def lobster_records(n=400, seed=6):
    rec = generate(n, seed=seed)
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(n) * 1_000_000
    rec["ask_px"][5, 4:] = PRICE_UNDEF  # a thin book: empty levels carry the dummy prices
    rec["ask_sz"][5, 4:] = 0
    return rec


@pytest.mark.parametrize("levels", [1, 5, 10])
def test_lobster_with_messages(tmp_path, levels):
    rec = lobster_records()
    book = write_lobster(tmp_path, rec, levels)
    got, _, meta = read_lobster_file(book)
    day = np.datetime64("2012-06-21", "ns").astype(np.int64)
    assert np.array_equal(got["ts_ns"], day + rec["ts_ns"] % (86400 * 10**9))
    assert meta["instrument"] == "AAPL" and meta["notes"] == []
    for f in ("bid_px", "ask_px", "bid_sz", "ask_sz"):
        assert np.array_equal(got[f][:, :levels], rec[f][:, :levels]), f
    assert np.all(got["bid_px"][:, levels:] == PRICE_UNDEF) and np.all(got["ask_sz"][:, levels:] == 0)
    assert np.array_equal(got["trade_count"], rec["trade_count"])


def read_lobster_file(path):
    from foxc.data.lobster import read_lobster
    return read_lobster(path)


def test_lobster_without_messages_uses_row_order(tmp_path):
    book = write_lobster(tmp_path, lobster_records(), 10, message=False)
    got, _, meta = read_lobster_file(book)
    assert "no message file" in meta["notes"][0]
    assert np.all(np.diff(got["ts_ns"]) == 1000)
    data = load(tmp_path)
    assert "no message file" in data.report.summary()


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
