"""The prepared cache: prepare → open gives load() + compute_labels bit for bit; shards verified; refusals."""
import json
import shutil

import numpy as np
import pytest

from data_files import dbn_bytes, shift_prices, write_lobster
from foxc.data.cache import MANIFEST, content_sha256, file_sha256, head_labels, is_cache, open_cache
from foxc.data.cursors import valid_starts
from foxc.data.prepare import prepare
from foxc.data.labels import PLANES, LabelConfig, compute_labels
from foxc.data.parquet import write_parquet
from foxc.data.record import PRICE_SCALE, PRICE_UNDEF, SNAPSHOT_DTYPE
from foxc.data.source import load
from foxc.data.synthetic import SynthParams, generate
from foxc.data.validate import DataError
from test_data_stream import lobster_day, troubled
from test_jsonfile import ABSURD, IDS as ABSURD_IDS

DAY = 86400 * 10**9
ROWS = 64  # rows per chunk and per label block: blocks end well inside the horizons' reach
HORIZONS = [LabelConfig(), LabelConfig((3, 17, 250))]  # 250: longer than the shortest file


def on_day(rec, day):
    rec = rec.copy()
    rec["ts_ns"] += day * DAY
    return rec


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A folder of every format, on different days, named out of time order, with skipped rows."""
    zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
    folder = tmp_path_factory.mktemp("data")
    write_parquet(folder / "a_day3.parquet", on_day(troubled(900, 1), 3), row_group_rows=100)
    write_parquet(folder / "b_day1.parquet", on_day(troubled(700, 2), 1), symbol="OTHER")
    (folder / "c_day0.dbn").write_bytes(dbn_bytes(on_day(troubled(400, 3), 0), feed_delay_ns=1500))
    raw = dbn_bytes(on_day(troubled(300, 4), 2), version=3)
    (folder / "d_day2.dbn.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    write_lobster(folder, lobster_day(troubled(200, 5)), 5, day="2012-06-21")
    return folder


def prepared(data, out, labels=LabelConfig(), workers=1):
    return prepare(data, out, labels, workers=workers, rows=ROWS)


@pytest.mark.parametrize("labels", HORIZONS, ids=["10,50,100", "3,17,250"])
def test_a_cache_opens_as_load_and_compute_labels(data, tmp_path, labels):
    manifest = prepared(data, tmp_path / "cache", labels)
    want = load(data)
    want_labels = compute_labels(want.records, want.tick, labels)
    cache = open_cache(tmp_path / "cache", labels)
    got = cache.market
    assert got.records.tobytes() == want.records.tobytes()
    assert (want.records["sell_vol"] > 0).any() and (want.records["buy_vol"] > 0).any()  # trades it carries
    assert set(np.unique(want.records["feed_delay_ns"])) == {0, 1500}
    assert cache.labels.tobytes() == want_labels.tobytes()
    assert (got.tick, got.files, got.instrument, got.instrument_id, got.source) == \
        (want.tick, want.files, want.instrument, want.instrument_id, want.source)
    assert got.report.to_dict() == want.report.to_dict() and got.report.summary() == want.report.summary()
    assert want.n_segments == len(manifest["shards"]) == 5 and manifest["rows"] == len(want.records)
    ends = np.cumsum([s["rows"] for s in manifest["shards"]])  # files of one instrument: a segment each, as ever
    assert [b.tolist() for b in want.segment_bounds()] == [[0, *ends[:-1]], ends.tolist()]
    assert want.files == [s["sources"][0]["path"] for s in manifest["shards"]]
    assert cache.sha256 == manifest["sha256"] == content_sha256(manifest)
    assert want.instrument == "AAPL,OTHER,SYNTH,TEST"


def test_each_shard_is_its_segment_with_its_sources(data, tmp_path):
    manifest = prepared(data, tmp_path / "cache")
    want = load(data)
    starts, ends = want.segment_bounds()
    for k, shard in enumerate(manifest["shards"]):
        rec = np.load(tmp_path / "cache" / "shards" / f"{k:05d}" / "records.npy", mmap_mode="r")
        assert rec.dtype == SNAPSHOT_DTYPE and rec.tobytes() == want.records[starts[k]:ends[k]].tobytes()
        assert (shard["rows"], shard["first_ts_ns"], shard["last_ts_ns"]) == \
            (ends[k] - starts[k], rec["ts_ns"][0], rec["ts_ns"][-1])
        for source in shard["sources"]:
            assert source["sha256"] == file_sha256(source["path"]) and source["bytes"] > 0
        assert shard["sources"][0]["path"] == want.files[k]
        for name, entry in shard["files"].items():
            path = tmp_path / "cache" / "shards" / f"{k:05d}" / name
            assert entry == {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    lobster = next(s for s in manifest["shards"] if s["read"]["kind"] == "lobster")
    assert [s["path"].rsplit("_", 2)[1] for s in lobster["sources"]] == ["orderbook", "message"]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [MANIFEST, "shards"]
    assert not list(tmp_path.glob(".*"))  # nothing left beside the cache


def test_parallel_prepare_equals_sequential(data, tmp_path):
    one = prepared(data, tmp_path / "one", workers=1)
    two = prepared(data, tmp_path / "two", workers=2)
    assert one == two
    for k in range(len(one["shards"])):
        for name in ("records.npy", "labels.npy"):
            a, b = (tmp_path / c / "shards" / f"{k:05d}" / name for c in ("one", "two"))
            assert a.read_bytes() == b.read_bytes()


@pytest.fixture(scope="module")
def roll(tmp_path_factory):
    """A continuous symbol's day (ES.c.0) rolling at row 250 to the next contract, 20.00 higher, and that
    contract's next day, named first (out of time order: the shards after the roll are renumbered)."""
    folder = tmp_path_factory.mktemp("roll")
    rec = generate(400, seed=6)
    rec["instrument_id"][250:] = 2
    for side in ("bid_px", "ask_px"):
        rec[side][250:] = np.where(rec[side][250:] == PRICE_UNDEF, PRICE_UNDEF, rec[side][250:] + 20 * PRICE_SCALE)
    write_parquet(folder / "b_es_c_0.parquet", rec, row_group_rows=100)
    write_parquet(folder / "a_next_day.parquet", on_day(generate(300, seed=7, params=SynthParams(instrument_id=2)), 1))
    return folder


