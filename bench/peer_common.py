"""What the peers of bench/ share: shapes, settings, the market as numpy tables, foxc's own figure.

`torch_step.py` and `jax_step.py` build the same step from these, so a shape or a setting is
defined once (most of them by foxc itself) and both peers time the same work.
"""
from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # foxc from this checkout when run as `python bench/<peer>.py`
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from foxc.agent.layout import (N_POSITION_FEATURES, POS_INDEX, Q_INVALID, SPREAD_CAP_TICKS,  # noqa: E402,F401
                               TIME_SCALE_STEPS, UNREALIZED_SCALE_TICKS, valid_actions)
from foxc.data.features import F_MID_REL, F_SPREAD, FEATURES, snapshot_features  # noqa: E402,F401
from foxc.data.record import PRICE_SCALE, PRICE_UNDEF  # noqa: E402
from foxc.isv.registry import slot  # noqa: E402
from foxc.lobsim.layout import FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, N_ACTIONS, SHORT  # noqa: E402,F401
from foxc.nn.heads import C51_ATOMS, Q_OUTPUTS  # noqa: E402,F401
from foxc.nn.layout import N_PERCEPTION  # noqa: E402,F401
from foxc.nn.model import HIDDEN_DIM, RL_HIDDEN, STATE_DIM, layout  # noqa: E402,F401
from foxc.nn.optim import ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_WD  # noqa: E402,F401
from foxc.trainer.config import TrainConfig  # noqa: E402

SIDE = HIDDEN_DIM + POS_INDEX["side"]  # the state column holding the position's sign
FRAME = 16   # diagnostics frame length (floats)
RING = 1024  # diagnostics ring length (frames)
# foxc's tensors in buffer order: name -> (shape [in, out] or [out], learning-rate slot)
TENSORS = {t.name: (t.shape, t.lr_slot) for t in layout(FEATURES)[0]}
TARGET = ("rl_w", "rl_b", "dqn_w", "dqn_b")  # foxc.nn.model.TARGET_TENSORS: the C51 target's copies


def isv(name: str) -> float:
    """The bootstrap value of an ISV slot: the peers run with foxc's starting settings."""
    return float(slot(name).bootstrap)


