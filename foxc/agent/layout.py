"""Shared constants of the agent kernels, and the step-statistics vector they reduce into.

cuda/include/foxc/agent.h is generated from this module (`python -m foxc.agent.layout --write`,
also run by tools/build_cubins.py).
"""
from __future__ import annotations

import sys

from ..cgen import GeneratedHeader
from ..lobsim.layout import (ACTION_NAMES, FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, N_ACTIONS,  # noqa: F401
                             N_PASSIVE_ACTIONS, QUOTE_ACTION_CODES, QUOTE_ACTION_NAMES, SHORT)
# The learner reads these too (foxc.nn is a floor below the agent): defined there, the agent's header emits them.
from ..nn.layout import (LOSS_NAMES, N_POSITION_FEATURES, N_QUOTE_FEATURES, POS_INDEX, POSITION_FEATURES,  # noqa: F401
                         QUOTE_FEATURES, QUOTE_INDEX, Q_INVALID, n_actions, n_state_features, valid_actions)

FLAG_GATED = 1  # an entry the confidence gate turned into HOLD
FLAG_STOPPED = 2  # the stop-loss forced a flat exit
STATS_BLOCK = 256  # threads of the single-block reductions
STATE_BLOCK = 128  # threads of agent_state (one block per backtest copies its h row)

# Who acts: the C51 head (argmax of its mean, epsilon-greedy while training) or the policy head
# distilled from it (softmax over the valid actions).
ACTOR_Q, ACTOR_POLICY = 0, 1
ACTORS = {"q": ACTOR_Q, "policy": ACTOR_POLICY}

UNREALIZED_SCALE_TICKS = 4.0
# The seed's confidence gate: its threshold lives in [GATE_THRESHOLD_MIN, GATE_THRESHOLD_MAX] and
# follows an EMA (rate GATE_HOLD_EMA_RATE) of the HOLD fraction.
GATE_THRESHOLD_MIN, GATE_THRESHOLD_MAX, GATE_HOLD_EMA_RATE = 0.05, 0.95, 0.1
# The seed's asymmetric loss clamp: the loss side at LOSS_CLAMP_GAIN x mean |loss| / mean win, in
# [LOSS_CLAMP_MIN, LOSS_CLAMP_MAX] times the win side.
LOSS_CLAMP_GAIN, LOSS_CLAMP_MIN, LOSS_CLAMP_MAX = 1.1, 1.0, 3.0
TIME_SCALE_STEPS = 64.0
SPREAD_CAP_TICKS = 8.0
# explore[b] of an exploration segment that repeats quote action a: EXPLORE_QUOTE + a (a position segment's is
# 2 + the position, 1..3)
EXPLORE_QUOTE = 16


# One float64 per field, written by agent_step_stats each step.
STAT_FIELDS = [
    ("n", "backtests reduced (B)"),
    ("entropy_mean", "mean entropy of the sampling distribution, nats"),
    ("hold_frac", "fraction of backtests whose executed action is HOLD (keeps the position, flat or not)"),
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
    ("in_market_frac", "fraction of backtests holding a position when they act (time in the market)"),
    ("reward_pos_mean", "mean of the positive raw rewards (0 when none)"),
    ("reward_neg_mean", "mean magnitude of the negative raw rewards (0 when none)"),
]
N_STATS = len(STAT_FIELDS)
STAT_INDEX = {name: i for i, (name, _) in enumerate(STAT_FIELDS)}

# The diagnostics frame (float64 fields) written each step into a mapped-pinned ring:
# a header, the step statistics, the losses, chosen ISV slots, extras from other components and
# the device's clock when the frame was written (rates come from it, not from the host's clock).
FRAME_ISV = ("lr_q", "lr_policy", "lr_value", "lr_perception", "lr_encoder", "entropy_coef", "per_beta",
             "popart_mean", "popart_var", "reward_clamp_lo", "reward_clamp_hi", "mean_abs_pnl_ema")
N_FRAME_EXTRAS = 8  # slots for other components' counters (e.g. the simulator's skipped snapshots)
FRAME_FIELDS = (["seq", "step"] + [name for name, _ in STAT_FIELDS] + list(LOSS_NAMES) + list(FRAME_ISV)
                + [f"extra{i}" for i in range(N_FRAME_EXTRAS)] + ["t_ns"])
FRAME_LEN = len(FRAME_FIELDS)
FRAME_INDEX = {name: i for i, name in enumerate(FRAME_FIELDS)}