@pytest.mark.parametrize("workers", [1, 2])
def test_a_roll_begins_a_segment_through_load_and_through_a_cache(roll, tmp_path, workers):
    """The roll's 20.00 gap is no return: no label horizon, window or episode crosses it, from the files as from
    a cache of them, whose shards are the segments load() makes."""
    cfg, K = LabelConfig(), 16
    want = load(roll)
    assert [b.tolist() for b in want.segment_bounds()] == [[0, 250, 400], [250, 400, 700]]
    assert want.files == [str(roll / "b_es_c_0.parquet"), str(roll / "a_next_day.parquet")]
    labels = compute_labels(want.records, want.tick, cfg)
    weight = labels[PLANES.index("outcome_weight")]
    for k, h in enumerate(cfg.horizons):
        assert weight[k, :250 - h].all() and not weight[k, 250 - h:250].any()  # a horizon ends before the roll
    starts, last = valid_starts(want.records["segment"], history=K - 1)  # a window of K ends at a start
    assert not ((starts >= 250) & (starts < 250 + K - 1)).any() and (last[starts < 250] == 249).all()
    assert want.records["prev_ts_ns"][250] == want.records["ts_ns"][250]
    manifest = prepare(roll, tmp_path / "cache", cfg, workers=workers, rows=ROWS)
    shards = manifest["shards"]
    assert [(s["segment"], s["rows"], s["read"]["input"]) for s in shards] == [(0, 250, 1), (1, 150, 1), (2, 300, 0)]
    assert [(s["first_ts_ns"], s["last_ts_ns"]) for s in shards] == \
        [tuple(want.records["ts_ns"][[a, b - 1]].tolist()) for a, b in zip(*want.segment_bounds())]
    assert shards[0]["read"] == shards[1]["read"] and shards[0]["sources"] == shards[1]["sources"]
    cache = open_cache(tmp_path / "cache", cfg)
    assert cache.market.records.tobytes() == want.records.tobytes() and cache.labels.tobytes() == labels.tobytes()
    assert (cache.market.files, cache.market.tick) == (want.files, want.tick)
    assert cache.market.report.to_dict() == want.report.to_dict() and \
        "split into 2 segments" in want.report.summary()


