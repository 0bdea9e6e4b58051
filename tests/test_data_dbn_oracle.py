"""foxc's DBN reader against Databento's own decoder (databento-dbn) on files written by Databento's encoder.

The fixtures (tests/fixtures/*.dbn*, written by tools/make_dbn_fixtures.py with databento-dbn) and the
shared sample files are decoded twice: by databento_dbn.DBNDecoder into record objects, and by
foxc.data.dbn.read_dbn; every field of foxc's snapshot is compared row by row. The oracle never
touches foxc's dtype, so a layout error in foxc fails here (test_a_wrong_layout_is_caught shows it).
"""
import numpy as np
import pytest

from data_files import DBN_FIXTURES, FIXTURES, LEVELS, NEEDS_DBN, dbn_bytes, dbn_tool, shared_sample
import foxc.data.dbn as foxc_dbn
from foxc.data.dbn import read_dbn
from foxc.data.record import PRICE_UNDEF, SNAPSHOT_DTYPE
from foxc.data.synthetic import generate

dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)

SIDES = ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct")
SCHEMA_IDS = {None: 0xFFFF, "mbp-10": 2}


def oracle_decode(path):
    """(Metadata, MBP-10 records) as databento_dbn decodes the file, versions kept as they are."""
    zst = path.name.endswith(".zst")
    dec = dbn.DBNDecoder(upgrade_policy=dbn.VersionUpgradePolicy.AS_IS,
                         compression=dbn.Compression.ZSTD if zst else dbn.Compression.NONE)
    dec.write(path.read_bytes())
    out = dec.decode()
    assert isinstance(out[0], dbn.Metadata)
    return out[0], [r for r in out[1:] if isinstance(r, dbn.MBP10Msg)]


def value(x):
    return getattr(x, "value", x)


def expected_snapshots(records) -> dict[str, np.ndarray]:
    """foxc's snapshot fields as foxc defines them, from databento_dbn's record objects:
    ts_ns = ts_recv (Databento's index time); levels as they are, except that an empty level (UNDEF_PRICE) has size and
    count 0; trade_count = 1 for action T; prev_ts_ns and segment are 0 (load() fills them).
    A trade (action T) with a price: last_px is its price; side A (the aggressor sold) sets sell_lo_px, sell_lo_vol
    and sell_vol from its price and size, side B the buy_* fields, where its size is above 0; every other row has
    PRICE_UNDEF and 0 there. feed_delay_ns = ts_recv - ts_event, 0 where the event is later or undefined."""
    n = len(records)
    want = {"ts_ns": np.array([r.ts_recv for r in records], np.int64),
            "prev_ts_ns": np.zeros(n, np.int64), "segment": np.zeros(n, np.uint32),
            "trade_count": np.array([value(r.action) == "T" for r in records], np.uint32),
            "instrument_id": np.array([r.instrument_id for r in records], np.uint32),
            "flags": np.array([int(r.flags) for r in records], np.uint32),
            "feed_delay_ns": np.array([r.ts_recv - r.ts_event if r.ts_event != dbn.UNDEF_TIMESTAMP and
                                       r.ts_event <= r.ts_recv else 0 for r in records], np.int64)}
    for prefix, side, px in (("sell", "A", "sell_lo_px"), ("buy", "B", "buy_hi_px")):
        trades = [value(r.action) == "T" and value(r.side) == side and r.price != dbn.UNDEF_PRICE and r.size > 0
                  for r in records]
        want[px] = np.array([r.price if t else dbn.UNDEF_PRICE for r, t in zip(records, trades)], np.int64)
        want[f"{px[:-3]}_vol"] = np.array([r.size if t else 0 for r, t in zip(records, trades)], np.uint32)
        want[f"{prefix}_vol"] = want[f"{px[:-3]}_vol"].copy()
    want["last_px"] = np.array([r.price if value(r.action) == "T" else dbn.UNDEF_PRICE for r in records], np.int64)
    for name in SIDES:
        want[name] = np.array([[getattr(r.levels[lvl], name) for lvl in range(LEVELS)] for r in records],
                              np.int64 if name.endswith("_px") else np.uint32)
    for side in ("bid", "ask"):
        empty = want[f"{side}_px"] == dbn.UNDEF_PRICE
        want[f"{side}_sz"][empty] = 0
        want[f"{side}_ct"][empty] = 0
    return want


