"""What the peer tests (bench/torch_step.py, bench/jax_step.py) share: the peer modules loaded by
path, and one learning pass of foxc's Learner on the reference backend to compare against."""
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from foxc.data.features import FEATURES
from foxc.isv import IsvBus
from foxc.nn import model

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load_peer(name: str):
    """bench/<name>.py as a module (bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_peer", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass
class LearningPass:
    inputs: dict    # the learner's inputs (features, labels, mask, h_t, h_tp1, action, ret, gamma_n, done, weight)
    theta: dict     # named weights, foxc's [in, out] layout
    grads: dict     # named gradients after forward_backward
    h: np.ndarray   # the encoder's output
    td: np.ndarray  # |TD| per sample
    losses: np.ndarray  # l_q, l_pi, l_v, l_bce as foxc reports them


def foxc_learning_pass(rt, rng, B: int = 8, K: int = 4) -> LearningPass:
    """One forward_backward of foxc's Learner on random valid inputs, some returns clipping at the support."""
    learner = model.Learner(rt, IsvBus(rt), B, K, FEATURES)
    learner.params.init(rng)
    inputs = learner.random_inputs(rng)
    inputs["ret"] = (3 * rng.standard_normal(B)).astype(np.float32)
    learner.load_inputs(inputs)
    model.launch_all(learner.forward_backward, rt.stream)
    rt.stream.synchronize()  # the loss means are read from mapped memory
    return LearningPass(inputs, learner.params.host("theta"), learner.params.host("grad"),
                        learner.encoder.h.download(), learner.rl.td_error.download(), learner.losses.host.copy())
