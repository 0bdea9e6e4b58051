"""Held-out checks of a trained model, on the host with the numpy model: perception accuracy and
the policy's PnL in the simulator against a random policy's.

These read the weights (one download) and run the model's numpy forward, so they are the same on
either backend and never disturb the training step's buffers or graph.
"""
from __future__ import annotations

import numpy as np

from ..agent.layout import N_ACTIONS
from ..data.features import window_features
from ..nn import functional as Fn
from ..nn.matmul import ACT_TANH


def encode(params: dict[str, np.ndarray], features: np.ndarray, hidden: int) -> np.ndarray:
    """h [B, D] from time-major features [K, B, F] (the encoder's forward in numpy)."""
    K, B, F = features.shape
    z = Fn.linear(features.reshape(K * B, F), params["enc_w_in"], params["enc_b_in"]).reshape(K, B, -1)
    _, y = Fn.ssm_scan(z.astype(np.float32), hidden)
    return Fn.linear(y, params["enc_w_out"], params["enc_b_out"], ACT_TANH)


def windows(records: np.ndarray, cursors: np.ndarray, K: int, tick: int) -> np.ndarray:
    """Time-major features [K, B, F] of the windows ending at `cursors` (all within one segment)."""
    return np.ascontiguousarray(window_features(records, cursors, K, tick).transpose(1, 0, 2))


def perception_accuracy(params: dict, market, labels: np.ndarray, K: int, hidden: int, n: int = 4096,
                        horizon: int = 0, seed: int = 0) -> dict:
    """Accuracy of the up/down head at `horizon` (index) on n windows of held-out data, where labelled."""
    rng = np.random.default_rng(seed)
    seg = market.records["segment"]
    idx = np.arange(len(market.records))
    first = np.searchsorted(seg, seg)  # first row of each row's segment
    ok = np.flatnonzero((idx - first >= K - 1) & (labels[5, horizon] > 0))
    cursors = rng.choice(ok, size=min(n, len(ok)), replace=False)
    h = encode(params, windows(market.records, cursors, K, market.tick), hidden)
    logits = Fn.linear(h, params["perception_w"], params["perception_b"])[:, horizon]
    truth = labels[0, horizon, cursors] > 0.5
    pred = logits > 0
    return {"accuracy": float(np.mean(pred == truth)), "n": int(len(cursors)),
            "base_rate_up": float(np.mean(truth))}


def policy_pnl(params: dict, market, K: int, hidden: int, n_backtests: int, steps: int, policy: str = "greedy",
               seed: int = 0, fee_per_lot: int = 0, backend: str = "reference") -> dict:
    """Run `policy` ('greedy': argmax of the policy head; 'random': uniform) in the simulator over
    held-out data for `steps` steps; returns the PnL net of fees (price units per lot) and trade counts."""
    from ..lobsim.env import LobEnv
    rng = np.random.default_rng(seed)
    env = LobEnv(market.records, n_backtests, episode_len=200, fee_per_lot=fee_per_lot, backend=backend)
    env.reset(seed)
    first_of = np.searchsorted(market.records["segment"], market.records["segment"])
    total, holds = 0.0, 0
    for _ in range(steps):
        cursor = env.cursor.download()
        if policy == "random":
            actions = rng.integers(0, N_ACTIONS, n_backtests)
        else:
            start = first_of[cursor]
            c = np.maximum(cursor, start + K - 1)  # a window that would leave the segment starts at its first row
            h = encode(params, windows(market.records, c, K, market.tick), hidden)
            actions = np.argmax(Fn.linear(h, params["policy_w"], params["policy_b"]), axis=1)
        holds += int(np.sum(actions == 0))
        rewards, _, _ = env.step(actions)
        total += float(rewards.astype(np.float64).sum())
    stats = env.sim.stats()
    env.close()
    return {"policy": policy, "pnl": total, "pnl_per_backtest_step": total / (steps * n_backtests),
            "trades": stats["trades"], "win_rate": stats["wins"] / stats["trades"] if stats["trades"] else None,
            "hold_frac": holds / (steps * n_backtests)}