def oracle_mismatches(path) -> list[str]:
    """Every disagreement between foxc and databento_dbn on one file: 'row R, field[level]: ...'."""
    meta, records = oracle_decode(path)
    got, bad_float, got_meta = read_dbn(path)
    want = expected_snapshots(records)
    assert set(want) == set(SNAPSHOT_DTYPE.names), "the oracle must cover every field of SNAPSHOT_DTYPE"
    if len(got) != len(records):
        return [f"{len(got)} rows read, databento_dbn decodes {len(records)} MBP-10 records"]
    out = []
    for name in SNAPSHOT_DTYPE.names:
        g, w = got[name], want[name]
        for row in np.flatnonzero((g != w).reshape(len(g), -1).any(1))[:3]:
            lvl = int(np.flatnonzero(g[row] != w[row])[0]) if g.ndim == 2 else None
            out.append(f"row {row}, {name}{'' if lvl is None else f'[{lvl}]'}: foxc "
                       f"{g[row] if lvl is None else g[row, lvl]}, databento_dbn {w[row] if lvl is None else w[row, lvl]}")
    dbn_meta = {"version": meta.version, "dataset": meta.dataset, "ts_out": meta.ts_out,
                "schema": SCHEMA_IDS[value(meta.schema)]}
    if got_meta["dbn"] != dbn_meta:
        out.append(f"metadata: foxc {got_meta['dbn']}, databento_dbn {dbn_meta}")
    if got_meta["instrument"] != (meta.symbols[0] if meta.symbols else ""):
        out.append(f"instrument: foxc {got_meta['instrument']!r}, databento_dbn symbols {meta.symbols}")
    if got_meta["instrument_id"] != records[0].instrument_id:
        out.append(f"instrument_id: foxc {got_meta['instrument_id']}, databento_dbn {records[0].instrument_id}")
    if bad_float is not None:
        out.append("a DBN file has integer prices: no NaN mask expected")
    return out


def assert_agrees(path):
    wrong = oracle_mismatches(path)
    assert not wrong, f"{path.name}: foxc disagrees with databento_dbn:\n" + "\n".join(wrong)


# ---- the fixtures -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DBN_FIXTURES)
def test_fixture_agrees_with_databento(name):
    assert_agrees(FIXTURES / name)


def test_fixtures_are_varied():
    """What the fixtures are there to exercise is really in them."""
    assert {"mbp10.v1.dbn", "mbp10.v2.dbn", "mbp10.v3.dbn", "mbp10.v3.dbn.zst", "mbp10.v2.ts_out.dbn.zst",
            "mixed.v3.ts_out.dbn"} <= set(DBN_FIXTURES)
    versions, ts_out, schemas, rows = set(), set(), set(), []
    for name in DBN_FIXTURES:
        meta, records = oracle_decode(FIXTURES / name)
        assert len(records) >= 16, name
        versions.add(meta.version)
        ts_out.add(meta.ts_out)
        schemas.add(value(meta.schema))
        rows.append(expected_snapshots(records) | {"action": [value(r.action) for r in records],
                                                   "side": [value(r.side) for r in records],
                                                   "ts_event": np.array([r.ts_event for r in records], np.int64)})
    cat = {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
    assert versions == {1, 2, 3} and ts_out == {False, True} and schemas == {"mbp-10", None}
    assert set(cat["action"]) == set("ACMTFRN") and set(cat["side"]) == set("ABN")
    assert len(np.unique(cat["instrument_id"])) >= 4 and 2**32 - 1 in cat["instrument_id"]
    assert len(np.unique(cat["flags"])) >= 8 and 0xFF in cat["flags"]
    bid_set = cat["bid_px"] != PRICE_UNDEF
    assert bid_set.all(1).any() and (~bid_set[:, 0]).any() and (bid_set[:, 0] & ~bid_set[:, -1]).any()
    assert ((cat["bid_px"] < 0) & bid_set).any()                      # negative prices (a spread)
    assert ((cat["bid_sz"] == 0) & bid_set).any()                     # size 0 on a set level
    assert (cat["ask_sz"] == 2**32 - 1).any() and (cat["bid_ct"] == 2**32 - 1).any()
    assert (np.diff(cat["ts_event"]) < 0).any() and (cat["ts_ns"] != cat["ts_event"]).all()
    assert (cat["feed_delay_ns"] > 0).all()                          # ts_event before ts_recv everywhere
    trade = cat["action"] == "T"                                      # trades of every side, their prices varied
    assert {s for s, t in zip(cat["side"], trade) if t} == set("ABN")
    assert len(np.unique(cat["sell_lo_px"])) >= 3 and len(np.unique(cat["buy_hi_px"])) >= 3
    assert (cat["last_px"][trade] != PRICE_UNDEF).all() and (cat["last_px"][~trade] == PRICE_UNDEF).all()
    meta, records = oracle_decode(FIXTURES / "mbp10.v2.dbn")          # stale sizes on an empty level
    assert any(lv.bid_px == dbn.UNDEF_PRICE and lv.bid_sz > 0 for r in records for lv in r.levels)


def test_fixtures_are_current():
    """tools/make_dbn_fixtures.py still writes the committed files (compressed ones compared decompressed,
    as another zstd build may compress differently)."""
    zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
    plain = lambda name, raw: (zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True).read()
                               if name.endswith(".zst") else raw)
    built = dbn_tool().build()
    assert sorted(built) == DBN_FIXTURES
    stale = [n for n, raw in built.items() if plain(n, raw) != plain(n, (FIXTURES / n).read_bytes())]
    assert not stale, f"rerun python tools/make_dbn_fixtures.py: {stale} differ"


