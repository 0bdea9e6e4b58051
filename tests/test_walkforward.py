"""Walk-forward: windows, folds end to end (in process, local workers, Ray), the report and its criteria."""
import json
from pathlib import Path

import numpy as np
import pytest

from foxc.data.synthetic import synthetic_data
from foxc.walkforward.report import Criteria, assemble, markdown
from foxc.evaluate.runner import EvalConfig
from foxc.walkforward import main, split_windows, walk_forward
from test_jsonfile import ABSURD, IDS

EVAL = EvalConfig(n_backtests=8, backend="reference")


def check_windows(records, bounds, k):
    assert len(bounds) == k
    assert bounds[0][0] == 0 and bounds[-1][1] == len(records)           # cover the data
    assert all(a < b for a, b in bounds)                                  # none empty
    assert all(b == a2 for (_, b), (a2, _) in zip(bounds, bounds[1:]))   # consecutive: disjoint and ordered
    ts = records["ts_ns"]
    assert all(ts[b - 1] <= ts[a2] for (_, b), (a2, _) in zip(bounds, bounds[1:]))  # in time


@pytest.mark.parametrize("k", [2, 3, 4, 7])
def test_row_windows_are_disjoint_ordered_and_cover_the_data(k, rng):
    n = int(rng.integers(50, 5000))
    rec = synthetic_data(n, seed=int(rng.integers(1000))).records
    bounds, how = split_windows(rec, k)
    assert how == "rows"
    check_windows(rec, bounds, k)
    sizes = [b - a for a, b in bounds]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("k", [2, 3, 5])
def test_segment_windows_cut_only_where_a_segment_begins(k, rng):
    segments = int(rng.integers(k, 12))
    rec = synthetic_data(3000, seed=int(rng.integers(1000)), n_segments=segments).records
    bounds, how = split_windows(rec, k)
    assert how == "segments"
    check_windows(rec, bounds, k)
    seg = rec["segment"]
    assert all(seg[a - 1] != seg[a] for a, _ in bounds[1:])


def test_uneven_segments_and_refusals():
    rec = synthetic_data(1000, seed=1).records
    rec["segment"] = np.repeat([0, 1, 2, 3], [10, 10, 900, 80])
    bounds, _ = split_windows(rec, 3, "segments")
    check_windows(rec, bounds, 3)
    assert bounds == [(0, 20), (20, 920), (920, 1000)]
    with pytest.raises(ValueError, match="segments cannot make"):
        split_windows(rec, 5, "segments")
    with pytest.raises(AssertionError):  # misuse: fewer than 2 windows is no fold (the command refuses --folds 0)
        split_windows(rec, 1)
    with pytest.raises(ValueError, match="rows"):
        split_windows(rec[:5], 4, "rows")


def test_walk_forward_in_process_writes_the_report(tmp_path):
    data = synthetic_data(12_000, seed=3)
    report = walk_forward(data, folds=2, steps=10, out=tmp_path, trainer="baseline", train_args=["--lr-q", "1e-4"],
                          eval_config=EVAL,
                          plots=False, log=lambda *a: None)
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["folds"] and len(saved["folds"]) == 2 and saved["is_baseline"]
    assert "not the RL agent" in saved["trainer"] and "baseline" in (tmp_path / "report.md").read_text()
    assert saved["train_args"] == ["--lr-q", "1e-4"]
    for i, fold in enumerate(saved["folds"]):
        assert fold["fold"] == i
        assert fold["train_window"] == saved["windows"][i] and fold["eval_window"] == saved["windows"][i + 1]
        assert set(fold["criteria"]) == {"edge", "seed"}
        assert set(fold["criteria"]["seed"]) == {"win_rate", "hold_frac", "entropy_stable"}
        assert set(fold["criteria"]["edge"]) == {"net_pnl", "beats_yardstick"}  # no market: the real-data rule
        assert fold["passed"] == all(c["pass"] for c in fold["criteria"]["edge"].values())
        m = fold["metrics"]
        assert m["steps"] == fold["eval_window"]["rows"] and m["net_pnl"] == m["final_equity"]
        fold_dir = Path(fold["fold_dir"])
        assert Path(fold["checkpoint"]).is_file() and (fold_dir / "eval.json").is_file()
        assert np.load(fold_dir / "equity.npy")[-1] == m["final_equity"]
        assert fold["equity_curve"][-1][1] == m["final_equity"]
    assert report["all_passed"] == all(f["passed"] for f in saved["folds"])
    md = (tmp_path / "report.md").read_text()
    assert md.count("\n| 0 |") == 1 and md.count("\n| 1 |") == 1


