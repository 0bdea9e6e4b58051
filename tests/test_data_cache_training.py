"""Training from a prepared cache with its rows left on disk (foxc.data.cache.CacheRows).

The same run as from the rows in memory, bit for bit, resident or rotating; host memory bounded by the
slots and the staging, not by the cache; a shard changed after the run opened the cache is refused when
it is read."""
import gc
import tracemalloc

import pytest

from foxc.data.cache import CacheRows, open_cache, shard_dir
from foxc.data.prepare import prepare
from foxc.data.labels import LabelConfig
from foxc.data.parquet import write_parquet
from foxc.data.resident import ROW_BYTES
from foxc.data.synthetic import generate
from foxc.data.validate import DataError
from foxc.trainer.run import Trainer
from trainer_cases import assert_same_state, config, state

DAY, DAY_ROWS, SLOTS, EVERY = 86_400 * 10**9, 3_000, 3, 4
BUDGET_GB = (SLOTS + 0.5) * DAY_ROWS * ROW_BYTES / 1e9  # three slots of a day, not four


def make_cache(folder, days: int):
    data = folder / "days"
    data.mkdir(parents=True)
    for day in range(days):
        rec = generate(DAY_ROWS - 17 * day, seed=40 + day)  # days of different lengths
        rec["ts_ns"] += day * DAY
        write_parquet(data / f"day{day:02d}.parquet", rec)
    prepare(data, folder / "cache")
    return folder / "cache"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return make_cache(tmp_path_factory.mktemp("cache12"), 12)


def run(rt, cfg, data, steps):
    t = Trainer(rt, cfg, *data, None)
    try:
        t.train(steps)
        return state(t), (t.ts.rotation.describe() if t.ts.rotation else None)
    finally:
        t.close()


@pytest.mark.parametrize("budget", [None, BUDGET_GB], ids=["resident", "rotating"])
def test_training_from_the_cache_on_disk_equals_training_from_it_in_memory(ref_rt, cache, budget):
    cfg = config(device_data_gb=budget, rotate_every=EVERY, graph="on")
    rows = CacheRows(cache, LabelConfig())
    loaded = open_cache(cache, LabelConfig())
    on_disk, rotation = run(ref_rt, cfg, (rows, None), 5 * EVERY + 1)
    in_memory, same_rotation = run(ref_rt, cfg, (loaded.market, loaded.labels), 5 * EVERY + 1)
    assert (rotation is not None) == (budget is not None) and rotation == same_rotation
    assert_same_state(on_disk, in_memory)


def test_a_head_of_the_cache_reads_what_the_head_in_memory_holds(cache):
    from foxc.data.cache import head_labels
    rows, loaded = CacheRows(cache, LabelConfig()), open_cache(cache, LabelConfig())
    market, labels = loaded.market, loaded.labels
    cut = int(rows.segment_bounds()[0][5]) + 40  # 40 rows into the sixth shard: its labels lose their horizon's reach
    head = rows.head(cut)
    got, got_labels = head.load()
    assert head.n_rows == cut and head.n_segments == 6
    assert got.records.tobytes() == market.records[:cut].tobytes()
    assert got_labels.tobytes() == head_labels(labels[:, :, :cut].copy(), LabelConfig().horizons, cut).tobytes()
    assert head.labelled() == [True, True, True] and rows.head(30).labelled() == [True, False, False]


def peak_traced_mb(rt, cache, steps) -> float:
    """Peak Python/numpy memory (tracemalloc) while a rotating run is built from the cache and trained."""
    gc.collect()  # earlier tests' garbage freed (its finalizers run) before the window, not inside it
    tracemalloc.start()
    try:
        run(rt, config(device_data_gb=BUDGET_GB, rotate_every=EVERY), (CacheRows(cache, LabelConfig()), None), steps)
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def test_host_memory_is_bounded_by_the_slots_not_by_the_cache(ref_rt, cache, tmp_path):
    """Four shards or twelve (three times the data, every shard visited), the same peak; the cache read into
    memory would add its ~15 MB. On the reference backend the device arrays are host memory too."""
    small = make_cache(tmp_path, 4)
    steps = 12 * EVERY + 1  # twelve rotations: every shard of the large cache is staged
    few, many = peak_traced_mb(ref_rt, small, steps), peak_traced_mb(ref_rt, cache, steps)
    data_mb = 12 * DAY_ROWS * ROW_BYTES / 1e6
    assert many < few + 0.1 * data_mb, f"peak {many:.1f} MB with 12 shards, {few:.1f} MB with 4"


def test_a_shard_changed_after_opening_is_refused_when_it_is_read(ref_rt, cache, tmp_path):
    import shutil
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    t = Trainer(ref_rt, config(device_data_gb=BUDGET_GB, rotate_every=EVERY), CacheRows(copy, LabelConfig()), None)
    try:
        rot = t.ts.rotation
        later = int(rot.segment[rot.order[SLOTS + 1]])  # staged at the second boundary, after the edit
        path = shard_dir(copy, later) / "records.npy"
        raw = bytearray(path.read_bytes())
        raw[-100] ^= 0xFF
        path.write_bytes(bytes(raw))
        with pytest.raises(DataError, match=f"{later:05d}/records.npy.*sha256"):
            t.train(3 * EVERY)
    finally:
        t.close()


def test_a_missing_shard_is_refused_when_the_cache_is_opened(cache, tmp_path):
    import shutil
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    (shard_dir(copy, 7) / "labels.npy").unlink()
    with pytest.raises(DataError, match="00007/labels.npy.*missing"):
        CacheRows(copy, LabelConfig())


def test_held_out_rows_out_of_memory_are_one_line_naming_eval_rows(cache, tmp_path, monkeypatch, capsys):
    """Reading a cache's held-out rows (the shards that hold them, whole), or evaluating held-out rows, out of memory
    was a MemoryError traceback."""
    from foxc import train
    from foxc.data import cache as caching
    from foxc.evaluate import runner
    from test_data_stream import ALLOC, NumpyWithout

    def no_room(*args):
        raise MemoryError(ALLOC)
    monkeypatch.setattr(caching, "read_rows", no_room)
    small = ["--backend", "reference", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--n-steps", "2"]
    assert train.main([*small, "--data", str(cache), "--eval-every", "10", "--eval-rows", "1000", "--out",
                       str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err == (  # rows 31,390.. of shards 10 (from 29,235) and 11 (to 34,878)
        "foxc.train: error: --eval-rows 1,000: out of memory: reading the 1,000 held-out snapshots with the rest of "
        "the cache's shards that hold them: 5,643 snapshots take 2.26 MB (400 bytes each); give fewer --eval-rows\n")
    monkeypatch.undo()
    monkeypatch.setattr(runner, "np", NumpyWithout("zeros"))  # the evaluation's arrays of each snapshot
    # --val-frac 0: no validation at the last step, whose arrays would run out first (the case below)
    assert train.main([*small, "--synthetic-rows", "20000", "--eval-rows", "2000", "--val-frac", "0", "--out",
                       str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err == (
        "foxc.train: error: --eval-rows 2,000: out of memory: evaluating the held-out snapshots (their records, and "
        "arrays of each as they are evaluated): 2,000 snapshots take 0.80 MB (400 bytes each); give fewer "
        "--eval-rows\n")
    assert train.main([*small, "--synthetic-rows", "20000", "--eval-rows", "2000", "--out", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err == (
        "foxc.train: error: --eval-rows 2,000: out of memory: validating on the training rows' held-out end (its "
        "records, and arrays of each): 2,000 snapshots take 0.80 MB (400 bytes each); give fewer --eval-rows\n")
