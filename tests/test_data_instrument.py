"""--instrument ID: one instrument's rows of a file that interleaves several (a parent symbol's download, ES.FUT).

The rows kept are exactly the decoded rows of that id, validated on their own: compared with a filter of the raw
decoded rows (read_dbn, read_parquet), through load(), a prepared cache and the commands.
"""
import argparse
import datetime as dt
import hashlib
import json
import re
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_files import FIXTURES, NEEDS_DBN, dbn_bytes
from foxc.data.dbn import MBP10_BYTES, MBP10_DTYPE, RTYPE_MBP10, read_dbn
from foxc.data.market import finish
from foxc.data.parquet import read_parquet, write_parquet
from foxc.data.select import instrument_arg
from foxc.data.source import load
from foxc.data.stream import FileStream
from foxc.data.synthetic import generate
from foxc.data.validate import DataError, ValidationConfig, apply
from test_data_stream import troubled

PARENT_DBN = FIXTURES / "mbp10.v2.dbn"  # ESH1 (5482), ESH1-ESM1 (42005204, negative prices), NQH1 (13615) interleaved
IDS = {11: "ESM4", 22: "ESU4", 33: "NQM4"}


def mapped_dbn(path, rows: int = 3000):
    """PARENT_DBN's metadata (its symbol mappings: ESH1 to 5482, NQH1 to 13615) over `rows` synthetic snapshots each
    of 13615 and 5482, interleaved: DBN MBP-10 records written with foxc's own dtype (no databento-dbn needed)."""
    head = PARENT_DBN.read_bytes()
    out = np.zeros(2 * rows, MBP10_DTYPE)
    out["length"], out["rtype"] = MBP10_BYTES // 4, RTYPE_MBP10
    for first, (iid, seed) in enumerate(((13615, 1), (5482, 2))):
        rec, mine = generate(rows, seed=seed), out[first::2]
        mine["instrument_id"], mine["ts_event"], mine["ts_recv"] = iid, rec["ts_ns"], rec["ts_ns"]
        for side in ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct"):
            mine["levels"][side] = rec[side]
    path.write_bytes(head[:8 + int.from_bytes(head[4:8], "little")] + out.tobytes())  # prelude, metadata, records
    return path


def parent_parquet(path, seeds=(1, 2, 3), rows=(400, 300, 200), shift: int = 0):
    """A Parquet file of three instruments' books interleaved in time (troubled: every kind of skipped row), each
    row's symbol its instrument's; `shift`: ns added to every time."""
    parts = []
    for (iid, _), seed, n in zip(IDS.items(), seeds, rows):
        rec = troubled(n, seed)
        rec["instrument_id"] = iid
        rec["ts_ns"] += shift
        parts.append(rec)
    rec = np.concatenate(parts)
    rec = rec[np.argsort(rec["ts_ns"], kind="stable")]
    write_parquet(path, rec, row_group_rows=128)
    table = pq.read_table(path)
    symbols = pa.array([IDS[i] for i in rec["instrument_id"].tolist()])
    pq.write_table(table.set_column(table.schema.get_field_index("symbol"), "symbol", symbols), path,
                   row_group_size=128)
    return path


def expected(raw, bad, iid, cfg=ValidationConfig()):
    """What --instrument iid must give: the raw decoded rows of that id, validated on their own as one segment."""
    mine = raw["instrument_id"] == iid
    kept, skipped = apply(raw[mine], None if bad is None else bad[mine], cfg)
    kept = kept.copy()
    kept["segment"] = 0
    return finish(kept), int(mine.sum()), skipped


def others(raw, iid):
    ids, counts = np.unique(raw["instrument_id"][raw["instrument_id"] != iid], return_counts=True)
    return {str(i): int(n) for i, n in zip(ids.tolist(), counts.tolist())}


@pytest.mark.parametrize("rows", [1, 5, 1 << 14])
def test_the_rows_of_one_instrument_are_a_filter_of_the_decoded_rows_validated_alone(tmp_path, rows):
    """Selected before validation: time order and the skip counts are the instrument's own, and the other
    instruments' rows are counted per id, not silently dropped."""
    for path, read in ((PARENT_DBN, read_dbn), (parent_parquet(tmp_path / "parent.parquet"), read_parquet)):
        raw, bad, _ = read(path)
        for iid in np.unique(raw["instrument_id"]).tolist():
            want, read_rows, skipped = expected(raw, bad, iid)
            if not len(want):  # the calendar spread's negative prices: every row skipped
                continue
            stream = FileStream(path, rows=rows, instrument=str(iid))
            got = np.concatenate(list(stream))
            assert got.tobytes() == want.tobytes(), (path.name, iid, rows)
            summary = stream.summary()
            assert (summary.rows_read, summary.rows, summary.skipped) == (read_rows, len(want), skipped)
            assert summary.instrument_id == iid and summary.other_instruments == others(raw, iid)
            assert summary.segments == [(len(want), int(want["ts_ns"][0]), int(want["ts_ns"][-1]))]


def test_load_keeps_the_instrument_and_reports_the_others(tmp_path):
    path = parent_parquet(tmp_path / "parent.parquet")
    raw, bad, _ = read_parquet(path)
    data = load(path, instrument="22")
    want, read_rows, skipped = expected(raw, bad, 22)
    assert data.records.tobytes() == want.tobytes()
    assert (data.instrument, data.instrument_id, data.n_segments, data.files) == ("ESU4", 22, 1, [str(path)])
    entry = data.report.to_dict()["files"][str(path)]
    assert entry == {"rows_read": read_rows, "rows_kept": len(want), "skipped": {k: v for k, v in skipped.items() if v},
                     "notes": [], "instrument_id": 22, "instrument": "ESU4", "other_instruments": {"11": 400, "33": 200}}
    assert data.report.to_dict()["rows_other_instruments"] == 600
    summary = data.report.summary()
    assert f"{read_rows} rows read, {len(want)} kept" in summary and "600 rows of other instruments left out" in summary
    assert "instrument_id 22 kept; rows of other instruments left out: instrument_id 11 (400), 33 (200)" in summary
    assert load(path, instrument="0022").records.tobytes() == want.tobytes(), "an id's leading zeros change nothing"