def test_criteria_are_configurable():
    m = {"win_rate": 0.6, "hold_frac": 0.5, "entropy_quarters": [0.9, 1.0, 1.1, 1.0]}
    assert all(v["pass"] for v in Criteria().judge(m).values())
    assert not Criteria(min_win_rate=0.6).judge(m)["win_rate"]["pass"]          # strictly above
    assert not Criteria(hold_min=0.55).judge(m)["hold_frac"]["pass"]
    assert not Criteria().judge({**m, "entropy_quarters": [1.0, 1.0, 0.4, 1.0]})["entropy_stable"]["pass"]
    assert not Criteria().judge({**m, "entropy_quarters": [0.01] * 4})["entropy_stable"]["pass"]
    assert not Criteria().judge({**m, "win_rate": None})["win_rate"]["pass"]
    report = assemble([{"fold": 0, "error": "Traceback...\nValueError: boom"}], Criteria(), {"trainer": "t"})
    assert not report["all_passed"] and "boom" in markdown(report)


def fold_record(fold, pnl_ticks, net_pnl, trade_pnls, yardstick=None):
    t = np.asarray(trade_pnls, float)
    m = {"pnl_ticks": pnl_ticks, "net_pnl": net_pnl, "trades": len(t), "mean_trade_pnl": t.mean() if t.size else None,
         "trade_pnl_std": t.std(ddof=1) if t.size > 1 else None, "win_rate": 0.5, "hold_frac": 0.9,
         "entropy_quarters": [0.5] * 4}
    return {"fold": fold, "metrics": m, "is_baseline": False, "yardstick": yardstick}


def test_edge_rule_on_a_synthetic_market_is_a_fraction_of_its_optimum():
    folds = [fold_record(0, 0.020, 1, [1, 2]), fold_record(1, 0.012, 1, [1, 2])]
    report = assemble(folds, Criteria(), {"trainer": "t", "optimum": 0.028})
    fracs = [f["criteria"]["edge"]["opt_frac"]["value"] for f in report["folds"]]
    assert fracs == pytest.approx([0.020 / 0.028, 0.012 / 0.028])
    assert [f["passed"] for f in report["folds"]] == [True, False] and not report["all_passed"]
    assert not any(f["passed_by"]["seed"] for f in report["folds"])  # reported beside it, win rate 0.5
    assert not assemble(folds[:1], Criteria(rule="seed"), {"optimum": 0.028})["all_passed"]
    flat = assemble([fold_record(0, 0.0, 0, [])], Criteria(), {"optimum": 0.028})
    assert not flat["all_passed"], "a policy that never trades fails"


def test_edge_rule_on_real_data_needs_profit_the_yardstick_and_a_pooled_t_stat():
    rng = np.random.default_rng(0)
    trades = [rng.normal(1.0, 2.0, n) for n in (300, 400, 500)]
    good = [fold_record(i, 0.01, 10**9, t, {"net_pnl": 10**8}) for i, t in enumerate(trades)]
    report = assemble(good, Criteria(), {"optimum": None})
    pooled = report["run_criteria"]["pooled_t_stat"]
    every = np.concatenate(trades)  # pooling from per-fold counts, means and deviations = over all trades
    assert pooled["trades"] == 1200
    assert pooled["value"] == pytest.approx(every.mean() / every.std(ddof=1) * np.sqrt(every.size), rel=1e-9)
    assert report["all_passed"]
    noise = [fold_record(i, 0.01, 10**9, rng.normal(0.0, 2.0, 400), {"net_pnl": 10**8}) for i in range(3)]
    assert not assemble(noise, Criteria(), {"optimum": None})["all_passed"], "no edge: t-stat near 0"
    behind = [dict(f, yardstick={"net_pnl": 2 * 10**9}) for f in good]
    assert not assemble(behind, Criteria(), {"optimum": None})["all_passed"], "beaten by the yardstick"
    losing = [fold_record(0, -0.01, -5, trades[0], {"net_pnl": -10})] + good[1:]
    assert not assemble(losing, Criteria(), {"optimum": None})["all_passed"]