def test_prepare_and_inspect_count_a_rolling_file_once(roll, tmp_path, capsys):
    from foxc.data.__main__ import main
    assert main(["prepare", str(roll), "--out", str(tmp_path / "cache"), "--workers", "1"]) == 0
    assert "3 shard(s), one per file, 1 more where a file's instrument_id changes; 700 snapshots kept of 700 read" \
        in capsys.readouterr().out
    for path, count in ((roll, "parquet: 2 file(s), 3 segment(s)"), (tmp_path / "cache", "3 shard(s)")):
        assert main(["inspect", str(path)]) == 0
        out = capsys.readouterr().out
        assert count in out and "700 rows read, 700 kept, 0 skipped in 2 file(s)" in out, path
        assert "split into 2 segments" in out
    table = out[out.index("shard  first"):].splitlines()[2:]  # a file's rows read and path once, not per shard
    assert [line.split()[4:] for line in table] == [["400", str(roll / "b_es_c_0.parquet")], [],
                                                   ["300", str(roll / "a_next_day.parquet")]]


def test_a_manifest_whose_shards_are_reordered_is_refused_by_their_files(roll, tmp_path):
    """The manifest's own digest recomputed after its shards were reordered: each shard file is hashed as it is
    read, and refused naming it."""
    prepare(roll, tmp_path / "cache", workers=1, rows=ROWS)
    manifest = json.loads((tmp_path / "cache" / MANIFEST).read_text())
    manifest["shards"].insert(1, manifest["shards"].pop(2))
    for k, shard in enumerate(manifest["shards"]):
        shard["segment"] = k
    manifest["sha256"] = content_sha256(manifest)
    (tmp_path / "cache" / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="00001/records.npy: .*prepare the cache again"):
        open_cache(tmp_path / "cache", LabelConfig())


@pytest.mark.parametrize("version, why", [
    (1, "a file whose instrument_id changes (a continuous symbol's roll) was one shard then, whose windows and "
        "labels cross the roll"),
    (2, "its records have no trades (the resting orders' queue model needs them) and no feed delay")])
def test_a_cache_of_an_older_version_is_refused_saying_to_prepare_it_again(cache, version, why):
    """Version 1 kept a roll inside one shard (its windows and labels crossed the gap); version 2's records had
    no trade fields."""
    manifest = json.loads((cache / MANIFEST).read_text())
    manifest["version"] = version
    (cache / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError) as err:
        open_cache(cache, LabelConfig())
    assert str(err.value) == (f"{cache / MANIFEST}: cache version {version}, this foxc reads version 3: {why}; "
                              f"prepare it again: python -m foxc.data prepare {manifest['data']} --out {cache} "
                              "--overwrite")


def test_a_manifest_of_no_version_says_so_not_version_none(cache):
    """A manifest of foxc's format without `version` (or null) said "cache version None, …"."""
    manifest = json.loads((cache / MANIFEST).read_text())
    for edit in (lambda m: m.pop("version"), lambda m: m.update(version=None)):
        edit(manifest)
        (cache / MANIFEST).write_text(json.dumps(manifest))
        with pytest.raises(DataError) as err:
            open_cache(cache, LabelConfig())
        assert str(err.value) == (f"{cache / MANIFEST}: the manifest records no cache version (a cache of another "
                                  "program, or damaged); prepare it again: python -m foxc.data prepare "
                                  f"{manifest['data']} --out {cache} --overwrite")