def test_a_dbn_symbol_is_resolved_by_the_files_symbol_mappings():
    by_id, by_symbol = load(PARENT_DBN, instrument="13615"), load(PARENT_DBN, instrument="NQH1")
    assert by_id.records.tobytes() == by_symbol.records.tobytes() and len(by_id.records)
    assert (by_symbol.instrument, by_symbol.instrument_id) == ("NQH1", 13615)
    assert load(PARENT_DBN, instrument="ESH1").instrument_id == 5482


@pytest.mark.parametrize("given, words", [
    ("999", ["--instrument 999: no row of the file is instrument_id 999; it holds instrument_id 5482 (7 rows), "
             "13615 (7 rows), 42005204 (10 rows)"]),
    ("ESM4", ["--instrument ESM4: not an instrument_id, and the file's symbols do not name it (they map "
              "ESH1 to 5482, ESH1-ESM1 to 42005204, NQH1 to 13615)"]),
    ("42005204", ["no usable rows of instrument_id 42005204 (--instrument 42005204): all 10 skipped"]),
])
def test_an_instrument_the_file_does_not_hold_is_refused_naming_the_file_and_its_ids(given, words):
    with pytest.raises(DataError) as err:
        load(PARENT_DBN, instrument=given)
    assert str(err.value).startswith(f"{PARENT_DBN}: ") and "\n" not in str(err.value)
    for w in words:
        assert w in str(err.value), str(err.value)


def counted_chunks(monkeypatch) -> list[int]:
    """The rows of each chunk FileStream's readers yield, from now on."""
    from foxc.data import stream as stream_mod
    chunks, real = [], stream_mod.reader

    def counted(kind):
        def read(*args):
            for raw, bad in real(kind)(*args):
                chunks.append(len(raw))
                yield raw, bad
        return read
    monkeypatch.setattr(stream_mod, "reader", counted)
    return chunks


def test_a_symbol_a_dbn_files_metadata_does_not_map_is_refused_at_its_first_chunk(monkeypatch):
    """A historical DBN file's metadata maps all its symbols up front: a symbol it does not name (a typo) is refused
    when the first chunk is read, not after the whole file (a live stream's mappings may come later: read on)."""
    chunks = counted_chunks(monkeypatch)
    with pytest.raises(DataError, match="ESM4: not an instrument_id, and the file's symbols do not name it"):
        list(FileStream(PARENT_DBN, instrument="ESM4", rows=4))
    assert chunks == [4]


@pytest.mark.parametrize("drop, words", [
    (None, "the file's symbols do not name it (they map ESU4 to 22, ESM4 to 11, NQM4 to 33): give one of those "
           "symbols or an instrument_id"),
    ("instrument_id", "the file's symbols do not name it (they are ESU4, ESM4, NQM4): give one of those symbols or "
                      "an instrument_id"),
    ("symbol", "the file maps no symbol to an instrument_id (DBN symbol mappings and a Parquet symbol column do): "
               "give the instrument_id"),
])
def test_a_symbol_a_parquet_file_does_not_name_is_refused_before_its_rows_are_read(tmp_path, monkeypatch, drop,
                                                                                     words):
    """Its `symbol` column (with `instrument_id`, to name the ids) is read first, not its rows (a multi-GB file's
    minutes): a symbol it does not name is refused at once, with the message reading the whole file ends with."""
    path = parent_parquet(tmp_path / "parent.parquet")
    if drop:
        pq.write_table(pq.read_table(path).drop([drop]), path, row_group_size=128)
    chunks = counted_chunks(monkeypatch)
    with pytest.raises(DataError) as err:
        list(FileStream(path, instrument="ESH4", rows=64))
    assert str(err.value) == f"{path}: --instrument ESH4: not an instrument_id, and {words}"
    assert chunks == [], "refused before any row was read"
    chunks.clear()
    kept = FileStream(path, instrument="ESU4" if drop != "symbol" else "22", rows=64)
    assert sum(map(len, kept)) and chunks, "a symbol the file names is read as before"


def test_a_parquet_symbol_is_resolved_by_its_symbol_column(tmp_path):
    """Databento's Parquet (map_symbols) names each row's instrument in `symbol`: ESU4 keeps the rows of the id the
    file names ESU4, one selection with that id (one cache identity, each spelling accepted by the other's cache)."""
    from foxc.data.cache import check_selection
    from foxc.data.prepare import prepare
    path = parent_parquet(tmp_path / "parent.parquet")
    for iid, symbol in IDS.items():
        by_symbol = load(path, instrument=symbol)
        assert by_symbol.records.tobytes() == load(path, instrument=str(iid)).records.tobytes()
        assert (by_symbol.instrument, by_symbol.instrument_id) == (symbol, iid)
    caches = {given: prepare(path, tmp_path / given, rows=64, instrument=given) for given in ("ESU4", "22")}
    assert caches["ESU4"]["sha256"] == caches["22"]["sha256"] and caches["ESU4"]["instrument_selection"] == "22"
    for given, manifest in caches.items():
        check_selection(tmp_path / given, manifest, "ESU4" if given == "22" else "22")
    with pytest.raises(DataError, match=r"parent\.parquet: --instrument ESH4: not an instrument_id, and the file's "
                                        r"symbols do not name it \(they map ESU4 to 22, ESM4 to 11, NQM4 to 33\): "
                                        "give one of those symbols or an instrument_id"):
        load(path, instrument="ESH4")