def test_overwrite_replaces_an_earlier_walk_forward_and_nothing_else(tmp_path):
    args = ["--backend", "reference", "--trainer", "baseline", "--synthetic-rows", "12000",
            "--steps-per-fold", "5", "--no-plots", "--out", str(tmp_path)]
    assert main([*args, "--folds", "2"]) in (0, 1)
    (tmp_path / "fold-7").mkdir()  # as a run with more folds would have left
    (tmp_path / "notes.txt").write_text("mine")
    assert main([*args, "--folds", "1", "--overwrite"]) in (0, 1)
    assert sorted(p.name for p in tmp_path.glob("fold-*")) == ["fold-0"]
    assert len(json.loads((tmp_path / "report.json").read_text())["folds"]) == 1
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_backend_that_cannot_be_used_is_one_line(monkeypatch, capsys, tmp_path):
    import foxc.driver
    from foxc.driver import CudaError

    def no_gpu(mode):
        raise CudaError("--backend cuda: no usable CUDA device: no NVIDIA driver library (libcuda.so) found")
    monkeypatch.setattr(foxc.driver, "select_backend", no_gpu)
    assert main(["--backend", "cuda", "--out", str(tmp_path / "wf")]) == 2
    assert capsys.readouterr().err.strip() == ("foxc.walkforward: error: --backend cuda: no usable CUDA device: "
                                               "no NVIDIA driver library (libcuda.so) found")
    assert not (tmp_path / "wf").exists()


@pytest.mark.parametrize("flags", [["--synthetic-rows", "12000"], ["--synthetic", "easy"],
                                   ["--synthetic-segments", "4"]])
