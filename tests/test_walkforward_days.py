"""Walk-forward by dates: the day plan, a cache's folds reading only their own shards (in process and in
worker processes), the same folds from the files, a tampered shard refused by its hash, refusals."""
import json
from pathlib import Path

import numpy as np
import pytest

import foxc.data.cache as cache_module
import foxc.walkforward.folds as folds_module
from foxc.data.cache import read_manifest, read_rows
from foxc.data.prepare import prepare
from foxc.data.parquet import write_parquet
from foxc.data.source import load
from foxc.data.synthetic import START_NS, generate
from foxc.data.validate import DataError
from foxc.evaluate.runner import EvalConfig
from foxc.walkforward.windows import DAY_NS, Segments, day_folds, split_bounds
from foxc.walkforward import CachedData, main, walk_forward

EVAL = EvalConfig(n_backtests=8, backend="reference")
ROWS_PER_DAY = 1500
# the days of the files: 2024-01-02 .. 2024-01-10 without the weekend (01-06, 01-07); two files on 01-03
DAYS = [0, 1, 1, 2, 3, 6, 7, 8]
SHARD_DATES = ["2024-01-02", "2024-01-03", "2024-01-03", "2024-01-04", "2024-01-05", "2024-01-08", "2024-01-09",
               "2024-01-10"]
