"""Walk-forward with the integrated RL trainer (the default) on the reference backend, tiny."""
import json
from types import SimpleNamespace

import pytest

from foxc import walkforward

DEVICE_NO_ROOM = dict(result="CUDA_ERROR_OUT_OF_MEMORY", call="cuMemAlloc", doing="allocating 'x'")


def test_rl_folds_train_evaluate_and_report(tmp_path):
    out = tmp_path / "wf"
    rc = walkforward.main(["--backend", "reference", "--folds", "2", "--steps-per-fold", "12",
                           "--synthetic-rows", "30000", "--out", str(out), "--no-plots",
                           "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--log-every", "6"])
    assert rc in (0, 1)  # 1: not every fold passes its criteria, which an untrained agent need not
    report = json.loads((out / "report.json").read_text())
    assert [f["fold"] for f in report["folds"]] == [0, 1]
    for fold in report["folds"]:
        assert "error" not in fold or not fold["error"], fold
        records = [json.loads(line) for line in (out / f"fold-{fold['fold']}" / "metrics.jsonl").open()]
        assert [r["steps"] for r in records if "steps" in r] == [6, 6]  # every record exactly --log-every steps
        trained = fold["train_summary"]
        assert trained["steps"] == 12 and trained["frames"] == 12 and trained["frames_dropped"] == 0
    assert "rl: foxc integrated trainer" in (out / "report.md").read_text()


@pytest.mark.parametrize("memory", ["host", "device"])
def test_a_folds_evaluation_out_of_memory_is_one_line_naming_the_remedy(tmp_path, monkeypatch, capsys, memory):
    """A MemoryError evaluating a fold's evaluation window was a traceback in its record (the run exiting 1), and the
    device's out of memory (its evaluator's arrays on CUDA) was until session 18."""
    from foxc.driver import DeviceOutOfMemory
    from foxc.evaluate import runner
    from test_data_stream import NumpyWithout
    if memory == "host":
        monkeypatch.setattr(runner, "np", NumpyWithout("zeros"))  # the evaluation's arrays of each snapshot
    else:
        def no_room(*args, **kwargs):
            raise DeviceOutOfMemory("cuMemAlloc failed", **DEVICE_NO_ROOM)
        monkeypatch.setattr(runner.Evaluator, "run", no_room)
    out = tmp_path / "wf"
    assert walkforward.main(["--backend", "reference", "--synthetic-rows", "20000", "--folds", "1",
                             "--steps-per-fold", "2", "--no-plots", "--out", str(out), "--n-backtests", "8",
                             "--seq-len", "4", "--per-capacity", "64",
                             "--val-frac", "0"]) == 2  # no validation: training never evaluates
    assert capsys.readouterr().err == (
        "foxc.walkforward: error: --data synthetic: fold 0: evaluating its evaluation window: out of memory: 10,000 "
        "snapshots take 4.00 MB of records (400 bytes each), and arrays of each as they are evaluated; give fewer "
        "--synthetic-rows, or more --folds (each fold evaluates its evaluation window whole) (the report of every "
        f"fold is in {out})\n")
    from foxc.evaluate.baseline import no_room_in_fold  # from a cache: the flag of the evaluation window's dates
    assert str(no_room_in_fold("evaluating", "why", "need", "parquet", {"cache": "/c"}, "--eval-days")) == (
        "evaluating: out of memory: need; give more --folds, or fewer --eval-days (why)")


@pytest.mark.parametrize("memory", ["host", "device"])
def test_a_folds_training_out_of_memory_is_one_line_naming_the_remedy(tmp_path, monkeypatch, capsys, memory):
    """A MemoryError training a fold (its replay, its backtests' arrays) was a traceback in its record (the run
    exiting 1), and the device's out of memory (CUDA_ERROR_OUT_OF_MEMORY) was until session 18; the fold's trainer
    is closed, its memory released for the next fold."""
    from foxc.driver import DeviceOutOfMemory
    from foxc.trainer import fold

    def no_room(*args, **kwargs):
        raise MemoryError("Unable to allocate") if memory == "host" else DeviceOutOfMemory("cuMemAlloc failed", **DEVICE_NO_ROOM)
    closed, close = [], fold.Trainer.close
    monkeypatch.setattr(fold.Trainer, "train_logged", no_room)
    monkeypatch.setattr(fold.Trainer, "close", lambda trainer: closed.append(close(trainer)))
    out = tmp_path / "wf"
    assert walkforward.main(["--backend", "reference", "--synthetic-rows", "20000", "--folds", "1",
                             "--steps-per-fold", "2", "--no-plots", "--out", str(out), "--n-backtests", "8",
                             "--seq-len", "4", "--per-capacity", "64"]) == 2
    need = ("8,000 snapshots take 3.20 MB of records (400 bytes each) and 0.67 MB of label planes (84 bytes each), "
            "with a replay of --per-capacity 64 transitions and the arrays of --n-backtests 8 backtests")
    assert capsys.readouterr().err == (
        f"foxc.walkforward: error: --data synthetic: fold 0: training on its training window: out of memory: {need}; "
        "give fewer --n-backtests or a smaller --per-capacity, or fewer --synthetic-rows, or more --folds (each fold "
        f"trains on its training window whole) (the report of every fold is in {out})\n")
    assert len(closed) == 1
    window = SimpleNamespace(n_rows=300, source="parquet")  # from data files, or a cache
    cfg = fold.TrainConfig.for_backend("reference", n_backtests=8, per_capacity=64)
    for cache in ("", "/data/cache"):
        assert str(fold.no_room_training(window, cfg, {"cache": cache})).endswith(
            "; give fewer --n-backtests or a smaller --per-capacity, or more --folds, or fewer --train-days (each "
            "fold trains on its training window whole)")


def test_the_yardstick_out_of_memory_is_its_failure_and_the_fold_keeps_its_figures(tmp_path, monkeypatch):
    """A MemoryError fitting or evaluating the yardstick beside an RL fold failed the fold, as 'evaluating its
    evaluation window', its agent's figures lost."""
    from foxc.data.synthetic import synthetic_data
    from foxc.evaluate import baseline
    from foxc.walkforward.folds import FoldSpec, run_fold_safely

    def no_room(*args, **kwargs):
        raise MemoryError("Unable to allocate")
    data = synthetic_data(8_000, seed=3).records
    train_args = ["--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64"]
    spec = FoldSpec(fold=0, train=(0, 4_000), eval=(4_000, 8_000), steps=2, out_dir=str(tmp_path / "fold-0"),
                    trainer="rl", config={"backend": "reference", "train_args": train_args},
                    eval_config={"n_backtests": 4, "backend": "reference"}, source="synthetic")
    need = "4,000 snapshots take 1.60 MB of records (400 bytes each), and arrays of each as"
    for where, name, error in (
            (baseline, "features", f"fitting the baseline on its training window: out of memory: {need} it is "
             "fitted; give fewer --synthetic-rows, or more --folds (each fold fits the baseline on its training "
             "window whole)"),
            (baseline.LogisticImbalancePolicy, "__call__", f"evaluating its evaluation window: out of memory: {need} "
             "they are evaluated; give fewer --synthetic-rows, or more --folds (each fold evaluates its evaluation "
             "window whole)")):
        with monkeypatch.context() as m:
            m.setattr(where, name, no_room)
            record = run_fold_safely(spec, data[:4_000], data[4_000:])
        assert "error" not in record, record["error"]
        assert record["metrics"]["steps"] == 4_000 and record["yardstick"] == {"error": error, "net_pnl": None}