def test_synthetic_flags_beside_real_data_are_refused_naming_both(flags, capsys, tmp_path):
    assert main(["--backend", "reference", "--data", "book.parquet", *flags, "--out", str(tmp_path / "wf")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"foxc.walkforward: error: {flags[0]} {flags[1]} is a setting of synthetic data: beside --data "
                   "book.parquet it would be ignored (give one of them)")
    assert not (tmp_path / "wf").exists()


# ------------------------------------------------------------------------ a worker's spec and record files

def a_fold_spec(tmp_path) -> dict:
    from foxc.walkforward.folds import FoldSpec
    return json.loads(FoldSpec(fold=0, train=(0, 10), eval=(10, 20), steps=5, out_dir=str(tmp_path / "fold-0"),
                               train_days=("2024-01-02", "2024-01-03"), eval_days=("2024-01-04", "2024-01-04"))
                      .to_json())


@pytest.mark.parametrize("raw, problem", ABSURD + [
    (b"{}", "not a fold.json of foxc.walkforward.worker: no 'fold'"),
    (lambda d: {**d, "steps": float("nan")}, "not a fold.json of foxc.walkforward.worker: steps is NaN, not of type int"),
    (lambda d: {**d, "train": [1]}, "train is a list of 1, not of type tuple[int, int]"),
    (lambda d: {**d, "eval_days": "2024"}, 'eval_days is "2024", not of type tuple[str, str] | None'),
    (lambda d: {**d, "fold": True}, "fold is true, not of type int"),
    (lambda d: {**d, "folds": 2}, "not a fold.json of foxc.walkforward.worker: no field 'folds'"),
    (lambda d: {**d, "config": {"seed": "1"}}, 'config.seed is "1", not of type int'),
    (lambda d: {**d, "config": {"train_args": ["--seq-len", 8]}}, "config.train_args[1] is 8, not of type str"),
    (lambda d: {**d, "config": {"folds": 2}}, "no field 'config.folds'"),
    (lambda d: {**d, "eval_config": {"n_backtests": 2.5}}, "eval_config.n_backtests is 2.5, not of type int"),
    (lambda d: {**d, "eval_config": {"greedy": "no"}}, 'eval_config.greedy is "no", not of type bool'),
    (lambda d: {**d, "eval_config": []}, "eval_config is a list of 0, not an object"),
], ids=IDS + ["empty", "nan-steps", "short-window", "days-not-a-pair", "bool-fold", "unknown-field", "str-seed",
              "int-train-arg", "unknown-config-key", "float-backtests", "str-greedy", "eval-config-a-list"])
def test_an_absurd_fold_spec_is_one_line_naming_it(tmp_path, capsys, raw, problem):
    """`python -m foxc.walkforward.worker FOLD.json` on a spec nested deeper than the parser recurses, of a field
    missing, unknown or of another type (in its config and eval_config too), ended in a traceback (RecursionError,
    TypeError) or ran a fold of NaN steps; one line naming the file, the field and its value, exit 2, no fold run."""
    from foxc.walkforward.worker import main as fold_main
    spec = tmp_path / "fold.json"
    spec.write_bytes(raw if isinstance(raw, bytes) else json.dumps(raw(a_fold_spec(tmp_path))).encode())
    assert fold_main([str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"foxc.walkforward.worker: error: {spec}: ") and err.endswith(f"{problem}\n")
    assert len(err.splitlines()) == 1 and not (tmp_path / "fold-0").exists()


def test_a_fold_spec_reads_back_as_written(tmp_path):
    from foxc.walkforward.folds import FoldSpec
    spec = FoldSpec(fold=3, train=(0, 10), eval=(10, 20), steps=5, out_dir="x", config={"seed": 1},
                    train_days=("2024-01-02", "2024-01-03"), eval_days=("2024-01-04", "2024-01-04"))
    (tmp_path / "fold.json").write_text(spec.to_json())
    assert FoldSpec.read(tmp_path / "fold.json") == spec
    bare = FoldSpec(fold=0, train=(0, 10), eval=(10, 20), steps=5, out_dir="x")
    (tmp_path / "fold.json").write_text(json.dumps({k: v for k, v in json.loads(bare.to_json()).items()
                                                    if k not in ("train_days", "eval_days", "config")}))
    assert FoldSpec.read(tmp_path / "fold.json") == bare  # a field left out takes its default


@pytest.mark.parametrize("config, problem", [
    (None, ABSURD[0][1]),
    ({"n_backtests": "32"}, 'not a run.json of foxc.sweep.point: config.n_backtests is "32", not of type int'),
    ({"horizons": [10, None, 100]}, "config.horizons[1] is null, not of type int"),
    ({"isv": [["lr_q", "fast"]]}, 'config.isv[0][1] is "fast", not of type float'),
    ({"nsteps": 5}, "no field 'config.nsteps'"),
], ids=["absurd", "str-backtests", "null-horizon", "str-isv-value", "unknown-setting"])
def test_an_absurd_sweep_run_spec_is_one_line_naming_it(tmp_path, capsys, config, problem):
    """A run.json whose config (TrainConfig's settings) holds a value of another type ran into a TypeError traceback
    inside TrainConfig; it is refused at once, naming the file, the setting and its value."""
    from foxc.sweep.point import RunSpec, main as point_main
    from foxc.trainer.config import TrainConfig
    spec = tmp_path / "run.json"
    run = json.loads(RunSpec("p", 0, {}, TrainConfig.for_backend("reference").as_dict(), "reference",
                             str(tmp_path / "p")).to_json())
    spec.write_bytes(ABSURD[0][0] if config is None else json.dumps({**run, "config": {**run["config"], **config}})
                     .encode())
    assert point_main([str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"foxc.sweep.point: error: {spec}: ") and err.endswith(f"{problem}\n")
    assert len(err.splitlines()) == 1 and not (tmp_path / "p").exists()


@pytest.mark.parametrize("raw, problem", ABSURD, ids=IDS)
def test_a_workers_unreadable_record_is_a_failed_fold_not_a_traceback(tmp_path, raw, problem):
    """A worker killed while writing result.json (or the file damaged) left the walk-forward to a JSONDecodeError
    or RecursionError traceback, losing every other fold's record; it is that fold's failure, naming the file."""
    from foxc import jobs
    from foxc.walkforward.folds import FoldSpec
    spec = FoldSpec(fold=0, train=(0, 10), eval=(10, 20), steps=5, out_dir=str(tmp_path))
    (tmp_path / jobs.RESULT_FILE).write_bytes(raw)
    (tmp_path / jobs.WORKER_LOG).write_bytes(b"killed \xff\n")  # a log need not be UTF-8 either
    record = jobs._worker_record(spec, -9)
    assert record["fold"] == 0 and record["error"] == (
        f"worker exited with status -9 and its record is unreadable ({tmp_path / jobs.RESULT_FILE}: {problem}):"
        "\nkilled \ufffd\n")


def a_fold_record() -> dict:
    """A finished fold's record, of what the report reads."""
    return {"fold": 0, "train_window": {"rows": 10}, "eval_window": {"rows": 10}, "equity_curve": [[1, 5]],
            "metrics": {"trades": 2, "net_pnl": 5, "mean_trade_pnl": 2.5, "trade_pnl_std": 1.0, "win_rate": 0.5,
                        "trade_t_stat": 3.5, "max_drawdown": 0, "hold_frac": 0.5, "pnl_ticks": 0.1,
                        "exposure": 0.5}}


@pytest.mark.parametrize("record, problem", [
    ([], "not a JSON object (a JSON list)"),
    ({}, "not a record of foxc.walkforward.worker: no 'fold'"),
    ({"fold": "0"}, 'fold is "0", not an integer from 0 to 2147483647'),
    ({"fold": 0}, "no 'train_window'"),
    ({"fold": 0, "error": None}, "error is null, not of type str"),
    (lambda r: {**r, "metrics": {**r["metrics"], "net_pnl": "5"}}, 'metrics.net_pnl is "5", not of type float'),
    (lambda r: {**r, "metrics": {k: v for k, v in r["metrics"].items() if k != "trades"}}, "no 'metrics.trades'"),
    (lambda r: {**r, "metrics": {**r["metrics"], "exposure": None}}, "metrics.exposure is null, not of type float"),
    (lambda r: {**r, "eval_window": []}, "eval_window is a list of 0, not an object"),
    (lambda r: {**r, "yardstick": {"net_pnl": 10**400}}, "yardstick.net_pnl is an integer of 401 digits, not of type "
                                                          "float | None"),
    (lambda r: {**r, "equity_curve": [[1.5, 5]]}, "equity_curve[0][0] is 1.5, not an integer from 0 to 9223372036854775807"),
], ids=["list", "empty", "str-fold", "no-window", "null-error", "str-pnl", "no-trades", "null-exposure",
        "window-a-list", "huge-yardstick", "float-time"])
def test_a_workers_record_that_is_no_fold_record_is_a_failed_fold(tmp_path, record, problem):
    """A result.json that is JSON but no fold's record ({}, a key missing or of another type) broke the report's
    assembly with a KeyError or TypeError traceback; it is that fold's failure, naming the file and what is wrong."""
    from foxc import jobs
    from foxc.walkforward.folds import FoldSpec
    spec, result = FoldSpec(fold=0, train=(0, 10), eval=(10, 20), steps=5, out_dir=str(tmp_path)), a_fold_record()
    (tmp_path / jobs.RESULT_FILE).write_text(json.dumps(result))
    assert jobs._worker_record(spec, 0) == result
    (tmp_path / jobs.RESULT_FILE).write_text(json.dumps(record(result) if callable(record) else record))
    (tmp_path / jobs.WORKER_LOG).write_text("")
    failed = jobs._worker_record(spec, 0)
    assert failed["error"].startswith("worker exited with status 0 and its record is unreadable "
                                      f"({tmp_path / jobs.RESULT_FILE}: ")
    assert failed["error"].endswith(f"{problem}):\n")
    report = assemble([failed, {**result, "fold": 1}, {"fold": 2, "error": ""}], Criteria(), {})  # it comes out
    assert "failed: worker exited" in markdown(report)


def test_a_worker_writes_its_record_whole_or_not_at_all(tmp_path, monkeypatch):
    """result.json goes through a temporary file and a rename: a worker stopped mid-write leaves no torn record."""
    import os

    from foxc.checkpoint import CheckpointSaveError
    from foxc import jobs
    from foxc.walkforward.folds import FoldSpec
    spec = FoldSpec(fold=0, train=(0, 10), eval=(10, 20), steps=5, out_dir=str(tmp_path / "fold"))

    def stopped(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", stopped)
    with pytest.raises(CheckpointSaveError, match="result.json.*No space left"):
        jobs._serve(spec, lambda job: {"fold": job.fold, "error": "stopped"})
    assert list((tmp_path / "fold").iterdir()) == [], "a partial record (or its temporary file) was left behind"
    monkeypatch.undo()
    assert jobs._serve(spec, lambda job: {"fold": job.fold, "error": "stopped"}) == 1
    assert jobs._worker_record(spec, 1) == {"fold": 0, "error": "stopped"}


class DamagedSummary:
    """The baseline, leaving the summary.json a fold's record quotes damaged (a full disk, an edit)."""
    name, is_baseline = "baseline: a damaged summary.json", True

    def train(self, window, steps, out_dir, config):
        from foxc.evaluate.baseline import TRAINER
        checkpoint = TRAINER.train(window, steps, out_dir, config)
        (Path(out_dir) / "summary.json").write_bytes(ABSURD[0][0])
        return checkpoint

    def load_policy(self, checkpoint, config, rt=None):
        from foxc.evaluate.baseline import TRAINER
        return TRAINER.load_policy(checkpoint, config)


DAMAGED_SUMMARY = DamagedSummary()


def test_a_folds_absurd_summary_is_its_failure_naming_the_file(tmp_path):
    """A summary.json nested deeper than the parser recurses was a RecursionError traceback in the fold's record."""
    from foxc.walkforward.folds import FoldSpec, run_fold_safely
    data = synthetic_data(4_000, seed=2)
    spec = FoldSpec(fold=0, train=(0, 2_000), eval=(2_000, 4_000), steps=5, out_dir=str(tmp_path / "fold-0"),
                    trainer="test_walkforward:DAMAGED_SUMMARY", eval_config={"n_backtests": 4, "backend": "reference"})
    record = run_fold_safely(spec, data.records[:2_000], data.records[2_000:])
    assert record["error"] == f"JsonFileError: {tmp_path / 'fold-0' / 'summary.json'}: {ABSURD[0][1]}"


def test_the_baselines_fit_out_of_memory_is_one_line_naming_the_remedy(tmp_path, monkeypatch, capsys):
    """A MemoryError building the baseline's features (or fitting it) was a traceback in its fold's record (the run
    exiting 1), where the RL trainer's is one line."""
    from types import SimpleNamespace

    from foxc.data.validate import DataError
    from foxc.evaluate import baseline

    def no_room(*args):
        raise MemoryError("Unable to allocate")
    monkeypatch.setattr(baseline, "features", no_room)
    out = tmp_path / "wf"
    assert main(["--backend", "reference", "--trainer", "baseline", "--synthetic-rows", "20000", "--folds", "1",
                 "--steps-per-fold", "2", "--no-plots", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "foxc.walkforward: error: --data synthetic: fold 0: fitting the baseline on its training window: out of "
        "memory: 10,000 snapshots take 4.00 MB of records (400 bytes each), and arrays of each as it is fitted; give "
        "fewer --synthetic-rows, or more --folds (each fold fits the baseline on its training window whole) (the "
        f"report of every fold is in {out})\n")
    window = SimpleNamespace(n_rows=300, records=None, tick=1, source="parquet")  # from a cache
    with pytest.raises(DataError) as e:
        baseline.TRAINER.train(window, 2, tmp_path, {"cache": "/data/cache"})
    assert str(e.value).endswith("; give more --folds, or fewer --train-days (each fold fits the baseline on its "
                                 "training window whole)")


class FailingTrainer:
    """A third-party fold trainer whose training (or, with `in_policy`, loading its policy) raises `error` (set by
    the test)."""
    name, is_baseline, error, in_policy = "baseline: a failing trainer", True, None, False

    def train(self, window, steps, out_dir, config):
        if not self.in_policy:
            raise self.error
        return Path(out_dir) / "policy.foxc"

    def load_policy(self, checkpoint, config, rt=None):
        raise self.error


FAILING = FailingTrainer()
NUMPY_NO_ROOM = "Unable to allocate 7.45 GiB for an array with shape (10000, 100000) and data type float64"
CUDA_NO_ROOM = ("cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY while allocating 'window' (8000000000 bytes) (out of "
                "memory)")


@pytest.mark.parametrize("oom, doing", [("host", "training on its training window"),
                                       ("device", "training on its training window"),
                                       ("host", "loading the policy it trained")])
def test_a_third_party_trainers_out_of_memory_is_one_line_naming_it_and_the_remedy(tmp_path, monkeypatch, capsys,
                                                                                     oom, doing):
    """A third-party trainer out of host memory (MemoryError) or device memory (CUDA_ERROR_OUT_OF_MEMORY), training
    or loading its policy, was a traceback in its fold's record (the run exiting 1), where the RL and baseline
    trainers' is one line."""
    from foxc.driver import DeviceOutOfMemory
    error = (MemoryError(NUMPY_NO_ROOM) if oom == "host" else
             DeviceOutOfMemory(CUDA_NO_ROOM, result="CUDA_ERROR_OUT_OF_MEMORY", call="cuMemAlloc", doing="allocating"))
    monkeypatch.setattr(FAILING, "error", error)
    monkeypatch.setattr(FAILING, "in_policy", doing.startswith("loading"))
    out = tmp_path / "wf"
    assert main(["--backend", "reference", "--trainer", "test_walkforward:FAILING", "--synthetic-rows", "20000",
                 "--folds", "1", "--steps-per-fold", "2", "--no-plots", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"foxc.walkforward: error: --data synthetic: fold 0: --trainer test_walkforward:FAILING: {doing}: out of "
        "memory: 10,000 snapshots take 4.00 MB of records (400 bytes each), and what the "
        f"trainer makes of them ({error}); give fewer --synthetic-rows, or more --folds (each fold trains on its "
        f"training window whole) (the report of every fold is in {out})\n")
    record = json.loads((out / "report.json").read_text())["folds"][0]
    assert record["data_error"] in record["error"] and "Traceback" not in record["error"]


@pytest.mark.parametrize("bug", ["ValueError", "CudaError"])
def test_a_third_party_trainers_other_errors_keep_their_traceback(tmp_path, monkeypatch, bug):
    """Any other error of a third-party trainer (a bug in its code, a driver failure other than out of memory) keeps
    its traceback in the fold's record, for its author."""
    from foxc.driver import CudaError
    error = (ValueError("a bug") if bug == "ValueError" else
             CudaError("cuMemAlloc failed with CUDA_ERROR_INVALID_VALUE", result="CUDA_ERROR_INVALID_VALUE"))
    monkeypatch.setattr(FAILING, "error", error)
    out = tmp_path / "wf"
    assert main(["--backend", "reference", "--trainer", "test_walkforward:FAILING", "--synthetic-rows", "20000",
                 "--folds", "1", "--steps-per-fold", "2", "--no-plots", "--out", str(out)]) == 1
    record = json.loads((out / "report.json").read_text())["folds"][0]
    assert record["error"].startswith("Traceback (most recent call last):") and "in train" in record["error"]
    assert record["error"].endswith(f"{bug}: {error}\n") and "data_error" not in record