DATES = sorted(set(SHARD_DATES))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One Parquet file per day (two on one day), named out of time order."""
    folder = tmp_path_factory.mktemp("days")
    for k, day in enumerate(DAYS):
        rec = generate(ROWS_PER_DAY, seed=k)
        rec["ts_ns"] += day * DAY_NS + k  # distinct first times: the two files of a day keep their order
        write_parquet(folder / f"{9 - k}_day{day}.parquet", rec)
    return folder


@pytest.fixture(scope="module")
def cache(files, tmp_path_factory):
    out = tmp_path_factory.mktemp("cache") / "cache"
    prepare(files, out)
    return out


def segments(first_days, rows=10):
    first_ts = START_NS + np.asarray(first_days, np.int64) * DAY_NS
    return Segments(np.arange(len(first_days), dtype=np.int64) * rows, first_ts, first_ts + 10**9,
                    rows * len(first_days), [f"f{k}" for k in range(len(first_days))])


def test_folds_roll_over_the_days_that_hold_data():
    segs = segments([0, 0, 1, 3, 4, 5, 6])  # no data on day 2
    days, folds = day_folds(segs, train_days=2, eval_days=1)
    assert days == ["2024-01-02", "2024-01-03", "2024-01-05", "2024-01-06", "2024-01-07", "2024-01-08"]
    assert [(f.train, f.eval) for f in folds] == [((0, 30), (30, 40)), ((20, 40), (40, 50)), ((30, 50), (50, 60)),
                                                  ((40, 60), (60, 70))]
    assert [(f.train_days, f.eval_days) for f in folds[:2]] == [
        (("2024-01-02", "2024-01-03"), ("2024-01-05", "2024-01-05")),
        (("2024-01-03", "2024-01-05"), ("2024-01-06", "2024-01-06"))]
    _, stepped = day_folds(segs, train_days=2, eval_days=1, step_days=3)
    assert [(f.train, f.eval) for f in stepped] == [((0, 30), (30, 40)), ((40, 60), (60, 70))]
    _, wide = day_folds(segs, train_days=3, eval_days=3)
    assert [(f.train_days, f.eval_days) for f in wide] == [(("2024-01-02", "2024-01-05"), ("2024-01-06", "2024-01-08"))]


def test_a_segment_past_midnight_belongs_to_the_day_it_began():
    late = segments([0, 1, 2])
    midnight = late.first_ts[2] // DAY_NS * DAY_NS
    late.first_ts[1], late.last_ts[1] = midnight - 10**9, midnight + 3600 * 10**9  # 23:59:59 to 01:00 the next day
    days, folds = day_folds(late, train_days=1, eval_days=1)
    assert days == ["2024-01-02", "2024-01-03", "2024-01-04"]
    assert [(f.train, f.eval) for f in folds] == [((0, 10), (10, 20)), ((10, 20), (20, 30))]


def test_day_plans_that_cannot_be_are_refused_saying_why():
    with pytest.raises(ValueError, match=r"holds 3 day\(s\) with snapshots \(2024-01-02 \.\. 2024-01-04\); "
                                         r"--train-days 2 --eval-days 2 need at least 4"):
        day_folds(segments([0, 1, 2]), train_days=2, eval_days=2)
    undated = Segments(np.array([0, 5]), np.array([10**12, 2 * 10**12]), np.array([10**12, 2 * 10**12]), 10,
                       ["a.csv", "b.csv"])
    with pytest.raises(ValueError, match=r"a\.csv begins at ts_ns 1000000000000 \(1970-01-01\).*not calendar times"):
        day_folds(undated, 1, 1)
    for bad in (dict(train_days=0, eval_days=1), dict(train_days=1, eval_days=-1),
                dict(train_days=1, eval_days=1, step_days=0)):
        with pytest.raises(AssertionError):  # misuse: the flags are positive integers
            day_folds(segments([0, 1, 2]), **bad)


def test_the_cache_plans_from_its_manifest_as_the_files_do(files, cache):
    data = load(files)
    on_files = Segments.of_records(data.records, data.files)
    on_cache = Segments.of(CachedData(cache, cache_module.read_manifest(cache)))
    assert np.array_equal(on_files.starts, on_cache.starts) and on_files.rows == on_cache.rows
    assert np.array_equal(on_files.first_ts, on_cache.first_ts)
    assert day_folds(on_files, 3, 2) == day_folds(on_cache, 3, 2)
    assert day_folds(on_cache, 3, 2)[0] == DATES


def test_a_roll_is_a_segment_the_folds_cut_at_from_the_files_as_from_a_cache(tmp_path):
    """A continuous symbol's file of two days rolling to the next contract with the second: two segments, from the
    file as from its cache; --folds cuts at the roll, and the next contract's segment is the day it begins."""
    rec = generate(1500, seed=3)
    rec["ts_ns"][900:] += DAY_NS
    rec["instrument_id"][900:] = 2
    write_parquet(tmp_path / "es_c_0.parquet", rec)
    prepare(tmp_path / "es_c_0.parquet", tmp_path / "cache")
    data, cached = load(tmp_path / "es_c_0.parquet"), CachedData(tmp_path / "cache", read_manifest(tmp_path / "cache"))
    for segs in (Segments.of_records(data.records, data.files), Segments.of(cached)):
        assert segs.starts.tolist() == [0, 900] and segs.rows == 1500
        assert segs.first_ts.tolist() == rec["ts_ns"][[0, 900]].tolist()
        assert split_bounds(segs, 2, "segments") == ([(0, 900), (900, 1500)], "segments")
        days, folds = day_folds(segs, train_days=1, eval_days=1)
        assert days == ["2024-01-02", "2024-01-03"] and [(f.train, f.eval) for f in folds] == [((0, 900), (900, 1500))]
    assert cached.describe()["files"] == data.files == [str(tmp_path / "es_c_0.parquet")]


def test_read_rows_reads_only_the_shards_that_hold_them(cache, monkeypatch):
    opened = spy_on_shards(monkeypatch)
    everything = cache_module.open_cache(cache, cache_module.LabelConfig()).market.records
    opened.clear()
    rows = read_rows(cache, 1000, 4000)
    assert rows.tobytes() == everything[1000:4000].tobytes()
    assert sorted(opened) == ["00000/records.npy", "00001/records.npy", "00002/records.npy"]  # read on threads