def test_a_symbol_is_refused_where_the_file_maps_none(tmp_path):
    (tmp_path / "bare.dbn").write_bytes(dbn_bytes(troubled(50, 1)))  # metadata without mappings
    table = pq.read_table(parent_parquet(tmp_path / "parent.parquet"))
    pq.write_table(table.drop(["symbol"]), tmp_path / "ids.parquet")
    for name in ("bare.dbn", "ids.parquet"):
        with pytest.raises(DataError, match=rf"{name}: --instrument ESM4: not an instrument_id, and the file maps no "
                                            r"symbol to an instrument_id \(DBN symbol mappings and a Parquet symbol "
                                            r"column do\): give the instrument_id"):
            load(tmp_path / name, instrument="ESM4")


def rolling(path, day=dt.date(2024, 1, 2)):
    """ES.c.0 rolling from 5482 (300 rows) to 13615 (200 rows), its rows interleaved with NQ.c.0's (7, 400 rows):
    Parquet (`symbol` each row's continuous symbol) or DBN (the metadata's mappings), as `path` is named."""
    parts = [generate(300, seed=1), generate(200, seed=2), generate(400, seed=3)]
    parts[1]["ts_ns"] += parts[0]["ts_ns"][-1] - parts[1]["ts_ns"][0] + 1  # after the first contract's last row
    for rec, iid in zip(parts, (5482, 13615, 7)):
        rec["instrument_id"] = iid
    rec = np.concatenate(parts)
    rec = rec[np.argsort(rec["ts_ns"], kind="stable")]
    if path.suffix == ".parquet":
        write_parquet(path, rec)
        table = pq.read_table(path)
        symbols = pa.array(np.where(rec["instrument_id"] == 7, "NQ.c.0", "ES.c.0"))
        pq.write_table(table.set_column(table.schema.get_field_index("symbol"), "symbol", symbols), path)
        return path
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    span = lambda iid, a, b: SimpleNamespace(start_date=day + dt.timedelta(a), end_date=day + dt.timedelta(b),  # noqa
                                             symbol=str(iid))
    mappings = [SimpleNamespace(raw_symbol="ES.c.0", intervals=[span(5482, 0, 1), span(13615, 1, 2)]),
                SimpleNamespace(raw_symbol="NQ.c.0", intervals=[span(7, 0, 2)])]
    head = dbn.Metadata(dataset="GLBX.MDP3", start=int(rec["ts_ns"][0]), stype_in=dbn.SType.CONTINUOUS,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBP_10, symbols=["ES.c.0", "NQ.c.0"],
                        mappings=mappings, version=2).encode()
    path.write_bytes(head + records_dbn(rec))
    return path


def records_dbn(rec) -> bytes:
    """Snapshots as DBN MBP-10 records, written with foxc's own dtype."""
    out = np.zeros(len(rec), MBP10_DTYPE)
    out["length"], out["rtype"] = MBP10_BYTES // 4, RTYPE_MBP10
    out["instrument_id"], out["ts_event"], out["ts_recv"] = rec["instrument_id"], rec["ts_ns"], rec["ts_ns"]
    for side in ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct"):
        out["levels"][side] = rec[side]
    return out.tobytes()


@pytest.mark.parametrize("name", ["roll.parquet", "roll.dbn"])
def test_a_continuous_symbol_keeps_each_of_its_contracts_a_segment(tmp_path, name):
    """A symbol the file maps to several ids, one after another (ES.c.0's roll), keeps the rows of each, a segment
    each, as the file of that symbol alone would be read; it is its own selection (no one id names its rows)."""
    from foxc.data.cache import check_selection
    from foxc.data.prepare import prepare
    path = rolling(tmp_path / name)
    data = load(path, instrument="ES.c.0")
    raw = read_parquet(path)[0] if name.endswith("parquet") else read_dbn(path)[0]
    mine = np.isin(raw["instrument_id"], [5482, 13615])
    assert data.records["ts_ns"].tolist() == raw["ts_ns"][mine].tolist()
    assert [b.tolist() for b in data.segment_bounds()] == [[0, 300], [300, 500]]
    assert (data.instrument, data.instrument_id) == ("ES.c.0", 0)
    assert data.report.to_dict()["files"][str(path)]["other_instruments"] == {"7": 400}
    assert "ES.c.0 kept; rows of other instruments left out: instrument_id 7 (400)" in data.report.summary()
    manifest = prepare(path, tmp_path / "cache", rows=64, instrument="ES.c.0")
    assert manifest["instrument_selection"] == "ES.c.0"
    check_selection(tmp_path / "cache", manifest, "ES.c.0")
    with pytest.raises(DataError, match=r"prepared with --instrument ES\.c\.0, not this --instrument 0"):
        check_selection(tmp_path / "cache", manifest, "0")
    assert load(path, instrument="NQ.c.0").instrument_id == 7


DAY_NS = 86_400 * 10**9