def test_fixture_in_several_zstd_frames(tmp_path):
    zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
    raw = (FIXTURES / "mbp10.v3.dbn").read_bytes()
    path = tmp_path / "frames.dbn.zst"
    path.write_bytes(b"".join(zstandard.ZstdCompressor(level=1).compress(raw[i:i + 3000])
                              for i in range(0, len(raw), 3000)))
    assert_agrees(path)
    assert len(read_dbn(path)[0]) == 24


# ---- the shared sample files (real Databento data) --------------------------------------------------

@pytest.mark.parametrize("name", ["test_data.mbp-10.dbn", "test_data.mbp-10.v3.dbn.zst"])
def test_shared_sample_agrees_with_databento(name):
    assert_agrees(shared_sample(name))


# ---- generated books encoded by databento-dbn -------------------------------------------------------

@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("ts_out", [False, True])
def test_round_trip_through_databento_encoder(tmp_path, version, ts_out):
    rec = generate(300, seed=version)
    rec["bid_px"][::11, 7:] = PRICE_UNDEF
    rec["bid_sz"][::11, 7:] = 0
    rec["bid_ct"][::11, 7:] = 0
    rec["trade_count"] = rec["trade_count"] > 0
    path = tmp_path / "x.dbn"
    path.write_bytes(dbn_bytes(rec, version, "ESZ4", ts_out))
    zpath = tmp_path / "x.dbn.zst"
    zpath.write_bytes(dbn_tool().zstd(path.read_bytes()))
    for p in (path, zpath):
        got, _, meta = read_dbn(p)
        for name in ("ts_ns", *SIDES, "trade_count", "instrument_id", "flags"):
            assert np.array_equal(got[name], rec[name]), (p.name, name)
        assert meta["instrument"] == "ESZ4" and meta["dbn"]["ts_out"] == ts_out and meta["dbn"]["version"] == version
        assert_agrees(p)


# ---- the oracle catches a wrong layout --------------------------------------------------------------

def moved(dtype: np.dtype, changes: dict[str, int]) -> np.dtype:
    """dtype with the given fields at other offsets (same itemsize)."""
    offsets = {k: dtype.fields[k][1] for k in dtype.names}
    offsets.update(changes)
    return np.dtype({"names": list(dtype.names), "formats": [dtype.fields[k][0] for k in dtype.names],
                     "offsets": [offsets[k] for k in dtype.names], "itemsize": dtype.itemsize})


def swapped_level(a: str, b: str) -> np.dtype:
    level = foxc_dbn.MBP10_DTYPE["levels"].base
    new_level = moved(level, {a: level.fields[b][1], b: level.fields[a][1]})
    names = foxc_dbn.MBP10_DTYPE.names
    return np.dtype({"names": list(names),
                     "formats": [(new_level, (LEVELS,)) if k == "levels" else foxc_dbn.MBP10_DTYPE.fields[k][0]
                                 for k in names],
                     "offsets": [foxc_dbn.MBP10_DTYPE.fields[k][1] for k in names],
                     "itemsize": foxc_dbn.MBP10_DTYPE.itemsize})


WRONG_LAYOUTS = {
    "ts_recv at ts_event's offset": lambda d: moved(d, {"ts_recv": d.fields["ts_event"][1]}),
    "instrument_id 4 bytes early": lambda d: moved(d, {"instrument_id": d.fields["instrument_id"][1] - 4}),
    "action one byte late": lambda d: moved(d, {"action": d.fields["action"][1] + 1}),
    "flags one byte late": lambda d: moved(d, {"flags": d.fields["flags"][1] + 1}),
    "levels 8 bytes early": lambda d: moved(d, {"levels": d.fields["levels"][1] - 8}),
    "bid_ct and ask_ct swapped": lambda d: swapped_level("bid_ct", "ask_ct"),
}


@pytest.mark.parametrize("name", ["mbp10.v3.dbn", "mixed.v3.ts_out.dbn"])  # the strided and the walked path
@pytest.mark.parametrize("wrong", list(WRONG_LAYOUTS))
def test_a_wrong_layout_is_caught(monkeypatch, name, wrong):
    bad = WRONG_LAYOUTS[wrong](foxc_dbn.MBP10_DTYPE)
    assert bad != foxc_dbn.MBP10_DTYPE and bad.itemsize == foxc_dbn.MBP10_BYTES
    monkeypatch.setattr(foxc_dbn, "MBP10_DTYPE", bad)
    with pytest.raises(AssertionError, match="disagrees with databento_dbn"):
        assert_agrees(FIXTURES / name)