def spy_on_shards(monkeypatch) -> list[str]:
    """The shard files foxc.data.cache opens from now on, as 'NNNNN/name' (in no set order: threads)."""
    opened, real_open = [], open

    def spy(path, *args, **kwargs):
        if "shards" in Path(path).parts:
            opened.append(f"{Path(path).parent.name}/{Path(path).name}")
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(cache_module, "open", spy, raising=False)
    return opened


def shards_of(days_of_fold: list[str]) -> list[str]:
    """The records.npy of the cache's shards (its files in time order) on those dates."""
    return [f"{k:05d}/records.npy" for k, date in enumerate(SHARD_DATES) if date in days_of_fold]


def dates(first_last):
    return DATES[DATES.index(first_last[0]):DATES.index(first_last[1]) + 1]


def test_each_fold_reads_only_its_own_shards_and_names_its_dates(cache, tmp_path, monkeypatch):
    opened = spy_on_shards(monkeypatch)
    per_fold, real_run_fold = [], folds_module.run_fold

    def run_fold(spec, train, eval_):  # the windows are read just before: what this fold opened
        per_fold.append(sorted(opened))
        opened.clear()
        return real_run_fold(spec, train, eval_)
    monkeypatch.setattr(folds_module, "run_fold", run_fold)
    data = CachedData(cache, cache_module.read_manifest(cache))
    report = walk_forward(data, train_days=2, eval_days=1, step_days=3, steps=10, out=tmp_path, trainer="baseline",
                          eval_config=EVAL, plots=False, log=lambda *a: None)
    assert [(f["train_days"], f["eval_days"]) for f in report["folds"]] == [
        (["2024-01-02", "2024-01-03"], ["2024-01-04", "2024-01-04"]),
        (["2024-01-05", "2024-01-08"], ["2024-01-09", "2024-01-09"])]
    assert all("error" not in f for f in report["folds"]), [f.get("error") for f in report["folds"]]
    for fold, seen in zip(report["folds"], per_fold):
        assert seen == sorted(shards_of(dates(fold["train_days"]) + dates(fold["eval_days"])))
    assert "00007/records.npy" not in sum(per_fold, [])  # 2024-01-10: in no fold, never read
    assert per_fold[0] == ["00000/records.npy", "00001/records.npy", "00002/records.npy", "00003/records.npy"]
    for fold in report["folds"]:  # the windows the fold read are its dates' rows
        for name in ("train", "eval"):
            w = fold[f"{name}_window"]
            first, last = (np.datetime64(w[k], "ns").astype("datetime64[D]").astype(str)
                           for k in ("first_ts_ns", "last_ts_ns"))
            assert (first, last) == tuple(fold[f"{name}_days"])
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["split"] == "days" and saved["days"]["dates"] == DATES and saved["data"]["cache"]
    assert saved["days"] | {"dates": None} == {"train": 2, "eval": 1, "step": 3, "dates": None}
    planned = saved["day_folds"]  # what the parent planned from the manifest is what each fold read
    assert [(p["train"], p["eval"]) for p in planned] == [(f["train_window"], f["eval_window"]) for f in saved["folds"]]
    md = (tmp_path / "report.md").read_text()
    assert "| 0 | 2024-01-02 .. 2024-01-03 | 2024-01-04 |" in md
    assert "| 1 | 2024-01-05 .. 2024-01-08 | 2024-01-09 |" in md
    assert "folds by UTC day: 2 training and 1 evaluation day(s), every 3 day(s)" in md


