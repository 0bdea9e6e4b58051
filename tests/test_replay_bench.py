"""The replay benchmark runs on the reference backend with tiny sizes and prints its summary."""
import json

import numpy as np

from foxc.bench import replay
from foxc.nn.model import STATE_DIM


def test_replay_bench_smoke(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert replay.main(["--backend", "reference", "--n-backtests", "8", "--per-capacity", "64", "--reps", "2",
                        "--json", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("summary: replay step") and "numpy sum-tree" in lines[-1]
    record = json.loads(out.read_text())
    assert record["benchmark"] == "replay" and record["capacity"] == 64 and record["sampling_ratio"] > 0


def test_numpy_peer_samples_proportionally():
    tree = replay.NumpySumTree(8, seed=1)
    tree.set_priorities(np.arange(8), np.array([0, 1, 0, 3, 0, 0, 4, 0], float))
    index, weight, h_t, _ = tree.sample(4000, 0.5)
    counts = np.bincount(index, minlength=8)
    assert counts[[0, 2, 4, 5, 7]].sum() == 0
    assert abs(counts[6] / 4000 - 0.5) < 0.02 and weight.max() == 1.0 and h_t.shape == (4000, STATE_DIM)