@pytest.fixture
def cache(data, tmp_path):
    prepared(data, tmp_path / "cache")
    return tmp_path / "cache"


def shard_file(cache, k, name):
    return cache / "shards" / f"{k:05d}" / name


@pytest.mark.parametrize("damage, message", [
    (lambda c: shard_file(c, 2, "labels.npy").write_bytes(flip(shard_file(c, 2, "labels.npy").read_bytes())),
     "00002/labels.npy: sha256 "),
    (lambda c: shard_file(c, 1, "records.npy").write_bytes(shard_file(c, 1, "records.npy").read_bytes()[:-400]),
     "00001/records.npy: "),
    (lambda c: shard_file(c, 4, "records.npy").unlink(), "00004/records.npy: missing"),
])
def test_a_stale_or_tampered_shard_is_refused_naming_it(cache, damage, message):
    damage(cache)
    with pytest.raises(DataError, match=message) as err:
        open_cache(cache, LabelConfig())
    assert "prepare the cache again" in str(err.value) or "prepare it again" in str(err.value)


def flip(raw: bytes) -> bytes:
    damaged = bytearray(raw)
    damaged[-5] ^= 0x01
    return bytes(damaged)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["shards"][3]["files"]["labels.npy"].__setitem__("sha256", "0" * 64), "the manifest was edited"),
    (lambda m: m.__setitem__("version", 99), "version 99"),
    (lambda m: m.__setitem__("format", "other"), "format is not 'foxc-cache'"),
    (lambda m: m.__setitem__("tick", "quarter"), "tick is \"quarter\", not an integer"),
    (lambda m: m["shards"].reverse(), "the manifest was edited"),
    (lambda m: m.pop("data"), "no 'data'"),  # was a KeyError traceback in inspect and training
    (lambda m: m["shards"][1]["read"]["skipped"].__setitem__("crossed", "2"),
     "shards\\[1\\].read.skipped.crossed is \"2\""),  # a TypeError
    (lambda m: m["shards"][2].__setitem__("first_ts_ns", 10**30), "shards\\[2\\].first_ts_ns is"),  # year out of range
    (lambda m: m["labels"].__setitem__("horizons", [10, 50]), "labels.horizons is a list of 2"),
])
def test_a_manifest_that_is_not_one_is_refused(cache, edit, message):
    manifest = json.loads((cache / MANIFEST).read_text())
    edit(manifest)
    (cache / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=message) as err:
        open_cache(cache, LabelConfig())
    assert str(err.value).startswith(f"{cache / MANIFEST}: ")
    (cache / MANIFEST).write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        open_cache(cache, LabelConfig())


@pytest.mark.parametrize("raw, problem", ABSURD, ids=ABSURD_IDS)
def test_an_absurd_manifest_is_one_line_naming_it(tmp_path, capsys, raw, problem):
    """A manifest nested deeper than the parser recurses was a RecursionError traceback (inspect, train,
    walk-forward); one of bytes that are not UTF-8 a UnicodeDecodeError's message without the word JSON."""
    from foxc.data.__main__ import main as data_main
    from foxc.walkforward import main as walkforward_main
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / MANIFEST).write_bytes(raw)
    named = f"{tmp_path / 'cache' / MANIFEST}: {problem}"
    assert data_main(["inspect", str(tmp_path / "cache")]) == 2
    assert capsys.readouterr().err == f"foxc.data inspect: error: {named}\n"
    assert walkforward_main(["--backend", "reference", "--data", str(tmp_path / "cache"), "--out",
                             str(tmp_path / "wf")]) == 2
    assert capsys.readouterr().err == f"foxc.walkforward: error: --data {named}\n"
    assert not (tmp_path / "wf").exists()


def test_other_horizons_are_refused_naming_both(cache):
    with pytest.raises(DataError, match=r"prepared with label horizons 10,50,100, not this run's --horizons 10,20,30 "
                                        r"\(prepare the cache again with --horizons 10,20,30, or train with "
                                        r"--horizons 10,50,100\)"):
        open_cache(cache, LabelConfig((10, 20, 30)))