@dataclass(frozen=True)
class PeerConfig:
    B: int
    K: int = 32
    capacity: int = 65536
    n_step: int = TrainConfig.n_step
    episode_steps: int = TrainConfig.episode_steps
    lots: float = 1.0
    fee: float = 0.0  # price units per lot per side (foxc's bench default: no fee)

    def warm_steps(self) -> int:
        """Steps before the buffer is full: the first, n pushes to fill the rings, capacity / B more."""
        return 1 + self.n_step + -(-self.capacity // self.B) + 1


@dataclass(frozen=True)
class PeerSettings:
    """foxc's ISV bootstrap values both peers' steps read."""
    gamma: float
    tau: float
    alpha: float
    beta0: float
    beta_anneal: float
    clip_norm: float
    temperature: float
    eps_start: float
    eps_end: float
    eps_steps: float
    segment_end: float  # the chance an exploration segment ends at a step
    stop_threshold: float
    dd_rate: float
    reward_scale: float
    popart_rate: float
    ema_rate: float
    clamp_lo: float
    clamp_hi: float
    v_min: float
    v_max: float


def peer_settings() -> PeerSettings:
    return PeerSettings(
        gamma=isv("gamma"), tau=isv("tau"), alpha=isv("per_alpha"), beta0=isv("per_beta"),
        beta_anneal=isv("per_beta_anneal_steps"), clip_norm=isv("grad_clip_norm"),
        temperature=max(isv("distill_temperature"), 1e-6), eps_start=isv("explore_eps_start"),
        eps_end=isv("explore_eps_end"), eps_steps=isv("explore_eps_steps"),
        segment_end=1.0 / max(isv("explore_hold_steps"), 1.0), stop_threshold=isv("stop_loss_threshold"),
        dd_rate=isv("drawdown_penalty_rate"), reward_scale=isv("reward_scale"), popart_rate=isv("popart_rate"),
        ema_rate=isv("loss_ema_rate"), clamp_lo=isv("reward_clamp_lo"), clamp_hi=isv("reward_clamp_hi"),
        v_min=isv("c51_v_min"), v_max=isv("c51_v_max"))


def valid_table() -> np.ndarray:
    """bool [3, 5]: the valid actions of a position of side -1, 0, +1 (row side + 1)."""
    return valid_actions(np.array([-1, 0, 1]))


def market_tables(market, labels: np.ndarray) -> dict:
    """Per-snapshot tables built once from foxc's MarketData and label planes.

    features [N, 46]: foxc's per-snapshot features (snapshot_features) whose mid-relative column
    each window refills from mid2 (twice the mid, int64), as foxc's gather kernel does.
    labels / mask [N, 9]: the perception targets the bridge kernel builds. Books: best-first
    prices (float64, price units) and sizes (float32) of 10 levels; mid in price units.
    """
    rec = market.records
    n = len(rec)
    bid, ask = rec["bid_px"], rec["ask_px"]
    touch = (bid[:, 0] != PRICE_UNDEF) & (ask[:, 0] != PRICE_UNDEF)
    mid2 = np.where(touch, bid[:, 0] + ask[:, 0], 0).astype(np.int64)
    out = {"features": snapshot_features(rec, market.tick, mid2).astype(np.float32), "mid2": mid2,
           "labels": labels[0:3].transpose(2, 0, 1).reshape(n, N_PERCEPTION).astype(np.float32),
           "mask": np.stack([labels[5], labels[6], labels[6]]).transpose(2, 0, 1).reshape(n, N_PERCEPTION)
           .astype(np.float32),
           "mid": np.where(touch, mid2, 0).astype(np.float64) / (2 * PRICE_SCALE)}
    for side in ("bid", "ask"):
        px, sz = rec[f"{side}_px"], rec[f"{side}_sz"].astype(np.float32)
        empty = px == PRICE_UNDEF
        out[f"{side}_px"] = np.where(empty, 0, px).astype(np.float64) / PRICE_SCALE
        out[f"{side}_sz"] = np.where(empty, 0, sz).astype(np.float32)
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def tick_price(tick: int) -> float:
    """One tick (foxc's integer price units) in price units: rewards and the unrealized-PnL feature are in ticks."""
    return float(tick) / PRICE_SCALE


def foxc_weights(seed: int = 0) -> dict[str, np.ndarray]:
    """foxc's initial weights for a run seed (uniform +-1/sqrt(fan_in), zero biases), drawn by foxc's own code."""
    return {k: v.copy() for k, v in _foxc_weights(seed).items()}


@functools.lru_cache(maxsize=4)
def _foxc_weights(seed: int) -> dict[str, np.ndarray]:
    from foxc.driver import open_runtime
    from foxc.nn.model import Parameters
    from foxc.rng import generator
    rt = open_runtime("reference")
    try:
        p = Parameters(rt, FEATURES)
        p.init(generator(seed, "weights"))
        return {k: v.copy() for k, v in p.host("theta").items()}
    finally:
        rt.close()


def bench_foxc(market, labels, B: int, steps: int, K: int, capacity: int, precision: str, rt) -> dict:
    from foxc.bench.train import bench_one
    from foxc.trainer.session import RunData
    cfg = TrainConfig(n_backtests=B, n_steps=0, seq_len=K, per_capacity=capacity, synthetic_rows=len(market.records),
                      precision=precision, graph="on", log_every=10**9, checkpoint_every=0)
    r = bench_one(rt, cfg, RunData(market, labels, None, None, {"source": "synthetic"}), steps)
    return {"foxc_kernels": r["kernels"], "foxc_eager_sps": r["eager_sps"], "foxc_graph_sps": r["graph_sps"],
            "foxc_gpu_ms": r["gpu_ms_per_step"]}


def git_commit() -> str:
    try:
        from foxc.bench.report import git_commit as commit
        return commit()
    except Exception:  # noqa: BLE001 - the JSON only records it
        return "unknown"


def sizes_arg(text: str, flag: str = "--n-backtests") -> list[int]:
    """Comma-separated positive batch sizes, or a ValueError naming the flag and the value."""
    try:
        sizes = [int(b) for b in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated integers, got '{text}'") from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"{flag} takes positive batch sizes, got '{text}'")
    return sizes


@dataclass(frozen=True)
class RunSizes:
    sizes: list[int]
    steps: int
    K: int
    capacity: int
    rows: int


def run_sizes(ap, args, gpu: bool, cpu_steps: int) -> RunSizes:
    """The peers' shared flags with their GPU or CPU-smoke defaults; a bad value exits through `ap.error`."""
    try:
        sizes = sizes_arg(args.n_backtests or ("256,1024,4096" if gpu else "8"))
    except ValueError as e:
        ap.error(str(e))
    steps = args.steps or (200 if gpu else cpu_steps)
    capacity = args.per_capacity or (65536 if gpu else 64)
    if steps < 1 or args.steps_per_call < 1:
        ap.error(f"--steps and --steps-per-call must be at least 1, got {steps} and {args.steps_per_call}")
    if capacity & (capacity - 1) or capacity < 2:
        ap.error(f"--per-capacity must be a power of two, got {capacity}")
    return RunSizes(sizes, steps, args.seq_len or (32 if gpu else 4), capacity,
                    args.rows or (1_000_000 if gpu else 3_000))
