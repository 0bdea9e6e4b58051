"""bench data --scale at a tiny size: the cache it builds is a real one, built one shard at a time, and a
filesystem without room for it is refused before anything is written."""
import gc
import tracemalloc

import numpy as np
import pytest

from foxc.bench import data as bench
from foxc.cli import UserError
from foxc.data.cache import open_cache, read_manifest
from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.record import SNAPSHOT_BYTES


def test_the_scale_cache_opens_as_its_shards_labelled(tmp_path):
    one = bench.build_scale_cache(tmp_path / "one", 2500, 1000, workers=1)
    cache = open_cache(tmp_path / "one", LabelConfig())
    rec = cache.market.records
    assert [s["rows"] for s in one["shards"]] == [1000, 1000, 500] and len(rec) == 2500
    assert np.array_equal(np.unique(rec["segment"]), [0, 1, 2]) and np.all(np.diff(rec["ts_ns"]) > 0)
    assert cache.labels.tobytes() == compute_labels(rec, cache.market.tick).tobytes()
    assert rec["bid_px"][1000, 0] - rec["bid_px"][0, 0] == cache.market.tick  # day 1: the base day a tick up
    two = bench.build_scale_cache(tmp_path / "two", 2500, 1000, workers=2)
    assert two["sha256"] == one["sha256"] == read_manifest(tmp_path / "two")["sha256"]  # same bits


def peak_bytes(tmp_path, shards: int, shard_rows: int) -> int:
    bench._base_day.cache_clear()
    gc.collect()
    tracemalloc.start()
    try:
        bench.build_scale_cache(tmp_path / f"c{shards}", shards * shard_rows, shard_rows, workers=1)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        bench._base_day.cache_clear()


def test_the_build_holds_one_shard_at_a_time(tmp_path):
    """Peak memory (numpy's allocations are traced) is a few shards' worth whatever the shard count."""
    rows = 40_000
    shard = rows * SNAPSHOT_BYTES
    two, eight = peak_bytes(tmp_path, 2, rows), peak_bytes(tmp_path, 8, rows)
    assert eight < 1.2 * two and eight < 4 * shard, (two / shard, eight / shard)


def test_a_filesystem_without_room_is_refused_naming_the_rows_that_fit():
    need = bench.scale_bytes(500_000_000, 1_000_000)
    assert need == 500_000_000 * 484 + 500 * bench.SHARD_BYTES
    bench.check_scale_room(500_000_000, 1_000_000, "--dir d", need)  # exactly enough
    with pytest.raises(UserError, match=r"--rows 500,000,000: the cache needs 242.0 GB \(484 bytes a snapshot: "
                                         r"400 of records, 84 of labels\), and the filesystem of --dir d has 55.0 GB "
                                         r"free: give --rows 113,000,000 or fewer, or a --dir with more room"):
        bench.check_scale_room(500_000_000, 1_000_000, "--dir d", 55 * 10**9)
    for rows, shard_rows, free in ((500_000_000, 1_000_000, 55 * 10**9), (10_000, 3000, 3_000_000)):
        with pytest.raises(UserError) as err:
            bench.check_scale_room(rows, shard_rows, "--dir d", free)
        fit = int(str(err.value).split("give --rows ")[1].split()[0].replace(",", ""))
        assert bench.scale_bytes(fit, shard_rows) <= free < bench.scale_bytes(fit + min(shard_rows, 10**6), shard_rows)
    with pytest.raises(UserError, match="free: give a --dir with more room"):
        bench.check_scale_room(10, 10, "--dir d", 100)


def test_the_command_refuses_before_writing_and_reports_at_a_tiny_size(tmp_path, monkeypatch, capsys):
    out = tmp_path / "cache"
    assert bench.main(["--backend", "reference", "--scale", "--rows", str(10**13), "--dir", str(out)]) == 2
    assert "foxc.bench data: error: --rows 10,000,000,000,000: the cache needs 4840041.0 GB" in capsys.readouterr().err
    assert not out.exists()
    assert bench.main(["--backend", "reference", "--scale", "--rows", "3000", "--shard-rows", "1000", "--workers", "1",
                       "--dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "build the cache: 3 shard(s) of 1,000" in printed and "open the cache" in printed
    assert "rotation not measured (reference backend)" in printed and open_cache(out, LabelConfig()).market.tick
    assert bench.main(["--backend", "reference", "--scale", "--rows", "3000", "--dir", str(out)]) == 2
    assert "the directory holds files" in capsys.readouterr().err


def test_rotation_is_timed_against_all_resident_from_the_cache(tmp_path, ref_rt):
    """The rotation row trains from the scale cache twice: every shard resident, then three slots that
    rotate (a run whose data did not come out as asked would say so instead of a rate)."""
    bench.build_scale_cache(tmp_path / "c", 8 * 3000, 3000, workers=1)
    row = bench.bench_rotation(ref_rt, tmp_path / "c", 3000, n_backtests=8, steps=12, rotate_every=4)
    assert "rotating (3 slots, refilled every 4 steps" in row["rate"] and row["ratio"] > 0, row
    assert int(row["rate"].split(" steps, ")[1].split(" rotations")[0]) >= 3  # the timed steps crossed boundaries