def test_a_cache_in_worker_processes_gives_the_folds_of_the_files(files, cache, tmp_path, monkeypatch):
    kw = dict(train_days=3, eval_days=2, steps=10, trainer="baseline", eval_config=EVAL, plots=False,
              log=lambda *a: None)
    on_files = walk_forward(load(files), out=tmp_path / "files", **kw)
    opened = spy_on_shards(monkeypatch)
    on_cache = walk_forward(CachedData(cache, cache_module.read_manifest(cache)), out=tmp_path / "local",
                            parallel="local", workers=2, **kw)
    assert opened == []  # this process read the manifest alone; the workers read the shards
    assert all("error" not in f for f in on_cache["folds"]), [f.get("error") for f in on_cache["folds"]]
    assert len(on_cache["folds"]) == 2
    for a, b in zip(on_files["folds"], on_cache["folds"]):
        for key in ("metrics", "train_window", "eval_window"):
            assert a[key] == b[key], key
        assert a["train_days"] == b["train_days"] and a["eval_days"] == b["eval_days"]
    spec = json.loads((tmp_path / "local" / "fold-1" / "fold.json").read_text())
    assert spec["cache"] == str(cache) and spec["data_npy"] == "" and not (tmp_path / "local" / "data.npy").exists()


def test_a_tampered_shard_a_fold_needs_is_refused_by_its_hash(cache, tmp_path, capsys):
    import shutil
    damaged = tmp_path / "cache"
    shutil.copytree(cache, damaged)
    flip(damaged / "shards" / "00005" / "records.npy")  # 2024-01-08: fold 1's training day
    flip(damaged / "shards" / "00007" / "records.npy")  # 2024-01-10: in no fold, so never read
    args = ["--backend", "reference", "--trainer", "baseline", "--data", str(damaged), "--train-days", "2",
            "--eval-days", "1", "--step-days", "3", "--steps-per-fold", "5", "--eval-backtests", "8", "--no-plots",
            "--out", str(tmp_path / "wf")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("foxc.walkforward: error: --data ") and "fold 1: " in err and len(err.splitlines()) == 1
    assert "00005/records.npy: sha256 " in err and "prepare the cache again" in err and "00007" not in err
    report = json.loads((tmp_path / "wf" / "report.json").read_text())
    assert "error" not in report["folds"][0] and "00005/records.npy" in report["folds"][1]["data_error"]
    assert report["folds"][1]["train_days"] == ["2024-01-05", "2024-01-08"]


def test_a_window_of_the_cache_out_of_memory_is_one_line_naming_the_remedy(cache, tmp_path, monkeypatch, capsys):
    """A MemoryError reading a fold's window from a cache was a traceback in its record (the run exiting 1)."""
    calls = []

    def read_rows_until_the_fourth(*args):  # fold 1's evaluation window
        calls.append(args[1:3])
        if len(calls) == 4:
            raise MemoryError("Unable to allocate")
        return read_rows(*args)
    monkeypatch.setattr(cache_module, "read_rows", read_rows_until_the_fourth)
    out = tmp_path / "wf"
    assert main(["--backend", "reference", "--trainer", "baseline", "--data", str(cache), "--train-days", "2",
                 "--eval-days", "1", "--step-days", "3", "--steps-per-fold", "5", "--eval-backtests", "8",
                 "--no-plots", "--out", str(out)]) == 2
    n = calls[3][1] - calls[3][0]
    assert capsys.readouterr().err == (
        f"foxc.walkforward: error: --data {cache}: fold 1: reading its evaluation window: out of memory: {n:,} "
        f"snapshots take {n * 400 / 1e6:.2f} MB (400 bytes each), read with the rest of the cache's shards that hold "
        "them; give more --folds, or fewer --eval-days (each fold reads the shards that hold its windows whole) (the "
        f"report of every fold is in {out})\n")
    report = json.loads((out / "report.json").read_text())
    assert "error" not in report["folds"][0] and report["folds"][1]["data_error"].startswith("reading its evaluation")


def test_a_cache_prepared_again_since_the_plan_is_refused(cache):
    with pytest.raises(DataError, match="prepared again meanwhile"):
        read_rows(cache, 0, 10, sha256="0" * 64)


def flip(path: Path):
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x10
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("argv, message", [
    (["--train-days", "2", "--eval-days", "1", "--folds", "2"], "--folds and --train-days are two ways"),
    (["--eval-days", "1", "--split", "rows"], "--split and --eval-days are two ways"),
    (["--train-days", "2"], "--train-days: folds by dates need both --train-days and --eval-days"),
    (["--step-days", "2", "--eval-days", "1"], "need both --train-days and --eval-days"),
    (["--train-days", "0", "--eval-days", "1"], "argument --train-days: must be >= 1, got 0"),
    (["--train-days", "1", "--eval-days", "1", "--step-days", "-2"], "argument --step-days: must be >= 1, got -2"),
])
def test_date_flags_that_cannot_go_together_are_refused(argv, message, tmp_path, capsys):
    try:
        rc = main(["--backend", "reference", "--out", str(tmp_path / "wf"), *argv])
    except SystemExit as done:  # argparse's own refusals
        rc = done.code
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "wf").exists()