def overlapping(path, day=dt.date(2024, 1, 2)):
    """ES.c.0 and ES.c.1 over two days (DBN metadata mappings): ES.c.0 is 5482 on day 0 and 13615 on day 1, ES.c.1
    13615 on day 0 and 7 on day 1; ES.v.0 13615 on day 1 only; ES.n.0 5482 on day 0, as ES.c.0. Each day two
    contracts' rows interleave. 13615's last day-0 row is 1 ns before midnight, its first day-1 row at midnight
    (ts_event 1 ns before: the date is ts_recv's); 5482 has 20 rows on day 1, where no symbol maps it. The ts_ns of
    each part, by name."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    midnight = int(np.datetime64(day + dt.timedelta(1), "ns").astype(np.int64))
    parts = {"A0": generate(300, seed=1), "B0": generate(200, seed=2), "B1": generate(250, seed=3),
             "C1": generate(150, seed=4), "A1": generate(20, seed=5)}
    for name, iid in (("A0", 5482), ("B0", 13615), ("B1", 13615), ("C1", 7), ("A1", 5482)):
        parts[name]["instrument_id"] = iid
        parts[name]["ts_ns"] += DAY_NS * (name[1] == "1")
    parts["B0"]["ts_ns"][-1] = midnight - 1
    parts["B1"]["ts_ns"] += midnight - parts["B1"]["ts_ns"][0]
    rec = np.concatenate(list(parts.values()))
    order = np.argsort(rec["ts_ns"], kind="stable")
    out = np.frombuffer(records_dbn(rec[order]), MBP10_DTYPE).copy()
    out["ts_event"][out["ts_recv"] == midnight] = midnight - 1
    span = lambda iid, a, b: SimpleNamespace(start_date=day + dt.timedelta(a), end_date=day + dt.timedelta(b),  # noqa
                                             symbol=str(iid))
    mappings = [SimpleNamespace(raw_symbol="ES.c.0", intervals=[span(5482, 0, 1), span(13615, 1, 2)]),
                SimpleNamespace(raw_symbol="ES.c.1", intervals=[span(13615, 0, 1), span(7, 1, 2)]),
                SimpleNamespace(raw_symbol="ES.v.0", intervals=[span(13615, 1, 2)]),
                SimpleNamespace(raw_symbol="ES.n.0", intervals=[span(5482, 0, 1)])]
    head = dbn.Metadata(dataset="GLBX.MDP3", start=int(rec["ts_ns"].min()), stype_in=dbn.SType.CONTINUOUS,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBP_10,
                        symbols=[m.raw_symbol for m in mappings], mappings=mappings, version=2).encode()
    path.write_bytes(head + out.tobytes())
    return {name: part["ts_ns"].tolist() for name, part in parts.items()}


@pytest.mark.parametrize("given, segments, others, iid", [
    ("ES.c.0", [["A0"], ["B1"]], {"7": 150, "5482": 20, "13615": 200}, 0),
    ("ES.c.1", [["B0"], ["C1"]], {"5482": 320, "13615": 250}, 0),
    ("ES.v.0", [["B1"]], {"7": 150, "5482": 320, "13615": 200}, 0),
    ("ES.n.0", [["A0", "A1"]], {"7": 150, "13615": 450}, 5482),
])
def test_a_continuous_symbol_keeps_its_contracts_rows_on_the_dates_its_mappings_give(tmp_path, given, segments,
                                                                                       others, iid):
    """ES.c.0 and ES.c.1 share 13615 across the roll: selected by id, 5482's and 13615's rows interleaved on day 0 and
    the file was refused. Where another symbol maps one of a symbol's ids on other dates, its ids' rows are its own on
    the dates its mapping intervals give (UTC, the start inclusive, the end exclusive, by ts_recv), a segment each,
    and it is its own selection (ES.v.0 keeps 13615's day-1 rows, not all of 13615's); where none does (ES.n.0: 5482
    on ES.c.0's dates), its ids' rows, as ever, and it is the id it keeps (named by its first symbol, ES.c.0)."""
    from foxc.data.prepare import prepare
    path = tmp_path / "both.dbn"
    parts = overlapping(path)
    data = load(path, instrument=given)
    assert data.records["ts_ns"].tolist() == [t for names in segments for name in names for t in parts[name]]
    small = np.concatenate(list(FileStream(path, rows=64, instrument=given)))  # intervals met across chunks
    assert small[["ts_ns", "segment"]].tolist() == data.records[["ts_ns", "segment"]].tolist()
    edges = np.cumsum([0, *(sum(len(parts[name]) for name in names) for names in segments)]).tolist()
    assert [b.tolist() for b in data.segment_bounds()] == [edges[:-1], edges[1:]]
    assert (data.instrument_id, data.instrument) == (iid, "ES.c.0" if iid else given)
    assert data.report.to_dict()["files"][str(path)]["other_instruments"] == others
    manifest = prepare(path, tmp_path / "cache", rows=64, instrument=given)
    assert manifest["instrument_selection"] == str(iid or given), "the selection's identity"
    assert len(load(path, instrument="13615").records) == 450, "an id keeps all its rows"


def test_a_mapping_date_that_is_no_date_is_refused_naming_it(tmp_path):
    path = tmp_path / "both.dbn"
    overlapping(path)
    data = path.read_bytes()
    at = data.index(struct.pack("<I", 20240103))  # ES.c.0's first interval's end_date, as the dbn crate writes it
    path.write_bytes(data[:at] + struct.pack("<I", 20241303) + data[at + 4:])
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}: corrupt DBN metadata: the mapping of 'ES\.c\.0' "
                                        "has an interval date 20241303, not YYYYMMDD$"):
        read_dbn(path)


def test_the_dbn_symbol_mappings_are_databentos():
    """foxc's reading of the metadata's mappings against Databento's decoder, on every fixture."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    for path in sorted(FIXTURES.glob("*.dbn*")):
        dec = dbn.DBNDecoder(upgrade_policy=dbn.VersionUpgradePolicy.AS_IS,
                             compression=dbn.Compression.ZSTD if path.name.endswith(".zst") else dbn.Compression.NONE)
        dec.write(path.read_bytes())
        want = {raw: [int(interval["symbol"]) for interval in intervals]
                for raw, intervals in dec.decode()[0].mappings.items()}
        got = read_dbn(path)[2]["symbol_ids"]
        assert got == want and got, path.name


def mapping_record(version: int, iid: int, given: str, raw: str, start: int = 0, end: int = 2**63) -> bytes:
    """A live stream's SymbolMappingMsg (DBN `version`'s layout), written by databento-dbn: continuous symbol
    `given` to raw symbol `raw`, instrument_id `iid`, from `start` to before `end` (ns)."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    if version == 1:
        return bytes(dbn.SymbolMappingMsgV1(1, iid, 0, given, raw, start, end))
    return bytes(dbn.SymbolMappingMsg(1, iid, 0, dbn.SType.CONTINUOUS, given, dbn.SType.RAW_SYMBOL, raw, start, end))


def live_head(version: int, start: int, symbols: list[str]) -> bytes:
    """A live stream's DBN metadata: no mappings (its records carry them)."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    return dbn.Metadata(dataset="GLBX.MDP3", start=start, stype_in=dbn.SType.CONTINUOUS,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBP_10, symbols=symbols,
                        version=version).encode()


