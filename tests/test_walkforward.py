"""Walk-forward: windows, folds end to end (in process, local workers, Ray), the report and its criteria."""
import json
from pathlib import Path

import numpy as np
import pytest

from foxc.data.synthetic import synthetic_data
from foxc.evaluate.reporting import Criteria, assemble, markdown
from foxc.evaluate.runner import EvalConfig
from foxc.evaluate.trainers import resolve_trainer
from foxc.walkforward import main, split_windows, walk_forward

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
    with pytest.raises(ValueError, match="at least 2 windows"):
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
        assert set(fold["criteria"]) == {"win_rate", "hold_frac", "entropy_stable"}
        assert fold["passed"] == all(c["pass"] for c in fold["criteria"].values())
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


def test_local_workers_give_the_same_figures_as_in_process(tmp_path):
    data = synthetic_data(9_000, seed=5)
    kw = dict(folds=2, steps=10, trainer="baseline", eval_config=EVAL, plots=False, log=lambda *a: None)
    a = walk_forward(data, out=tmp_path / "seq", **kw)
    b = walk_forward(data, out=tmp_path / "local", parallel="local", workers=2, **kw)
    assert [f["metrics"] for f in a["folds"]] == [f["metrics"] for f in b["folds"]]
    assert not (tmp_path / "local" / "data.npy").exists()
    assert all((tmp_path / "local" / f"fold-{i}" / "worker.log").is_file() for i in range(2))


def test_a_failing_fold_is_reported(tmp_path):
    data = synthetic_data(6_000, seed=2)
    data.records["bid_px"][:2000] = data.records["bid_px"][0]  # window 0: the mid never moves
    data.records["ask_px"][:2000] = data.records["ask_px"][0]
    report = walk_forward(data, folds=2, steps=10, out=tmp_path, trainer="baseline", eval_config=EVAL, plots=False,
                          log=lambda *a: None)
    assert "too few mid moves" in report["folds"][0]["error"] and "error" not in report["folds"][1]
    assert not report["all_passed"]


def test_trainer_resolution():
    assert resolve_trainer("baseline").is_baseline
    assert resolve_trainer("foxc.evaluate.baseline:TRAINER").name.startswith("baseline")
    assert not resolve_trainer("rl").is_baseline  # the integrated trainer, the default
    with pytest.raises(ValueError, match="unknown trainer"):
        resolve_trainer("nope")
    with pytest.raises(TypeError, match="has no"):
        resolve_trainer("foxc.evaluate.baseline:NAME")


def test_cli(tmp_path, capsys):
    rc = main(["--data", "synthetic", "--synthetic-rows", "8000", "--folds", "2", "--steps-per-fold", "5",
               "--backend", "reference", "--eval-backtests", "4", "--fee", "0.01", "--out", str(tmp_path),
               "--no-plots", "--hold-min", "0.1", "--trainer", "baseline", "--some-trainer-flag", "7"])
    assert rc == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["criteria"]["hold_min"] == 0.1 and report["train_args"] == ["--some-trainer-flag", "7"]
    assert report["eval_config"]["fee_per_lot"] == 10_000_000
    assert all(f["metrics"]["fees"] == 2 * 10_000_000 * f["metrics"]["trades"] for f in report["folds"])
    assert main(["--data", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "x")]) == 2
    assert "walk-forward: baseline" in capsys.readouterr().out


def test_ray_one_task_per_fold_on_logical_gpus(tmp_path):
    ray = pytest.importorskip("ray")
    data = synthetic_data(9_000, seed=7)
    try:
        report = walk_forward(data, folds=2, steps=10, out=tmp_path, trainer="baseline", eval_config=EVAL, parallel="ray",
                              ray_init={"num_cpus": 2, "num_gpus": 2, "include_dashboard": False,
                                        "log_to_driver": False}, plots=False, log=lambda *a: None)
    finally:
        ray.shutdown()
    folds = report["folds"]
    assert [f["fold"] for f in folds] == [0, 1] and all("error" not in f for f in folds)
    assert {f["cuda_visible_devices"] for f in folds} <= {"0", "1"}  # Ray gave each task one (logical) GPU
    seq = walk_forward(data, folds=2, steps=10, out=tmp_path / "seq", trainer="baseline", eval_config=EVAL,
                       plots=False, log=lambda *a: None)
    assert [f["metrics"] for f in folds] == [f["metrics"] for f in seq["folds"]]
