"""The integrated trainer on the GPU: graph identity, resume identity, and the learning check."""
import numpy as np

from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.synthetic import synthetic_data
from foxc.nn.model import HIDDEN_DIM
from foxc.trainer.config import TrainConfig
from foxc.trainer.evaluate import perception_accuracy, policy_pnl
from foxc.trainer.run import Trainer
from trainer_cases import assert_same_state, config, market, state, trainer

DATA = market(60_000)


def gpu_config(**over):
    base = dict(n_backtests=256, seq_len=16, per_capacity=1024, synthetic_rows=60_000)
    base.update(over)
    return config(**base)


def test_graph_replay_equals_eager_on_device(cuda_rt):
    eager = trainer(cuda_rt, gpu_config(graph="off"), DATA)
    eager.train(14)
    graphed = trainer(cuda_rt, gpu_config(graph="on"), DATA)
    graphed.train(14)
    assert graphed.graph is not None and graphed.graph_step == 1024 // 256 + 2
    assert_same_state(state(eager), state(graphed))
    for t in (eager, graphed):
        t.close()


def test_resume_matches_uninterrupted_run_on_device(cuda_rt, tmp_path):
    cfg = gpu_config(graph="on")
    straight = trainer(cuda_rt, cfg, DATA)
    straight.train(16)
    first = trainer(cuda_rt, cfg, DATA, tmp_path)
    first.train(9)  # a graph is captured at step 6 and replayed before the save
    path = first.save()
    resumed = trainer(cuda_rt, cfg, DATA, tmp_path / "b")
    resumed.resume(path)
    resumed.train(7)
    assert_same_state(state(straight), state(resumed))
    for t in (straight, first, resumed):
        t.close()


def test_learning_check_on_device(cuda_rt):
    """2,000 graph steps at B=1,024, K=32, PER 65,536: held-out perception accuracy at the first
    horizon and the trained policy's PnL against a random policy's."""
    K = 32
    cfg = TrainConfig(n_backtests=1024, n_steps=2000, seq_len=K, per_capacity=65536, synthetic_rows=1_000_000,
                      graph="on", log_every=500, checkpoint_every=0)
    train = synthetic_data(1_000_000, seed=0)
    held = synthetic_data(200_000, seed=99)
    held_labels = compute_labels(held.records, held.tick, LabelConfig(horizons=cfg.horizons))
    t = Trainer(cuda_rt, cfg, train, compute_labels(train.records, train.tick, LabelConfig(horizons=cfg.horizons)))
    summary = t.train(cfg.n_steps)
    params = t.ts.learner.params.host()
    acc = perception_accuracy(params, held, held_labels, K, HIDDEN_DIM, n=8192)
    trained = policy_pnl(params, held, K, HIDDEN_DIM, 256, 100, "greedy", backend="cuda")
    random = policy_pnl(params, held, K, HIDDEN_DIM, 256, 100, "random", seed=1, backend="cuda")
    print(f"learning check: {summary['sps']} steps/s; accuracy h={cfg.horizons[0]} {acc['accuracy']:.3f} "
          f"(n={acc['n']}, up rate {acc['base_rate_up']:.3f}); PnL trained {trained['pnl']:.2f} "
          f"({trained['trades']} trades, hold {trained['hold_frac']:.2f}) vs random {random['pnl']:.2f}")
    # "clearly above chance": 8192 windows give a standard error of 0.0055 near 0.5, so 0.53 is 5.5 of them
    assert acc["accuracy"] > 0.53
    assert trained["pnl"] > random["pnl"]
    assert np.isfinite(t.ts.losses.host).all()
    t.close()
