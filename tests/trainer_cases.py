"""Small trainer set-ups shared by the CPU and GPU trainer tests."""
import numpy as np

from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.synthetic import synthetic_data
from foxc.trainer.config import TrainConfig
from foxc.trainer.run import Trainer
from foxc.trainer.state import export_state


def market(rows=20_000, seed=0):
    m = synthetic_data(rows, seed=seed)
    return m, compute_labels(m.records, m.tick, LabelConfig())


def config(**over) -> TrainConfig:
    base = dict(n_backtests=16, n_steps=10, seq_len=4, per_capacity=64, synthetic_rows=20_000, episode_steps=40,
                log_every=5, checkpoint_every=0, graph="off")
    base.update(over)
    return TrainConfig(**base)


def trainer(rt, cfg, data=None, out=None) -> Trainer:
    m, labels = data or market(cfg.synthetic_rows, cfg.seed)
    return Trainer(rt, cfg, m, labels, out)


def assert_same_state(a: dict, b: dict):
    assert a.keys() == b.keys()
    for name in a:
        x, y = a[name], b[name]
        if hasattr(x, "m"):  # AdamState
            assert x.step == y.step, name
            assert np.array_equal(x.m, y.m) and np.array_equal(x.v, y.v), name
        else:
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes(), f"section {name} differs"


def state(t: Trainer) -> dict:
    return export_state(t.ts)
