"""The replay layout: ring and transition columns, counters, kernel geometry.

cuda/include/foxc/replay.h is generated from this module (`python -m foxc.replay.layout --write`,
also run by tools/build_cubins.py).
"""
from __future__ import annotations

import sys

from ..cgen import GeneratedHeader, defines

ROW_BLOCK = 128  # threads of the kernels that copy state rows (rows may be any width)
N_STEP_MAX = 8

# Columns of one n-step ring entry (float32 row per entry).
RING_ACTION, RING_REWARD, RING_REWARD_RAW, RING_DONE, RING_LOG_PI = range(5)
RING_COLS = 5
# Columns of one stored transition (float32 row per transition).
TR_ACTION, TR_RETURN, TR_RETURN_RAW, TR_DONE, TR_LOG_PI, TR_GAMMA_N, TR_STEPS = range(7)
TR_COLS = 8
# Device counters of a buffer (uint32).
CTR_WRITE_HEAD, CTR_LENGTH, CTR_FLUSH_BASE, CTR_FLUSH_TOTAL = range(4)
CTR_COUNT = 4

PRIORITY_EPS = 1e-6
SUBTREE_SPAN = 1024
SUBTREE_BLOCK = 512
WALK_DEPTH = 4
ROW_WARPS = ROW_BLOCK // 32  # replay_sample, replay_next_state: one item (a sample, a backtest) a warp, this many a block

MAX_CAPACITY = 1 << 20
MAX_BACKTESTS = 65_536
MAX_BATCH = 65_536
MAX_WIDTH = 4096  # floats per state row


def warp_grid(items: int) -> int:
    """Blocks of ROW_BLOCK threads for `items` items, one a warp."""
    return -(-items // ROW_WARPS)


def header_lines() -> list[str]:
    return defines([
        ("REPLAY_ROW_BLOCK", ROW_BLOCK, "threads of the kernels that copy state rows (any row width)"),
        ("REPLAY_N_STEP_MAX", N_STEP_MAX, "the longest n-step ring a buffer may allocate"),
        ("RING_ACTION", RING_ACTION, "ring entry column: action as a float (exact: small integers)"),
        ("RING_REWARD", RING_REWARD, "scaled reward"),
        ("RING_REWARD_RAW", RING_REWARD_RAW, "raw reward"),
        ("RING_DONE", RING_DONE, "1 when the episode ended at this step"),
        ("RING_LOG_PI", RING_LOG_PI, "log pi_old of the action"),
        ("RING_COLS", RING_COLS, ""),
        ("TR_ACTION", TR_ACTION, "transition column: action as a float"),
        ("TR_RETURN", TR_RETURN, "n-step return of scaled rewards"),
        ("TR_RETURN_RAW", TR_RETURN_RAW, "n-step return of raw rewards"),
        ("TR_DONE", TR_DONE, "1 when the episode ended inside the window: no bootstrap"),
        ("TR_LOG_PI", TR_LOG_PI, "log pi_old of the first action"),
        ("TR_GAMMA_N", TR_GAMMA_N, "gamma^m, m = steps in the window"),
        ("TR_STEPS", TR_STEPS, "m, as a float"),
        ("TR_COLS", TR_COLS, "padded to 32 bytes"),
        ("CTR_WRITE_HEAD", CTR_WRITE_HEAD, "counter: next slot to write"),
        ("CTR_LENGTH", CTR_LENGTH, "filled slots, at most capacity"),
        ("CTR_FLUSH_BASE", CTR_FLUSH_BASE, "write head before the latest flush"),
        ("CTR_FLUSH_TOTAL", CTR_FLUSH_TOTAL, "transitions emitted by the latest flush (may exceed capacity)"),
        ("CTR_COUNT", CTR_COUNT, ""),
        ("REPLAY_PRIORITY_EPS", PRIORITY_EPS, "added to |TD| so no stored transition has priority 0"),
        ("REPLAY_SUBTREE_SPAN", SUBTREE_SPAN, "leaves one block of replay_update_tree owns and sums up"),
        ("REPLAY_SUBTREE_BLOCK", SUBTREE_BLOCK, "its block: one thread per node of the subtree's widest level"),
        ("REPLAY_WALK_DEPTH", WALK_DEPTH, "tree levels per lookahead round of replay_sample's walk (30 nodes, a warp)"),
        ("REPLAY_ROW_WARPS", ROW_WARPS, "items a block of replay_sample / replay_next_state takes: one a warp"),
    ])


HEADER = GeneratedHeader.of("replay.h", header_lines, "foxc.replay.layout")

if __name__ == "__main__":
    sys.exit(HEADER.main())
