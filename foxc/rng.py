"""xorshift32, as the kernels use it (cuda/include/foxc/rng.h): vectorised numpy and seeding."""
from __future__ import annotations

import numpy as np


def xorshift32(x: np.ndarray) -> np.ndarray:
    """One step for every state in `x` (uint32), returning the new states."""
    x = np.asarray(x, np.uint32).copy()
    x ^= x << np.uint32(13)
    x ^= x >> np.uint32(17)
    x ^= x << np.uint32(5)
    return x


def uniform24(x: np.ndarray) -> np.ndarray:
    """float32 in [0, 1) from the top 24 bits of each state."""
    return (np.asarray(x, np.uint32) >> np.uint32(8)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def seed_states(seed: int, n: int, stream: int = 0) -> np.ndarray:
    """n non-zero xorshift32 states from (seed, stream), independent of n for the first elements."""
    states = np.random.default_rng([seed, stream]).integers(1, 2**32, size=n, dtype=np.uint64)
    return states.astype(np.uint32)
