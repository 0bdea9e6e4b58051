"""Evaluation and walk-forward on a GPU: the same figures as on the reference backend, folds in GPU workers."""
import sys
from pathlib import Path

import numpy as np

from foxc.data.synthetic import synthetic_data
from foxc.evaluate import EvalConfig, evaluate
from foxc.evaluate.baseline import TRAINER
from foxc.walkforward import walk_forward

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_evaluate import FEE, SCRIPT, ScriptedPolicy, hand_book  # noqa: E402


def same_evaluation(a, b):
    assert a.metrics == b.metrics
    assert (a.equity == b.equity).all() and (a.actions == b.actions).all()
    assert a.trades.tobytes() == b.trades.tobytes()
    assert a.sim == b.sim


def test_hand_made_book_on_the_gpu(cuda_rt, ref_rt):
    cfg = EvalConfig(n_backtests=1, fee_per_lot=FEE)
    gpu = evaluate(ScriptedPolicy(SCRIPT), hand_book(), cfg, rt=cuda_rt)
    same_evaluation(gpu, evaluate(ScriptedPolicy(SCRIPT), hand_book(), cfg, rt=ref_rt))
    assert gpu.metrics["net_pnl"] == 2_000_000 and gpu.metrics["max_drawdown"] == 44_000_000


def test_baseline_policy_gpu_matches_reference(cuda_rt, ref_rt, tmp_path):
    data = synthetic_data(40_000, seed=11, n_segments=3)
    train = data.records[:20_000]
    import dataclasses
    policy = TRAINER.load_policy(TRAINER.train(dataclasses.replace(data, records=train), 20, tmp_path, {}), {})
    for greedy in (True, False):
        cfg = EvalConfig(n_backtests=64, fee_per_lot=5_000_000, lots_per_entry=3, greedy=greedy, seed=4)
        window = data.records[20_000:]
        gpu = evaluate(policy, window, cfg, tick=data.tick, rt=cuda_rt)
        same_evaluation(gpu, evaluate(policy, window, cfg, tick=data.tick, rt=ref_rt))
        assert gpu.metrics["trades"] > 0 and gpu.metrics["net_pnl"] == int(gpu.trades["pnl"].sum())


def test_walk_forward_folds_in_gpu_worker_processes(cuda_rt, tmp_path):
    data = synthetic_data(60_000, seed=12)
    kw = dict(folds=3, steps=10, trainer="baseline", plots=False, log=lambda *a: None)  # deterministic on both
    gpu = walk_forward(data, out=tmp_path / "gpu", parallel="local",
                       eval_config=EvalConfig(n_backtests=32, backend="cuda"), **kw)
    ref = walk_forward(data, out=tmp_path / "ref", eval_config=EvalConfig(n_backtests=32, backend="reference"), **kw)
    assert all("error" not in f for f in gpu["folds"]), [f.get("error") for f in gpu["folds"]]
    assert {f["backend"] for f in gpu["folds"]} == {"cuda"}
    assert all(f["cuda_visible_devices"] is not None for f in gpu["folds"])  # one GPU per worker process
    assert [f["metrics"] for f in gpu["folds"]] == [f["metrics"] for f in ref["folds"]]
    assert np.array_equal(np.load(tmp_path / "gpu" / "fold-2" / "equity.npy"),
                          np.load(tmp_path / "ref" / "fold-2" / "equity.npy"))