@pytest.mark.parametrize("n", [1, 10])
def test_a_file_of_a_few_rows_makes_a_shard_that_verifies(tmp_path, n):
    """records.npy goes through a write buffer and gets its header last: a file small enough to stay in the
    buffer whole once lost that header (the buffer's zeros landed over it), and the shard failed its sha256."""
    write_parquet(tmp_path / "few.parquet", generate(n, seed=3))
    prepare(tmp_path / "few.parquet", tmp_path / "cache", workers=1, rows=ROWS)
    cache = open_cache(tmp_path / "cache", LabelConfig())
    assert cache.market.records.tobytes() == load(tmp_path / "few.parquet").records.tobytes()


def test_a_horizon_longer_than_the_data_is_prepared_as_compute_labels_gives_it(tmp_path):
    """The label window reached the longest horizon past each block, whatever the shard's rows: a horizon of
    10^12 snapshots asked numpy for 352 TB (a MemoryError traceback); it labels no row, as compute_labels says."""
    write_parquet(tmp_path / "day.parquet", generate(300, seed=3))
    labels = LabelConfig((10, 50, 10**12))
    prepare(tmp_path / "day.parquet", tmp_path / "cache", labels, workers=1, rows=ROWS)
    want = load(tmp_path / "day.parquet")
    assert open_cache(tmp_path / "cache", labels).labels.tobytes() == \
        compute_labels(want.records, want.tick, labels).tobytes()


