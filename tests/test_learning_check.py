"""The learning check on the reference backend: 300 steps at B=64, K=8 on synthetic data, then
held-out perception accuracy at the first horizon and the policy's PnL against a random policy's.
(tests/gpu/test_learning_gpu.py runs the full-size check on a GPU.)"""
import numpy as np

from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.synthetic import synthetic_data
from foxc.nn.model import HIDDEN_DIM
from foxc.trainer.config import TrainConfig
from foxc.trainer.evaluate import perception_accuracy, policy_pnl
from foxc.trainer.run import Trainer

STEPS, B, K = 300, 64, 8


def test_learner_beats_chance_and_random_policy(ref_rt):
    cfg = TrainConfig(n_backtests=B, n_steps=STEPS, seq_len=K, per_capacity=1024, synthetic_rows=100_000,
                      graph="off", log_every=100, checkpoint_every=0)
    train = synthetic_data(100_000, seed=0)
    held = synthetic_data(50_000, seed=99)  # another seed: data the model never saw
    labels_held = compute_labels(held.records, held.tick, LabelConfig(horizons=cfg.horizons))
    t = Trainer(ref_rt, cfg, train, compute_labels(train.records, train.tick, LabelConfig(horizons=cfg.horizons)))
    before = perception_accuracy(t.ts.learner.params.host(), held, labels_held, K, HIDDEN_DIM)
    t.train(STEPS)
    params = t.ts.learner.params.host()
    after = perception_accuracy(params, held, labels_held, K, HIDDEN_DIM)
    print(f"perception accuracy at h={cfg.horizons[0]}: {before['accuracy']:.3f} -> {after['accuracy']:.3f} "
          f"on {after['n']} held-out windows (up rate {after['base_rate_up']:.3f})")
    # 4096 windows: one standard error of an accuracy near 0.5 is 0.008, so 0.53 is ~4 above chance
    assert after["accuracy"] > 0.53
    assert after["accuracy"] > max(after["base_rate_up"], 1 - after["base_rate_up"]) + 0.01
    trained = policy_pnl(params, held, K, HIDDEN_DIM, 64, 60, "greedy")
    random = policy_pnl(params, held, K, HIDDEN_DIM, 64, 60, "random", seed=1)
    print(f"held-out PnL over 60 steps x 64 backtests: trained {trained['pnl']:.2f} "
          f"({trained['trades']} trades, hold {trained['hold_frac']:.2f}), random {random['pnl']:.2f} "
          f"({random['trades']} trades)")
    assert trained["pnl"] > random["pnl"]
    assert np.isfinite(t.ts.losses.host).all()