def live_dbn(path, version: int):
    """A live stream's DBN file: metadata without mappings, then SymbolMappingMsg records (ES.c.0 to ESH1, 5482, at
    the start; NQ.c.0 to NQH1, 13615, before NQH1's first row, mid-stream) among mapped_dbn's MBP-10 records (13615
    and 5482 interleaved, NQH1's first 1000 rows left out)."""
    records = np.frombuffer(mapped_dbn(path).read_bytes()[-2 * 3000 * MBP10_BYTES:], MBP10_DTYPE)
    records = records[(records["instrument_id"] == 5482) | (np.arange(len(records)) >= 2000)]
    first_nq = int(np.flatnonzero(records["instrument_id"] == 13615)[0])
    path.write_bytes(live_head(version, int(records["ts_recv"][0]), ["ES.c.0", "NQ.c.0"])
                     + mapping_record(version, 5482, "ES.c.0", "ESH1") + records[:first_nq].tobytes()
                     + mapping_record(version, 13615, "NQ.c.0", "NQH1") + records[first_nq:].tobytes())
    return path


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_live_streams_symbol_mapping_records_resolve_a_symbol(tmp_path, version):
    """Databento's live DBN carries its symbol mappings as records in the stream (rtype 0x16; v1's symbols 22
    bytes, v2's and v3's 71 behind an stype byte), not in the metadata: read as the metadata's, against Databento's
    decoder; a mapping that comes mid-stream resolves the rows that follow it."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    path = live_dbn(tmp_path / f"live.v{version}.dbn", version)
    decoder = dbn.DBNDecoder(upgrade_policy=dbn.VersionUpgradePolicy.AS_IS)
    decoder.write(path.read_bytes())
    want = {}
    for r in decoder.decode()[1:]:
        if r.rtype == dbn.RType.SYMBOL_MAPPING:
            want |= {r.stype_out_symbol: [r.instrument_id], r.stype_in_symbol: [r.instrument_id]}
    assert read_dbn(path)[2]["symbol_ids"] == want == {"ESH1": [5482], "ES.c.0": [5482], "NQH1": [13615],
                                                       "NQ.c.0": [13615]}
    for iid, symbols in ((5482, ("ESH1", "ES.c.0")), (13615, ("NQH1", "NQ.c.0"))):
        by_id = FileStream(path, rows=64, instrument=str(iid))
        rows = np.concatenate(list(by_id))
        assert len(rows) == (3000 if iid == 5482 else 2000)
        for symbol in symbols:
            by_symbol = FileStream(path, rows=64, instrument=symbol)
            assert np.concatenate(list(by_symbol)).tobytes() == rows.tobytes()
            assert (by_symbol.summary().instrument, by_symbol.summary().instrument_id) == (symbols[0], iid)
    with pytest.raises(DataError, match=r"the file's symbols do not name it \(they map ESH1 to 5482, ES\.c\.0 to "
                                        r"5482, NQH1 to 13615, NQ\.c\.0 to 13615\)"):
        load(path, instrument="ESM4")
    data = bytearray(path.read_bytes())
    at = data.index(b"ESH1") - (38 if version == 1 else 89)  # the mapping record's header
    data[at] = 16  # 64 bytes, shorter than the layout
    (tmp_path / "short.dbn").write_bytes(bytes(data[:at + 64]) + bytes(data[at + (80 if version == 1 else 176):]))
    with pytest.raises(DataError, match=rf"short\.dbn: symbol mapping record at byte {at} has length 64 < "):
        read_dbn(tmp_path / "short.dbn")


def live_roll(path, version: int, day=dt.date(2024, 1, 2)) -> dict:
    """A live stream of ES.c.0 and ES.c.1 across a roll, its mappings as records (rtype 0x16), each for its day:
    ES.c.0 is ESH4 (5482) on day 0 and ESM4 (13615) on day 1, ES.c.1 ESM4 on day 0 and ESU4 (7) on day 1. Day 0's
    rows interleave 5482's (A0) and 13615's (B0), day 1's 13615's (B1) and 7's (C1); B0's last row is 1 ns before
    midnight, B1's first at midnight. ES.c.0's record comes first; ES.c.1's (a later subscription) after the first
    10 rows; both roll records (day 1's mappings) before the last 5 of day 0. The ts_ns of each part, by name, and
    of the rows before ES.c.1's record ("early")."""
    d0 = int(np.datetime64(day, "ns").astype(np.int64))
    d1, d2 = d0 + DAY_NS, d0 + 2 * DAY_NS
    parts = {"A0": generate(300, seed=1), "B0": generate(200, seed=2), "B1": generate(250, seed=3),
             "C1": generate(150, seed=4)}
    for name, iid in (("A0", 5482), ("B0", 13615), ("B1", 13615), ("C1", 7)):
        parts[name]["instrument_id"] = iid
        parts[name]["ts_ns"] += DAY_NS * (name[1] == "1")
    parts["B0"]["ts_ns"][-1] = d1 - 1
    for name in ("C1", "B1"):  # to midnight, together
        parts[name]["ts_ns"] += d1 - parts["B1"]["ts_ns"][0]
    rec = np.concatenate(list(parts.values()))
    rows = records_dbn(rec[np.argsort(rec["ts_ns"], kind="stable")])
    at = lambda i: MBP10_BYTES * i  # noqa: E731
    roll = 500 - 5
    path.write_bytes(live_head(version, d0, ["ES.c.0", "ES.c.1"])
                     + mapping_record(version, 5482, "ES.c.0", "ESH4", d0, d1) + rows[:at(10)]
                     + mapping_record(version, 13615, "ES.c.1", "ESM4", d0, d1) + rows[at(10):at(roll)]
                     + mapping_record(version, 13615, "ES.c.0", "ESM4", d1, d2)
                     + mapping_record(version, 7, "ES.c.1", "ESU4", d1, d2) + rows[at(roll):])
    ts = {name: part["ts_ns"].tolist() for name, part in parts.items()}
    ts["early"] = np.sort(rec["ts_ns"], kind="stable")[:10].tolist()
    return ts


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("given, segments, others", [
    ("ES.c.0", [["A0"], ["B1"]], {"7": 150, "13615": 200}),
    ("ES.c.1", [["B0"], ["C1"]], {"5482": 300, "13615": 250}),
    ("ESM4", [["B0", "B1"]], {"7": 150, "5482": 300}),
])
def test_a_live_streams_mapping_records_keep_a_symbols_rows_in_their_intervals(tmp_path, version, given, segments,
                                                                               others):
    """ES.c.0 and ES.c.1 of a live stream share ESM4 across the roll: selected by id, the file was refused as
    interleaved. A mapping record maps its symbols to its id from start_ts (inclusive) to end_ts (exclusive), by
    ts_recv, in the rows after it (rows before a symbol's first record are not its own: ES.c.1's and ESM4's lose
    ESM4's first rows); where another symbol maps one of a symbol's ids at other times, its rows are those its
    records give, a segment each (as a historical file's by its metadata's dates); where none does (ESM4: its
    two records join), its ids' rows after its first record. Either way its own selection, whatever the chunks."""
    from foxc.data.prepare import prepare
    path = tmp_path / "live.dbn"
    ts = live_roll(path, version)
    early = set(ts["early"])
    assert early & set(ts["A0"]) and early & set(ts["B0"]), "the rows before ES.c.1's record hold both contracts"
    want = [[t for name in names for t in ts[name] if not (name == "B0" and given != "ES.c.0" and t in early)]
            for names in segments]
    if given != "ES.c.0":  # ESM4's rows before ES.c.1's record: no symbol's
        others = {**others, "13615": others.get("13615", 0) + len(early & set(ts["B0"]))}
    data = load(path, instrument=given)
    assert data.records["ts_ns"].tolist() == [t for seg in want for t in seg]
    stream = FileStream(path, rows=7, instrument=given)  # records met across chunks (ESM4's first in the second)
    small = np.concatenate(list(stream))
    assert small[["ts_ns", "segment"]].tolist() == data.records[["ts_ns", "segment"]].tolist()
    assert (stream.summary().instrument_id, stream.summary().instrument) == (0, given)
    edges = np.cumsum([0, *map(len, want)]).tolist()
    assert [b.tolist() for b in data.segment_bounds()] == [edges[:-1], edges[1:]]
    assert (data.instrument_id, data.instrument) == (0, given)
    assert data.report.to_dict()["files"][str(path)]["other_instruments"] == others
    assert prepare(path, tmp_path / "cache", rows=64, instrument=given)["instrument_selection"] == given


@pytest.mark.parametrize("version", [1, 2])
def test_a_live_mapping_records_interval_is_its_start_ts_to_its_end_ts_from_the_row_after_it(tmp_path, version):
    """start_ts and end_ts as databento-dbn writes them (v1's behind 4 padding bytes); UNDEF_TIMESTAMP (2^64 - 1) is
    an open start or end, as databento's InstrumentMap.insert_symbol_mapping_msg takes it."""
    live_roll(tmp_path / "roll.dbn", version)
    d0 = int(np.datetime64(dt.date(2024, 1, 2), "ns").astype(np.int64))
    assert read_dbn(tmp_path / "roll.dbn")[2]["mapped"]["ESM4"] == [(13615, d0, d0 + DAY_NS, 10),
                                                                    (13615, d0 + DAY_NS, d0 + 2 * DAY_NS, 495)]
    rec = generate(50, seed=1)
    rec["instrument_id"] = 5482
    undef = 2**64 - 1
    path = tmp_path / "open.dbn"
    path.write_bytes(live_head(version, 0, ["ES.c.0"]) + mapping_record(version, 5482, "ES.c.0", "ESH4", undef, undef)
                     + records_dbn(rec))
    assert read_dbn(path)[2]["mapped"] == {"ESH4": [(5482, 0, 2**63 - 1, 0)], "ES.c.0": [(5482, 0, 2**63 - 1, 0)]}
    assert len(load(path, instrument="ES.c.0").records) == len(load(path, instrument="5482").records) > 0


def test_without_instrument_an_interleaved_file_is_refused_saying_how_to_pick_one(tmp_path):
    with pytest.raises(DataError) as err:
        load(PARENT_DBN)
    assert ("(instrument_id 5482, 42005204, 13615 so far; a parent symbol's file, e.g. ES.FUT), and a file is read as "
            "one book: give --instrument ID to keep one instrument's rows (e.g. --instrument 5482)") in str(err.value)
    path = parent_parquet(tmp_path / "parent.parquet")
    raw = read_parquet(path)[0]["instrument_id"]
    again = next(i for i in range(1, len(raw)) if raw[i] != raw[i - 1] and raw[i] in raw[:i])
    first = list(dict.fromkeys(raw.tolist()))  # every id of the chunk read, not only those before the repeat
    assert len(set(raw[:again].tolist())) < 3
    with pytest.raises(DataError, match=rf"parent\.parquet, row {again}: .*\(instrument_id "
                                        rf"{', '.join(map(str, first))} so far; .*give --instrument ID"):
        load(path)


@pytest.mark.parametrize("text, want", [("5482", "5482"), ("007", "7"), (" ESM4 ", "ESM4"),
                                        ("4294967295", "4294967295"), ("ESH1-ESM1", "ESH1-ESM1")])
def test_the_flags_value_is_an_id_or_a_symbol(text, want):
    assert instrument_arg(text) == want


@pytest.mark.parametrize("text, words", [("", "an empty instrument"), ("4294967296", "outside 0 to 2^32 - 1"),
                                         ("-3", "outside"), ("ES M4", "no spaces")])
def test_the_flags_value_is_refused_naming_why(text, words):
    with pytest.raises(argparse.ArgumentTypeError, match=re.escape(words)):
        instrument_arg(text)


# ---- a prepared cache ------------------------------------------------------------------------------------------

def test_a_cache_of_one_instrument_holds_the_rows_load_keeps(tmp_path):
    from foxc.data.cache import MANIFEST, content_sha256, open_cache
    from foxc.data.labels import LabelConfig, compute_labels
    from foxc.data.prepare import prepare
    folder = tmp_path / "in"
    folder.mkdir()
    parent_parquet(folder / "a.parquet")
    parent_parquet(folder / "b.parquet", seeds=(4, 5, 6), rows=(100, 250, 150))
    raw = {name: read_parquet(folder / name)[:2] for name in ("a.parquet", "b.parquet")}
    for workers in (1, 2):
        manifest = prepare(folder, tmp_path / f"cache{workers}", workers=workers, rows=64, instrument="33")
        want = load(folder, instrument="33")
        parts = [expected(*raw[name], 33)[0] for name in ("a.parquet", "b.parquet")]
        order = np.argsort([p["ts_ns"][0] for p in parts], kind="stable")
        assert want.records["ts_ns"].tolist() == np.concatenate([parts[i] for i in order])["ts_ns"].tolist()
        cache = open_cache(tmp_path / f"cache{workers}", LabelConfig())
        assert cache.market.records.tobytes() == want.records.tobytes()
        assert cache.labels.tobytes() == compute_labels(want.records, want.tick, LabelConfig()).tobytes()
        assert cache.market.report.to_dict() == want.report.to_dict() and cache.market.instrument == "NQM4"
        assert manifest["instrument_selection"] == "33" and manifest["sha256"] == content_sha256(manifest)
        for shard in manifest["shards"]:
            name = shard["sources"][0]["path"].rsplit("/", 1)[1]
            read = shard["read"]
            assert (read["instrument_id"], read["other_instruments"]) == (33, others(raw[name][0], 33))
    other = prepare(folder, tmp_path / "other", rows=64, instrument="11")
    assert other["sha256"] != manifest["sha256"], "the selection is part of the cache's identity"
    edited = json.loads((tmp_path / "cache1" / MANIFEST).read_text())
    edited["instrument_selection"] = "11"
    (tmp_path / "cache1" / MANIFEST).write_text(json.dumps(edited))
    with pytest.raises(DataError, match="sha256 is not the digest"):
        open_cache(tmp_path / "cache1", LabelConfig())


def test_a_cache_is_refused_for_another_selection_naming_both(tmp_path):
    from foxc.data.cache import check_selection, read_manifest
    from foxc.data.prepare import prepare
    path = parent_parquet(tmp_path / "parent.parquet")
    prepare(path, tmp_path / "c22", rows=64, instrument="22")
    one = tmp_path / "one.parquet"
    write_parquet(one, troubled(300, 7))
    prepare(one, tmp_path / "plain", rows=64)
    m22, plain = read_manifest(tmp_path / "c22"), read_manifest(tmp_path / "plain")
    check_selection(tmp_path / "c22", m22, "22")
    check_selection(tmp_path / "plain", plain, None)
    for manifest, given, words in ((m22, "11", "prepared with --instrument 22, not this --instrument 11"),
                                   (m22, None, "prepared with --instrument 22, and no --instrument is given now"),
                                   (plain, "22", "prepared without --instrument, not with this --instrument 22")):
        folder = tmp_path / ("c22" if manifest is m22 else "plain")
        with pytest.raises(DataError) as err:
            check_selection(folder, manifest, given)
        assert str(err.value).startswith(f"{folder}: {words}"), str(err.value)
        assert f"--out NEWCACHE{f' --instrument {given}' if given else ''})" in str(err.value)


def test_prepare_and_inspect_take_the_flag(tmp_path, capsys):
    from foxc.data.__main__ import main
    path = parent_parquet(tmp_path / "parent.parquet")
    assert main(["prepare", str(path), "--out", str(tmp_path / "c"), "--workers", "1", "--instrument", "22"]) == 0
    assert "(--instrument 22; 600 rows of other instruments left out)" in capsys.readouterr().out
    for target in (path, tmp_path / "c"):
        assert main(["inspect", str(target), "--instrument", "22"]) == 0
        out = capsys.readouterr().out
        assert "instrument  ESU4 (id 22), the rows of --instrument 22" in out, out
        assert "600 rows of other instruments left out" in out
    assert main(["inspect", str(tmp_path / "c")]) == 0  # a cache shows its selection without the flag
    assert "the rows of --instrument 22" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "c"), "--instrument", "11"]) == 2
    assert "prepared with --instrument 22, not this --instrument 11" in capsys.readouterr().err
    assert main(["inspect", str(path)]) == 2
    assert "give --instrument ID to keep one instrument's rows" in capsys.readouterr().err


