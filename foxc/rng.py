"""The two random sides of foxc, each with one generator and one seeding.

Device: xorshift32 (cuda/include/foxc/rng.h), one uint32 state per backtest or sample slot,
advanced by the kernels and mirrored here for their numpy references. Host: numpy's Generator,
seeded from (run seed, stream) so that each consumer draws independently of the others and of
how many values the others take."""
from __future__ import annotations

import numpy as np

# One stream per consumer of the run seed; append, never renumber (renumbering changes every run).
STREAMS = {"weights": 1, "actor": 2, "data": 3, "replay": 4, "episodes": 5, "evaluation": 6, "sweep": 7, "rotation": 8}


def generator(seed: int, stream: str) -> np.random.Generator:
    """The host generator of `stream` for run seed `seed`."""
    return np.random.default_rng([int(seed), STREAMS[stream]])


def seed_states(seed: int, n: int, stream: str) -> np.ndarray:
    """n non-zero xorshift32 states (a zero state stays zero) for `stream`; the first elements do not depend on n."""
    return generator(seed, stream).integers(1, 2**32, size=n, dtype=np.uint64).astype(np.uint32)


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
