"""The replay layout: constants mirrored from cuda/include/foxc/replay.h (a test checks they agree)."""
from __future__ import annotations

ROW_BLOCK = 128  # threads of the kernels that copy state rows (rows may be any width)
N_STEP_MAX = 8

RING_ACTION, RING_REWARD, RING_REWARD_RAW, RING_DONE, RING_LOG_PI = range(5)
RING_COLS = 5

TR_ACTION, TR_RETURN, TR_RETURN_RAW, TR_DONE, TR_LOG_PI, TR_GAMMA_N, TR_STEPS = range(7)
TR_COLS = 8

CTR_WRITE_HEAD, CTR_LENGTH, CTR_FLUSH_BASE, CTR_FLUSH_TOTAL = range(4)
CTR_COUNT = 4

PRIORITY_EPS = 1e-6
REDUCE_BLOCK = 1024
SUBTREE_SPAN = 1024
SUBTREE_BLOCK = 512
WALK_DEPTH = 4

MAX_CAPACITY = 1 << 20
MAX_ENVS = 65_536
MAX_BATCH = 65_536
MAX_WIDTH = 4096  # floats per state row

HEADER_MACROS = {
    "REPLAY_ROW_BLOCK": ROW_BLOCK, "REPLAY_N_STEP_MAX": N_STEP_MAX,
    "RING_ACTION": RING_ACTION, "RING_REWARD": RING_REWARD, "RING_REWARD_RAW": RING_REWARD_RAW,
    "RING_DONE": RING_DONE, "RING_LOG_PI": RING_LOG_PI, "RING_COLS": RING_COLS,
    "TR_ACTION": TR_ACTION, "TR_RETURN": TR_RETURN, "TR_RETURN_RAW": TR_RETURN_RAW, "TR_DONE": TR_DONE,
    "TR_LOG_PI": TR_LOG_PI, "TR_GAMMA_N": TR_GAMMA_N, "TR_STEPS": TR_STEPS, "TR_COLS": TR_COLS,
    "CTR_WRITE_HEAD": CTR_WRITE_HEAD, "CTR_LENGTH": CTR_LENGTH, "CTR_FLUSH_BASE": CTR_FLUSH_BASE,
    "CTR_FLUSH_TOTAL": CTR_FLUSH_TOTAL, "CTR_COUNT": CTR_COUNT,
    "REPLAY_PRIORITY_EPS": PRIORITY_EPS, "REPLAY_REDUCE_BLOCK": REDUCE_BLOCK,
    "REPLAY_SUBTREE_SPAN": SUBTREE_SPAN, "REPLAY_SUBTREE_BLOCK": SUBTREE_BLOCK, "REPLAY_WALK_DEPTH": WALK_DEPTH,
}


def xorshift32(x):
    """One step of the samplers' generator on uint32 numpy values (vectorised)."""
    import numpy as np
    x = np.asarray(x, np.uint32).copy()
    x ^= x << np.uint32(13)
    x ^= x >> np.uint32(17)
    x ^= x << np.uint32(5)
    return x