def test_a_symbol_and_its_id_are_one_selection_to_a_cache_and_a_run(tmp_path):
    """Compared as given, --instrument NQH1 and --instrument 13615 (NQH1 in the file's symbol mappings) were two
    selections: two cache identities, each refusing the other spelling, and two data sha256s."""
    from foxc.data.cache import check_selection
    from foxc.data.prepare import prepare
    from foxc.trainer.config import TrainConfig
    from foxc.trainer.session import run_data
    spellings = ("NQH1", "13615")
    caches = {given: prepare(PARENT_DBN, tmp_path / given, rows=4, instrument=given) for given in spellings}
    assert caches["NQH1"]["sha256"] == caches["13615"]["sha256"] and caches["NQH1"]["instrument_selection"] == "13615"
    for given, manifest in caches.items():
        for other in spellings:
            check_selection(tmp_path / given, manifest, other)
        with pytest.raises(DataError, match="prepared with --instrument 13615, not this --instrument ESH1"):
            check_selection(tmp_path / given, manifest, "ESH1")
    digest = lambda given: run_data(TrainConfig.for_backend(  # noqa: E731
        "reference", data=str(PARENT_DBN), instrument=given, horizons=(1, 2, 3), seq_len=4,
        holdout_frac=0.0)).source["sha256"]
    assert digest("NQH1") == digest("13615") != digest("ESH1")


