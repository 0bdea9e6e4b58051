"""The RL agent as a walk-forward fold trainer (foxc.evaluate.trainers): train the integrated
trainer on a fold's window, and evaluate the policy its checkpoint holds with learning off."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..agent.layout import N_ACTIONS
from ..checkpoint import read_checkpoint
from ..data.labels import LabelConfig, compute_labels
from ..driver import open_runtime
from ..nn import functional as Fn
from ..nn.model import HIDDEN_DIM
from .config import TrainConfig
from .evaluate import encode, windows
from .metrics import MetricsLog
from .run import Trainer

NAME = "rl: foxc integrated trainer"
WEIGHTS = ("enc_w_in", "enc_b_in", "enc_w_out", "enc_b_out", "policy_w", "policy_b")


class RlPolicy:
    """The trained policy head on the encoder's h, evaluated on the host with the numpy model.

    Greedy: the most probable action. Sampled: from the policy's softmax mixed with the
    exploration floor the checkpoint's ISV holds, as in training. The probabilities returned
    are that sampling distribution (their entropy is the policy's entropy).
    """

    name = NAME
    is_baseline = False

    def __init__(self, weights: dict, window: int, floor: float):
        self.w, self.K, self.floor = weights, int(window), float(floor)

    def __call__(self, ctx):
        idx = ctx.window(self.K)  # [B, K] rows ending at each cursor
        feats = windows(ctx.records, idx[:, -1], self.K, ctx.tick) if np.all(idx[:, 0] == idx[:, -1] - self.K + 1) \
            else _clamped_windows(ctx.records, idx, ctx.tick)
        h = encode(self.w, feats, HIDDEN_DIM)
        logits = Fn.linear(h, self.w["policy_w"], self.w["policy_b"]).astype(np.float64)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        probs = (1 - N_ACTIONS * self.floor) * p + self.floor
        if ctx.greedy:
            actions = np.argmax(probs, axis=1)
        else:
            u = ctx.rng.random(len(probs))[:, None]
            actions = np.minimum((u >= np.cumsum(probs, axis=1)).sum(axis=1), N_ACTIONS - 1)
        return actions.astype(np.int32), probs


def _clamped_windows(records, idx, tick) -> np.ndarray:
    """Features of windows whose first rows were clamped at the start of the data: each row's own features."""
    from ..data.features import window_features
    K = idx.shape[1]
    per_row = window_features(records, idx.reshape(-1), 1, tick).reshape(idx.shape[0], K, -1)
    return np.ascontiguousarray(per_row.transpose(1, 0, 2))


class RlFoldTrainer:
    name = NAME
    is_baseline = False

    def train(self, window, steps: int, out_dir: Path, config: dict) -> Path:
        from ..train import parse_args
        args = parse_args(list(config.get("train_args", [])))
        rt = open_runtime(config.get("backend") or args.backend)
        given = {k: v for k, v in vars(args).items()
                 if k not in ("backend", "resume_from", "out", "profile", "profile_steps", "data")}
        given.update(n_steps=int(steps), seed=int(config.get("seed", 0)) + int(config.get("fold", 0)))
        cfg = TrainConfig.for_backend(rt.backend, **given)
        labels = compute_labels(window.records, window.tick, LabelConfig(horizons=cfg.horizons))
        out_dir = Path(out_dir)
        trainer = Trainer(rt, cfg, window, labels, out_dir, data_meta={"source": window.source,
                                                                       "fold": config.get("fold")})
        metrics = MetricsLog(out_dir / "metrics.jsonl", cfg.n_steps)
        try:
            trainer.train(cfg.n_steps, metrics, cfg.checkpoint_every)
        finally:
            metrics.close()
        path = trainer.save()
        trainer.close()
        return path

    def load_policy(self, checkpoint: Path, config: dict) -> RlPolicy:
        ckpt = read_checkpoint(checkpoint)
        weights = {name: np.asarray(ckpt[name], np.float32) for name in WEIGHTS}
        from ..isv.registry import slot_index
        floor = float(np.asarray(ckpt["isv"])[slot_index("exploration_floor")])
        return RlPolicy(weights, ckpt.config["seq_len"], floor)


TRAINER = RlFoldTrainer()