def test_a_refused_input_leaves_no_cache(data, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(data, mixed)
    rec = generate(50, seed=1)
    rec["ask_px"] = PRICE_UNDEF
    write_parquet(mixed / "z_nothing_kept.parquet", rec)
    for workers in (1, 2):
        with pytest.raises(DataError, match="z_nothing_kept.parquet: no usable rows: all 50 skipped"):
            prepare(mixed, tmp_path / "new" / "deeper" / "cache", workers=workers, rows=ROWS)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["mixed"]
    (mixed / "z_nothing_kept.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(DataError, match="z_nothing_kept.parquet: not a Parquet file"):
        prepare(mixed, tmp_path / "cache", workers=2, rows=ROWS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixed"]


def test_overwrite_replaces_a_cache(data, tmp_path):
    first = prepared(data, tmp_path / "cache", LabelConfig((3, 17, 250)))
    second = prepare(data, tmp_path / "cache", workers=1, rows=ROWS, overwrite=True)
    assert first["sha256"] != second["sha256"] and is_cache(tmp_path / "cache")
    assert open_cache(tmp_path / "cache", LabelConfig()).sha256 == second["sha256"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_load_refuses_a_cache_naming_who_reads_it(cache):
    with pytest.raises(DataError, match="a prepared cache .*foxc.train --data reads one"):
        load(cache)


@pytest.mark.parametrize("rows", [0, 1, 9, 10, 11, 399, 400, 401, 1000])
def test_head_labels_are_the_labels_of_the_head_alone(rows):
    rec = generate(1000, seed=3, n_segments=3)
    cfg = LabelConfig((1, 10, 120))
    full = compute_labels(rec, 250_000_000, cfg)
    want = compute_labels(rec[:rows], 250_000_000, cfg)
    assert head_labels(full[:, :, :rows].copy(), cfg.horizons, rows).tobytes() == want.tobytes()
    tail = full[:, :, rows // 2:rows].copy()  # a block of them, as a cache's shard is cut
    assert head_labels(tail, cfg.horizons, rows, rows // 2).tobytes() == want[:, :, rows // 2:].tobytes()


def test_training_from_a_cache_sees_what_training_from_the_files_sees(data, cache):
    """run_data, the trainer's data set-up, with the held-out tail cut: same rows, labels and held-out rows."""
    from foxc.trainer.config import TrainConfig
    from foxc.trainer.session import run_data
    settings = dict(n_backtests=8, seq_len=4, per_capacity=64, eval_every=5, holdout_frac=0.3)
    files = run_data(TrainConfig.for_backend("reference", data=str(data), **settings))
    cached = run_data(TrainConfig.for_backend("reference", data=str(cache), **settings))
    assert cached.labels is None  # the cache's rows stay on disk: the dataset reads them a shard at a time
    market, labels = cached.market.load()
    assert market.records.tobytes() == files.market.records.tobytes()
    assert labels.tobytes() == files.labels.tobytes()
    assert cached.held.records.tobytes() == files.held.records.tobytes()
    assert cached.market.report.to_dict() == files.market.report.to_dict()
    assert cached.source["sha256"] == open_cache(cache, LabelConfig()).sha256 != files.source["sha256"]
    assert cached.source["rows"] == files.source["rows"] and cached.source["files"] == files.source["files"]
    with pytest.raises(DataError, match="--horizons 5,50,100"):
        run_data(TrainConfig.for_backend("reference", data=str(cache), horizons=(5, 50, 100), **settings))


def test_the_tick_is_inferred_from_the_rows_load_samples(tmp_path, monkeypatch):
    """Sampled every few rows (sparser than a read block, and denser): the cache's tick is load()'s, whichever
    rows the sample hits, here where a few rows sit off the 0.25 grid; a sample that misses them all was a tick of
    0.25 those rows sat between, and is refused as load() refuses it (every row is checked against the tick)."""
    import foxc.data.market as market
    rng = np.random.default_rng(4)
    for day in range(3):
        rec = on_day(generate(700 + 300 * day, seed=day), day)
        odd = rng.choice(len(rec), 6, replace=False)
        for side in ("bid_px", "ask_px"):
            rec[side][odd] += 50_000_000  # 0.05: the whole book of these rows moves off the grid
        write_parquet(tmp_path / f"day{day}.parquet", rec)
    ticks = set()
    for sample in (1, 7, 13, 40, 100, 10**9):
        monkeypatch.setattr(market, "TICK_SAMPLE", sample)
        try:
            tick = load(tmp_path).tick
        except DataError as e:
            with pytest.raises(DataError) as err:
                prepare(tmp_path, tmp_path / "cache", workers=1, rows=ROWS, overwrite=True)
            assert str(err.value) == str(e) and "is off the tick 0.25" in str(e)
            ticks.add("refused")
            continue
        prepare(tmp_path, tmp_path / "cache", workers=1, rows=ROWS, overwrite=True)
        assert open_cache(tmp_path / "cache", LabelConfig()).market.tick == tick
        ticks.add(tick)
    assert ticks == {50_000_000, "refused"}


def test_instruments_of_different_ticks_are_refused_naming_the_files_and_ticks(tmp_path, capsys):
    """One tick serves a run: an instrument quoted in quarters beside one quoted in cents was measured in cents
    (the largest step dividing both), the quarters' features, labels and PnL 25 times too large, silently."""
    from foxc.data.__main__ import main
    from foxc.data.synthetic import SynthParams
    es, cl = tmp_path / "es.parquet", tmp_path / "cl.parquet"
    write_parquet(es, generate(500, seed=1), symbol="ESM4")  # tick 0.25, instrument_id 1
    write_parquet(cl, on_day(generate(500, seed=2, params=SynthParams(tick=0.01, start_price=70.0, instrument_id=2)),
                             1), symbol="CLN4")
    want = (f"{tmp_path}: instruments of different ticks (ESM4 (instrument_id 1): tick 0.25 in {es}; CLN4 "
            f"(instrument_id 2): tick 0.01 in {cl}): one tick serves a run (features, labels and PnL are counted in "
            "it): give the files of one instrument, or --tick T to count them all in a tick that divides theirs (e.g. "
            "--tick 0.01)")
    for read in (lambda: load(tmp_path), lambda: prepare(tmp_path, tmp_path / "cache", workers=1, rows=ROWS)):
        with pytest.raises(DataError) as err:
            read()
        assert str(err.value) == want
    assert not (tmp_path / "cache").exists()
    assert main(["inspect", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"foxc.data inspect: error: {want}\n"
    assert load(tmp_path, tick=10_000_000).tick == 10_000_000  # a tick given is the user's, for every file
    assert main(["inspect", str(tmp_path), "--tick", "0.01"]) == 0 and "tick        0.01\n" in capsys.readouterr().out


def test_each_instruments_tick_is_inferred_from_its_own_rows(tmp_path):
    """Two instruments of one tick whose prices sit on grids 0.10 apart: each one's tick is 0.25 (measured together,
    0.05); and one instrument's days together (a day of it alone may show a coarser step)."""
    from foxc.data.synthetic import SynthParams
    write_parquet(tmp_path / "a.parquet", generate(400, seed=1))
    other = shift_prices(on_day(generate(300, seed=2, params=SynthParams(instrument_id=2)), 1), 100_000_000)
    write_parquet(tmp_path / "b.parquet", other)
    write_parquet(tmp_path / "c.parquet", on_day(generate(300, seed=3, params=SynthParams(tick=0.5)), 2))
    assert load(tmp_path / "c.parquet").tick == 500_000_000
    assert load(tmp_path).tick == 250_000_000
    assert prepare(tmp_path, tmp_path / "cache", workers=1, rows=ROWS)["tick"] == 250_000_000


def test_the_benchmark_prepares_and_opens():
    from foxc.bench.data import bench_prepare
    made, opened = bench_prepare(3000, 2)
    assert made["count"] == opened["count"] == 3000 and "snapshots/s" in made["rate"] + opened["rate"]


def test_inspect_prints_a_cache_and_verify_gives_the_label_balance_of_its_files(data, tmp_path, capsys):
    from foxc.data.__main__ import main
    manifest = prepared(data, tmp_path / "cache")
    assert main(["inspect", str(tmp_path / "cache")]) == 0
    shown = capsys.readouterr().out
    assert f"identity    sha256 {manifest['sha256']}" in shown and f"rows        {manifest['rows']}" in shown
    assert all(s["sources"][0]["path"] in shown for s in manifest["shards"]) and "verified" not in shown
    assert main(["inspect", str(tmp_path / "cache"), "--verify"]) == 0
    verified = capsys.readouterr().out
    assert main(["inspect", str(data)]) == 0
    from_files = capsys.readouterr().out
    balance = lambda text: text[text.index("labels      horizon  labelled"):].splitlines()[:4]  # noqa: E731
    assert "verified    every shard" in verified and balance(verified) == balance(from_files)


def test_inspect_replaces_a_validation_summary_only_with_overwrite(data, cache, tmp_path, capsys):
    """--run-dir into a run's directory (or an earlier inspect's) replaced its data_validation.json silently."""
    from foxc.data.__main__ import main
    run = tmp_path / "run"
    run.mkdir()
    for path in (data, cache):
        (run / "data_validation.json").write_text("a run's report\n")
        assert main(["inspect", str(path), "--run-dir", str(run)]) == 2
        assert capsys.readouterr().err == (f"foxc.data inspect: error: --run-dir {run}: holds a data_validation.json "
                                           "already (give another directory, or --overwrite to replace it)\n")
        assert (run / "data_validation.json").read_text() == "a run's report\n"
        assert main(["inspect", str(path), "--run-dir", str(run), "--overwrite"]) == 0
        assert f"validation summary written to {run / 'data_validation.json'}" in capsys.readouterr().out
        assert json.loads((run / "data_validation.json").read_text())["rows_kept"] == load(data).n_rows
    assert main(["inspect", str(cache), "--run-dir", str(tmp_path / "new")]) == 0  # a new file needs no flag
    assert (tmp_path / "new" / "data_validation.json").is_file()
    assert main(["inspect", str(data), "--overwrite"]) == 2
    assert "error: --overwrite: only with --run-dir" in capsys.readouterr().err