@pytest.mark.parametrize("argv, message", [
    (["--train-days", "5", "--eval-days", "3"],
     "--train-days 5 --eval-days 3: the data holds 7 day(s) with snapshots (2024-01-02 .. 2024-01-10); "
     "--train-days 5 --eval-days 3 need at least 8"),
    (["--folds", "2", "--split", "rows"], "--folds 2 (--split rows): a cache is cut where its shards begin"),
    (["--folds", "8"], "--folds 8 (--split auto): 8 segments cannot make 9 windows at segment boundaries: at most 7 "
                       "folds"),
    (["--train-days", "1", "--eval-days", "1", "--keep-data"], "--keep-data: the folds of a cache read its shards"),
])
def test_a_cache_that_cannot_be_cut_so_is_refused_naming_it(argv, message, cache, tmp_path, capsys):
    rc = main(["--backend", "reference", "--trainer", "baseline", "--data", str(cache), "--out", str(tmp_path / "wf"),
               *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and str(cache) in err and "Traceback" not in err
    assert not (tmp_path / "wf").exists()


def test_the_folds_of_one_instrument_from_the_files_are_those_of_its_cache(tmp_path, capsys):
    """--instrument: the walk-forward reads each file's rows of one instrument (its report says so), and a cache
    prepared with the same gives the same folds; a cache prepared for another is refused naming both."""
    from test_data_instrument import parent_parquet
    folder = tmp_path / "parent"
    folder.mkdir()
    for day in range(3):
        parent_parquet(folder / f"day{day}.parquet", seeds=(day, day + 3, day + 6), rows=(900, 1200, 600),
                       shift=day * DAY_NS)
    want = load(folder, instrument="22")
    assert set(want.records["instrument_id"].tolist()) == {22} and want.n_segments == 3
    prepare(folder, tmp_path / "cache", instrument="22")
    argv = ["--backend", "reference", "--trainer", "baseline", "--train-days", "1", "--eval-days", "1",
            "--steps-per-fold", "5", "--eval-backtests", "8", "--no-plots", "--instrument", "22"]
    reports = []
    for data in (folder, tmp_path / "cache"):
        out = tmp_path / f"wf-{data.name}"
        assert main([*argv, "--data", str(data), "--out", str(out)]) in (0, 1), capsys.readouterr().err
        reports.append(json.loads((out / "report.json").read_text()))
        assert reports[-1]["data"]["instrument_selection"] == "22" and reports[-1]["data"]["instrument"] == "ESU4"
        assert "--instrument 22" in (out / "report.md").read_text()
    on_files, on_cache = reports
    assert len(on_files["folds"]) == 2 and all("error" not in f for f in on_files["folds"] + on_cache["folds"])
    assert on_files["day_folds"] == on_cache["day_folds"]
    for a, b in zip(on_files["folds"], on_cache["folds"]):
        for key in ("metrics", "train_window", "eval_window"):
            assert a[key] == b[key], key
    assert on_files["folds"][0]["train_window"]["rows"] == want.segment_bounds()[1][0]
    assert main([*argv[:-1], "11", "--data", str(tmp_path / "cache"), "--out", str(tmp_path / "wf-11")]) == 2
    assert "prepared with --instrument 22, not this --instrument 11" in capsys.readouterr().err
