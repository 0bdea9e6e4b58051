"""Random inputs for the trainer's bridge kernels (CPU and GPU tests)."""
import numpy as np

from foxc.data.features import HORIZONS, LABEL_PLANES
from foxc.lobsim.layout import POSITION_DTYPE, TRADE_DTYPE

CAP = 8


def positions(rng, B):
    pos = np.zeros(B, POSITION_DTYPE)
    pos["lots"] = rng.integers(-2, 3, B)
    pos["unrealized_pnl"] = rng.integers(-10**10, 10**10, B) * (pos["lots"] != 0)
    pos["trail_hwm"] = np.maximum(pos["unrealized_pnl"] + rng.integers(-10**9, 10**10, B), 0) * (pos["lots"] != 0)
    pos["equity"] = rng.integers(-10**11, 10**11, B)
    pos["peak_equity"] = pos["equity"] + rng.integers(0, 10**10, B)
    pos["trades"] = rng.integers(0, 40, B)
    return pos


def before_act_args(rng, B, poisoned):
    planes = rng.random((LABEL_PLANES, B, HORIZONS)).astype(np.float32)
    return [planes, poisoned((B, 9)), poisoned((B, 9)), B]


def after_sim_args(rng, B, poisoned):
    pos = positions(rng, B)
    log = np.zeros((B, CAP), TRADE_DTYPE)
    log["pnl"] = rng.integers(-10**10, 10**10, (B, CAP))
    prev = (pos["trades"] - rng.integers(0, 3, B)).clip(0).astype(np.uint32)
    return [pos, log, prev, poisoned(B, np.uint32), poisoned(B), poisoned(B), 1e-9, CAP, B]
