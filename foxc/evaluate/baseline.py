"""The logistic-imbalance baseline, not the RL agent: the yardstick an agent must beat, and a fold trainer.

Fit (numpy): x = (1, level-1 imbalance, ten-level imbalance, spread in ticks); y = 1 when the mid `horizon`
snapshots later (same segment) is above the current mid, 0 below, no label when equal; Newton's method (IRLS) with a
small L2 penalty, at most `steps` iterations. The margin m is the `hold_target` quantile of |p - 1/2| on the fit rows.
Policy p = σ(w·x): greedy, HOLD where |p - 1/2| < m, else LONG where p > 1/2 and SHORT below; sampled, from
P(HOLD) = σ((m - |p - 1/2|)/T), T = m/4, the rest split between LONG and SHORT as p : 1 - p.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..checkpoint import CheckpointSaver, read_checkpoint
from ..data.features import F_DEPTH_IMB, F_IMBALANCE, F_SPREAD, snapshot_features
from ..data.source import no_room, records_need
from ..data.validate import DataError
from ..lobsim.layout import HOLD, LONG, SHORT
from ..nn.functional import sigmoid

NAME = "baseline: logistic imbalance (not the RL agent)"
FEATURE_NAMES = ("bias", "imbalance", "depth_imbalance", "spread_ticks")
DEFAULTS = {"horizon": 10, "hold_target": 0.5, "l2": 1e-3}


class NotFitted(ValueError):
    """Records with too few mid moves to fit the baseline on."""


def no_room_in_fold(doing: str, why: str, need: str, source: str, config: dict, days: str,
                    smaller: str = "") -> DataError:
    """Out of memory `doing` in a walk-forward fold (any fold trainer's): what it needed, and the remedy (`why` it
    helps) for the data: synthetic rows, a prepared cache (`days`: the flag of the window's dates), or files (held
    whole: none); `smaller` ("FLAGS, or "): flags that shrink what the fold makes of its window, first."""
    window = ("fewer --synthetic-rows, or more --folds" if source == "synthetic" else
              f"more --folds, or fewer {days}" if config.get("cache") or smaller else "")
    return no_room(doing, "DATA", need, window and f"give {smaller}{window} ({why})")


def features(records: np.ndarray, tick: int) -> np.ndarray:
    """float64 [n, 4]: bias, level-1 imbalance, ten-level imbalance, spread in ticks."""
    f = snapshot_features(records, tick, np.zeros(len(records), np.int64))
    return np.column_stack([np.ones(len(records)), f[:, F_IMBALANCE], f[:, F_DEPTH_IMB], f[:, F_SPREAD]]
                           ).astype(np.float64)


def direction_labels(records: np.ndarray, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows with a label, label 0/1): the mid `horizon` snapshots later in the same segment, up or down."""
    mid2 = records["bid_px"][:, 0] + records["ask_px"][:, 0]
    n = len(records) - horizon
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0)
    d = mid2[horizon:] - mid2[:n]
    ok = (records["segment"][horizon:] == records["segment"][:n]) & (d != 0)
    rows = np.flatnonzero(ok)
    return rows, (d[rows] > 0).astype(np.float64)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, max_iter: int) -> tuple[np.ndarray, int]:
    """Newton's method on the mean log-loss + l2/2·|w|² (bias included); (weights, iterations)."""
    w = np.zeros(x.shape[1])
    for it in range(1, max(1, max_iter) + 1):
        p = sigmoid(x @ w)
        grad = x.T @ (p - y) / len(y) + l2 * w
        hess = (x * (p * (1 - p))[:, None]).T @ x / len(y) + l2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w, it


class LogisticImbalancePolicy:
    name = NAME
    is_baseline = True

    def __init__(self, w: np.ndarray, margin: float):
        self.w = np.asarray(w, np.float64)
        self.margin = float(margin)

    def distribution(self, p: np.ndarray) -> np.ndarray:
        conf = np.abs(p - 0.5)
        temp = max(self.margin / 4, 1e-9)
        hold = sigmoid((self.margin - conf) / temp)
        probs = np.zeros((len(p), 5))
        probs[:, HOLD] = hold
        probs[:, LONG] = (1 - hold) * p
        probs[:, SHORT] = (1 - hold) * (1 - p)
        return probs

    def __call__(self, ctx):
        p = sigmoid(features(ctx.obs, ctx.tick) @ self.w)
        probs = self.distribution(p)
        if ctx.greedy:
            actions = np.where(np.abs(p - 0.5) < self.margin, HOLD, np.where(p > 0.5, LONG, SHORT))
        else:
            u = ctx.rng.random(len(p))
            actions = (u[:, None] > np.cumsum(probs, axis=1)).sum(axis=1).clip(0, 4)
        return actions.astype(np.int32), probs


def fit_baseline(records: np.ndarray, tick: int, opts: dict = DEFAULTS, steps: int = 50
                 ) -> tuple[LogisticImbalancePolicy, dict]:
    """The baseline fitted on `records` (at most `steps` Newton iterations; `opts` as DEFAULTS) and what the fit
    found; NotFitted when the records hold too few mid moves to fit it."""
    opts = {**DEFAULTS, **opts}
    x = features(records, tick)
    rows, y = direction_labels(records, int(opts["horizon"]))
    if len(rows) < 10 or y.min() == y.max():
        raise NotFitted(f"the training window has too few mid moves to fit the baseline ({len(rows)} labelled)")
    w, iters = fit_logistic(x[rows], y, float(opts["l2"]), steps)
    p = sigmoid(x @ w)
    margin = float(np.quantile(np.abs(p - 0.5), float(opts["hold_target"])))
    py = p[rows]
    fit = {"policy": NAME, "labelled": int(len(rows)), "iterations": iters,
           "train_accuracy": float(((py > 0.5) == (y > 0.5)).mean()),
           "train_log_loss": float(-(y * np.log(py + 1e-12) + (1 - y) * np.log(1 - py + 1e-12)).mean()),
           "weights": dict(zip(FEATURE_NAMES, map(float, w))), "margin": margin, **opts}
    return LogisticImbalancePolicy(w, margin), fit


class LogisticImbalanceTrainer:
    """The fold trainer (foxc.walkforward.folds); `config['baseline']` may override DEFAULTS."""

    name = NAME
    is_baseline = True

    def train(self, window, steps: int, out_dir: Path, config: dict) -> Path:
        opts = {**DEFAULTS, **config.get("baseline", {})}
        try:
            policy, fit = fit_baseline(window.records, window.tick, opts, steps)
        except MemoryError:  # a fold's one line, as the RL trainer's (foxc.trainer.fold)
            n = window.n_rows
            raise no_room_in_fold("fitting the baseline on its training window",
                                  "each fold fits the baseline on its training window whole",
                                  f"{records_need(n)}, and arrays of each as it is fitted", window.source, config, "--train-days"
                                  ) from None
        path = CheckpointSaver(out_dir).save(fit["iterations"], {"baseline_w": policy.w,
                                                                 "baseline_margin": np.array([policy.margin])},
                                             {"config": {**config, "baseline": opts}, "policy": NAME,
                                              "features": list(FEATURE_NAMES)})
        (Path(out_dir) / "train.json").write_text(json.dumps(fit, indent=2) + "\n")
        return path

    def load_policy(self, checkpoint: Path, config: dict, rt=None) -> LogisticImbalancePolicy:
        ckpt = read_checkpoint(checkpoint)
        return LogisticImbalancePolicy(ckpt["baseline_w"], float(ckpt["baseline_margin"][0]))


TRAINER = LogisticImbalanceTrainer()
