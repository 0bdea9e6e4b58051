"""Shared constants of the agent kernels, and the step-statistics vector they reduce into.

cuda/include/foxc/agent.h is generated from this module (`python -m foxc.agent.layout --write`,
also run by tools/build_cubins.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..cgen import GeneratedHeader, header_text

N_ACTIONS = 5
HOLD, LONG, SHORT, FLAT_FROM_LONG, FLAT_FROM_SHORT = range(N_ACTIONS)
ACTION_NAMES = ("HOLD", "LONG", "SHORT", "FLAT_FROM_LONG", "FLAT_FROM_SHORT")
FLAG_GATED = 1  # an entry the confidence gate turned into HOLD
FLAG_STOPPED = 2  # the stop-loss forced a flat exit
STATS_BLOCK = 256  # threads of the single-block reductions

# One float64 per field, written by agent_step_stats each step.
STAT_FIELDS = [
    ("n", "backtests reduced (B)"),
    ("entropy_mean", "mean entropy of the sampling distribution, nats"),
    ("hold_frac", "fraction of backtests whose executed action is HOLD"),
    ("gated_frac", "fraction of entries turned into HOLD by the confidence gate"),
    ("stopped_frac", "fraction of backtests forced flat by the stop-loss"),
    ("reward_raw_mean", "mean raw reward"),
    ("reward_raw_sq_mean", "mean squared raw reward"),
    ("reward_scaled_mean", "mean reward after PopArt scaling and the clamp"),
    ("clipped_frac", "fraction of scaled rewards that hit a clamp bound"),
    ("closed_trades", "trades closed this step"),
    ("closed_abs_pnl_sum", "sum of |PnL| of the trades closed this step"),
    ("closed_wins", "closed trades with positive PnL this step"),
    ("closed_pnl_sum", "sum of PnL of the trades closed this step"),
]
N_STATS = len(STAT_FIELDS)
STAT_INDEX = {name: i for i, (name, _) in enumerate(STAT_FIELDS)}

# The diagnostics frame (float64 fields) written each step into a mapped-pinned ring:
# a header, the step statistics, the losses, chosen ISV slots and extras from other components.
LOSS_NAMES = ("l_q", "l_pi", "l_v", "l_bce")
FRAME_ISV = ("lr_q", "lr_policy", "lr_value", "lr_perception", "lr_encoder", "entropy_coef", "per_beta",
             "popart_mean", "popart_var", "reward_clamp_lo", "reward_clamp_hi", "mean_abs_pnl_ema")
N_FRAME_EXTRAS = 8  # slots for other components' counters (e.g. the simulator's skipped snapshots)
FRAME_FIELDS = (["seq", "step"] + [name for name, _ in STAT_FIELDS] + list(LOSS_NAMES) + list(FRAME_ISV)
                + [f"extra{i}" for i in range(N_FRAME_EXTRAS)])
FRAME_LEN = len(FRAME_FIELDS)
FRAME_INDEX = {name: i for i, name in enumerate(FRAME_FIELDS)}

HEADER_PATH = Path(__file__).resolve().parents[2] / "cuda" / "include" / "foxc" / "agent.h"


def render_header() -> str:
    lines = [f"#define AGENT_N_ACTIONS {N_ACTIONS}"]
    lines += [f"#define ACTION_{name} {i}" for i, name in enumerate(ACTION_NAMES)]
    lines += [f"#define AGENT_FLAG_GATED {FLAG_GATED}", f"#define AGENT_FLAG_STOPPED {FLAG_STOPPED}",
              f"#define AGENT_STATS_BLOCK {STATS_BLOCK}", "", f"#define AGENT_N_STATS {N_STATS}"]
    lines += [f"#define STAT_{name.upper()} {i}  // {doc}" for i, (name, doc) in enumerate(STAT_FIELDS)]
    lines += ["", f"#define FRAME_LEN {FRAME_LEN}  // float64 fields per diagnostics frame",
              f"#define FRAME_SEQ 0  // step + 1, written last: a frame is complete when it matches",
              f"#define FRAME_STEP 1", f"#define FRAME_STATS 2  // AGENT_N_STATS fields from here",
              f"#define FRAME_LOSSES {FRAME_INDEX['l_q']}  // {len(LOSS_NAMES)} losses from here",
              f"#define FRAME_N_LOSSES {len(LOSS_NAMES)}",
              f"#define FRAME_ISV_FIELDS {FRAME_INDEX[FRAME_ISV[0]]}  // {len(FRAME_ISV)} ISV slots from here",
              f"#define FRAME_EXTRAS {FRAME_INDEX['extra0']}", f"#define FRAME_N_EXTRAS {N_FRAME_EXTRAS}"]
    return header_text("FOXC_AGENT_H", "foxc.agent.layout", "foxc/agent/layout.py", lines)


HEADER = GeneratedHeader(HEADER_PATH, render_header, "foxc.agent.layout", "foxc/agent/layout.py")
header_is_current, write_header, main = HEADER.is_current, HEADER.write, HEADER.main

if __name__ == "__main__":
    sys.exit(main())