def test_a_run_resumes_with_its_instrument_spelled_the_other_way(tmp_path):
    """A symbol beside an id (or another symbol) is compared by the instrument_id it keeps: the data's sha256."""
    from test_run_dirs import SIZES, cli, one_line_error
    data, run = mapped_dbn(tmp_path / "mapped.dbn"), tmp_path / "run"
    done = cli("--n-steps", "2", *SIZES, "--data", str(data), "--instrument", "13615", "--out", str(run))
    assert done.returncode == 0, done.stderr
    ckpt = str(run / "checkpoint-2.foxc")
    done = cli("--resume-from", ckpt, "--n-steps", "1", "--instrument", "NQH1", "--out", str(tmp_path / "r1"))
    assert done.returncode == 0 and "instrument_id 13615 kept" in done.stdout, done.stderr
    source = json.loads((tmp_path / "r1" / "config.json").read_text())["data"]
    assert source["instrument_selection"] == "NQH1" and source["instrument_id"] == 13615
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "1", "--instrument", "ESH1", "--out", str(tmp_path / "r2")),
                   f"checkpoint-2.foxc: --instrument ESH1 is instrument_id 5482 in {data}, the checkpoint's run kept "
                   "instrument_id 13615 (give --instrument 13615)")


def session_16_sha256(files, instrument: str) -> str:
    """A run's data identity as session 16's code recorded it (before 2625f82; f4b6da3's foxc/trainer/session.py,
    files_digest(market.files, cfg.instrument)): the files' bytes in order, then --instrument as given."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    h.update(f"\0--instrument {instrument}".encode())
    return h.hexdigest()


def test_a_session_16_checkpoint_trained_with_a_symbol_resumes_on_the_same_files(tmp_path):
    """A checkpoint of session 16's code trained with --instrument NQH1 records a data sha256 that mixed in the symbol,
    where today's mixes in the instrument_id it kept (13615): it was refused as other data. On the same files with
    the same symbol it resumes, and the resumed run records today's identity; other files, or the symbol respelled
    (only the id it kept would tell, and the checkpoint records none), are still refused."""
    from foxc.checkpoint import read_checkpoint, write_checkpoint
    from foxc.checkpoint.meta import RESERVED_KEYS
    from test_run_dirs import SIZES, cli, one_line_error
    data, run = mapped_dbn(tmp_path / "mapped.dbn"), tmp_path / "run"
    done = cli("--n-steps", "2", *SIZES, "--data", str(data), "--instrument", "NQH1", "--out", str(run))
    assert done.returncode == 0, done.stderr
    ckpt = read_checkpoint(run / "checkpoint-2.foxc")
    today = ckpt.meta["data"]
    config = {k: v for k, v in ckpt.meta["config"].items() if k != "tick"}  # session 16 had no --tick
    was = {k: v for k, v in today.items() if k not in ("instrument_id", "tick")}  # nor recorded either
    was["sha256"] = session_16_sha256(today["files"], "NQH1")
    assert was["sha256"] != today["sha256"] and was["instrument_selection"] == "NQH1"
    old = str(tmp_path / "checkpoint-2.foxc")
    write_checkpoint(old, ckpt.step, ckpt.sections, {k: v for k, v in ckpt.meta.items() if k not in RESERVED_KEYS}
                     | {"config": config, "data": was})
    done = cli("--resume-from", old, "--n-steps", "1", "--out", str(tmp_path / "r1"))
    assert done.returncode == 0 and "resumed from" in done.stdout, done.stderr
    resumed = json.loads((tmp_path / "r1" / "config.json").read_text())["data"]
    assert (resumed["sha256"], resumed["instrument_id"]) == (today["sha256"], 13615)
    assert read_checkpoint(tmp_path / "r1" / "checkpoint-3.foxc").meta["data"]["sha256"] == today["sha256"]
    one_line_error(cli("--resume-from", old, "--n-steps", "1", "--instrument", "13615", "--out", str(tmp_path / "r2")),
                   "checkpoint-2.foxc: the data differs from the checkpoint's", "give --instrument NQH1")
    other = mapped_dbn(tmp_path / "other.dbn", rows=2000)
    one_line_error(cli("--resume-from", old, "--n-steps", "1", "--data", str(other), "--out", str(tmp_path / "r3")),
                   "checkpoint-2.foxc: the data differs from the checkpoint's")


def test_a_config_file_gives_the_instrument_as_an_id_or_a_symbol(tmp_path):
    from foxc.trainer.config import ConfigError, ConfigFile, TrainConfig, parse_settings
    for text, want in (("instrument = 5482\n", "5482"), ('instrument = "ESM4"\n', "ESM4")):
        (tmp_path / "run.toml").write_text(f'data = "books/"\n{text}')
        file = ConfigFile.read(tmp_path / "run.toml")
        assert file.settings["instrument"] == want and f"--instrument={want}" in file.as_flags()
        assert TrainConfig.for_backend("reference", **parse_settings(file.as_flags())).instrument == want
    (tmp_path / "run.toml").write_text("instrument = -1\n")
    with pytest.raises(ConfigError, match=re.escape(f"--config {tmp_path / 'run.toml'}: instrument = -1: "
                                                    "instrument_id -1 is outside 0 to 2^32 - 1")):
        ConfigFile.read(tmp_path / "run.toml")
    assert parse_settings(["--data", "x.dbn", "--instrument", "007"])["instrument"] == "7"
    assert TrainConfig.for_backend("reference", data="x.dbn", instrument=5482).instrument == "5482"  # a program's
    with pytest.raises(ConfigError, match="--instrument must be given as its flag reads it, '7' \\(got '007'\\)"):
        TrainConfig.for_backend("reference", data="x.dbn", instrument="007")  # would never match a cache's "7"