def header_lines() -> list[str]:
    lines = [f"#define AGENT_N_ACTIONS {N_ACTIONS}"]
    lines += [f"#define ACTION_{name} {i}" for i, name in enumerate(ACTION_NAMES)]
    lines += [f"#define AGENT_FLAG_GATED {FLAG_GATED}", f"#define AGENT_FLAG_STOPPED {FLAG_STOPPED}",
              f"#define AGENT_STATS_BLOCK {STATS_BLOCK}", f"#define AGENT_STATE_BLOCK {STATE_BLOCK}",
              f"#define AGENT_ACTOR_Q {ACTOR_Q}", f"#define AGENT_ACTOR_POLICY {ACTOR_POLICY}",
              f"#define AGENT_Q_INVALID {Q_INVALID:.0e}f", "",
              f"#define AGENT_N_POSITION_FEATURES {N_POSITION_FEATURES}"]
    lines += [f"#define POS_{name.upper()} {i}  // {doc}" for i, (name, doc) in enumerate(POSITION_FEATURES)]
    lines += [f"#define AGENT_UNREALIZED_SCALE_TICKS {UNREALIZED_SCALE_TICKS!r}f",
              f"#define AGENT_TIME_SCALE_STEPS {TIME_SCALE_STEPS!r}f",
              f"#define AGENT_SPREAD_CAP_TICKS {SPREAD_CAP_TICKS!r}f",
              f"#define AGENT_GATE_THRESHOLD_MIN {GATE_THRESHOLD_MIN!r}f",
              f"#define AGENT_GATE_THRESHOLD_MAX {GATE_THRESHOLD_MAX!r}f",
              f"#define AGENT_GATE_HOLD_EMA_RATE {GATE_HOLD_EMA_RATE!r}f",
              f"#define AGENT_LOSS_CLAMP_GAIN {LOSS_CLAMP_GAIN!r}f",
              f"#define AGENT_LOSS_CLAMP_MIN {LOSS_CLAMP_MIN!r}f",
              f"#define AGENT_LOSS_CLAMP_MAX {LOSS_CLAMP_MAX!r}f", "",
              "// Whether action a changes anything for a position of sign `side` (valid_actions in layout.py).",
              "__device__ __forceinline__ bool agent_action_valid(int a, int side)",
              "{",
              "    return a == ACTION_HOLD || (a == ACTION_LONG && side <= 0) || (a == ACTION_SHORT && side >= 0)",
              "        || (a == ACTION_FLAT_FROM_LONG && side > 0) || (a == ACTION_FLAT_FROM_SHORT && side < 0);",
              "}", "",
              "// With resting orders (--orders passive): four quote actions after the market ones, always valid.",
              f"#define AGENT_N_PASSIVE_ACTIONS {N_PASSIVE_ACTIONS}"]
    lines += [f"#define ACTION_{name} {N_ACTIONS + i}" for i, name in enumerate(QUOTE_ACTION_NAMES)]
    lines += [f"#define AGENT_EXPLORE_QUOTE {EXPLORE_QUOTE}  // explore[b] of a segment repeating quote action a: + a",
              f"#define AGENT_N_QUOTE_FEATURES {N_QUOTE_FEATURES}  // after the position's, per side (bid, ask):",
              f"#define QPOS_PER_SIDE {len(QUOTE_FEATURES)}"]
    lines += [f"#define QPOS_{name.upper()} {i}  // {doc}" for i, (name, doc) in enumerate(QUOTE_FEATURES)]
    lines += ["",
              "// Whether action a of an agent of A actions changes anything for a position of sign `side`.",
              "template <int A> __device__ __forceinline__ bool agent_valid(int a, int side)",
              "{",
              "    return (A > AGENT_N_ACTIONS && a >= AGENT_N_ACTIONS) || agent_action_valid(a, side);",
              "}", "",
              "// The quote codes (FOXC_QUOTE_*) for the bid and the ask of agent action a (split_actions in",
              "// foxc/lobsim/layout.py): KEEP on both sides for a market action.",
              "__device__ __forceinline__ void agent_quote_codes(int a, int* bid, int* ask)",
              "{",
              "    *bid = 0;",
              "    *ask = 0;"]
    for i, (bid, ask) in enumerate(QUOTE_ACTION_CODES):
        lines.append(f"    if (a == ACTION_{QUOTE_ACTION_NAMES[i]}) {{ *bid = {bid}; *ask = {ask}; }}")
    lines += ["}", "", f"#define AGENT_N_STATS {N_STATS}"]
    lines += [f"#define STAT_{name.upper()} {i}  // {doc}" for i, (name, doc) in enumerate(STAT_FIELDS)]
    lines += ["", f"#define FRAME_LEN {FRAME_LEN}  // float64 fields per diagnostics frame",
              "#define FRAME_SEQ 0  // step + 1, written last: a frame is complete when it matches",
              "#define FRAME_STEP 1", "#define FRAME_STATS 2  // AGENT_N_STATS fields from here",
              f"#define FRAME_LOSSES {FRAME_INDEX['l_q']}  // {len(LOSS_NAMES)} losses from here",
              f"#define FRAME_N_LOSSES {len(LOSS_NAMES)}",
              f"#define FRAME_ISV_FIELDS {FRAME_INDEX[FRAME_ISV[0]]}  // {len(FRAME_ISV)} ISV slots from here",
              f"#define FRAME_EXTRAS {FRAME_INDEX['extra0']}", f"#define FRAME_N_EXTRAS {N_FRAME_EXTRAS}",
              f"#define FRAME_T_NS {FRAME_INDEX['t_ns']}  // the device clock (ns) when the frame was written"]
    return lines


HEADER = GeneratedHeader.of("agent.h", header_lines, "foxc.agent.layout")

if __name__ == "__main__":
    sys.exit(HEADER.main())
