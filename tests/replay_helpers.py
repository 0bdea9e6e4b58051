"""Shared helpers of the replay tests: random step inputs and a naive n-step model."""
from __future__ import annotations

import math

import numpy as np

WIDTH = 132  # floats per state row: the trainer's width, not a multiple of the 128-thread copy block



def random_step(rng, n_backtests: int, batch: int, done_rate: float = 0.1) -> dict[str, np.ndarray]:
    return {
        "h_t": rng.standard_normal((n_backtests, WIDTH)).astype(np.float32),
        "action": rng.integers(0, 5, n_backtests).astype(np.int32),
        "reward": rng.standard_normal(n_backtests).astype(np.float32),
        "reward_raw": (rng.standard_normal(n_backtests) * 10).astype(np.float32),
        "done": (rng.random(n_backtests) < done_rate).astype(np.float32),
        "log_pi": (-rng.random(n_backtests) * 3).astype(np.float32),
        "h_tp1": rng.standard_normal((n_backtests, WIDTH)).astype(np.float32),
        "td": rng.standard_normal(batch).astype(np.float32),
    }


def upload_step(rb, step: dict[str, np.ndarray]):
    for k, v in step.items():
        rb.inputs[k].upload(v)


class NaiveNStep:
    """Per-backtest lists of entries and a flat storage written in emission order (float64 returns)."""

    def __init__(self, n_backtests: int, capacity: int):
        self.rings = [[] for _ in range(n_backtests)]
        self.capacity = capacity
        self.head = 0
        self.length = 0
        self.slots: dict[int, dict] = {}

    def step(self, s: dict[str, np.ndarray], n: int, gamma: float):
        emitted = []
        for b, ring in enumerate(self.rings):
            ring.append({k: s[k][b] for k in ("h_t", "action", "reward", "reward_raw", "done", "log_pi")})
            done = s["done"][b] > 0.5
            emit = len(ring) if done else max(0, len(ring) - n + 1)
            for i in range(emit):
                j = min(i + n, len(ring))
                window = ring[i:j]
                emitted.append({
                    "h_t": ring[i]["h_t"],
                    "h_tp1": ring[j]["h_t"] if j < len(ring) else s["h_tp1"][b],
                    "action": int(ring[i]["action"]),
                    "return": sum(gamma ** k * float(e["reward"]) for k, e in enumerate(window)),
                    "return_raw": sum(gamma ** k * float(e["reward_raw"]) for k, e in enumerate(window)),
                    "done": 1.0 if (j == len(ring) and done) else 0.0,
                    "log_pi": float(ring[i]["log_pi"]),
                    "gamma_n": gamma ** (j - i),
                    "steps": j - i,
                })
            del ring[:emit]
        for o, tr in enumerate(emitted):
            self.slots[(self.head + o) % self.capacity] = tr
        self.head = (self.head + len(emitted)) % self.capacity
        self.length = min(self.capacity, self.length + len(emitted))
        return len(emitted)


def chi_square_sf(stat: float, dof: int) -> float:
    """P(X >= stat) for X ~ chi^2(dof), by the Wilson-Hilferty normal approximation (good for dof >= 10)."""
    z = ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))
