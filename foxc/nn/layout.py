"""Shapes and codes shared by the learning kernels (cuda/nn/*.cu) and foxc/nn/*.py.

cuda/include/foxc/nn.h is generated from this module (`python -m foxc.nn.layout --write`, also run
by tools/build_cubins.py); the device helpers that use it are in cuda/include/foxc/nn_math.cuh.
"""
from __future__ import annotations

import sys

from ..cgen import GeneratedHeader, defines
from ..data.features import HORIZONS
from ..lobsim.layout import FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, N_ACTIONS, ORDERS, SHORT

Q_INVALID = -1e30  # the Q value given to an action that changes nothing in a state (never chosen)
# The agent's state: the encoder's h, then these features of the backtest's own position, written
# by agent_state each step (cuda/agent/state.cu). The RL heads read the whole row; the replay
# stores it as the transition's state, so Q, V and pi tell flat from long.
POSITION_FEATURES = (
    ("side", "sign of the position: -1 short, 0 flat, +1 long"),
    ("unrealized", "tanh(unrealized PnL per lot, in ticks, at the current mid / UNREALIZED_SCALE_TICKS); 0 flat"),
    ("time_in_trade", "tanh(steps the position has been held / TIME_SCALE_STEPS); 0 flat"),
    ("spread", "the current snapshot's spread in ticks, at most SPREAD_CAP_TICKS"),
)
N_POSITION_FEATURES = len(POSITION_FEATURES)
POS_INDEX = {name: i for i, (name, _) in enumerate(POSITION_FEATURES)}
# With resting orders (--orders passive) the state goes on with these, per side (bid, then ask), written by
# agent_state_quotes from the simulator's order state and the snapshot about to be acted on.
QUOTE_FEATURES = (
    ("live", "1 an order rests on the side, 0.5 it is sent and not yet at the exchange, 0 none"),
    ("queue", "the lots in front of it / the size displayed at its price, at most 1; 0 none"),
    ("behind", "ticks between its price and the side's touch, at most SPREAD_CAP_TICKS; 0 none"),
    ("age", "tanh(steps since it was posted / TIME_SCALE_STEPS); 0 none"),
)
N_QUOTE_FEATURES = 2 * len(QUOTE_FEATURES)
QUOTE_INDEX = {f"{side}_{name}": N_POSITION_FEATURES + s * len(QUOTE_FEATURES) + i
               for s, side in enumerate(("bid", "ask")) for i, (name, _) in enumerate(QUOTE_FEATURES)}


def n_actions(orders: str) -> int:
    """The agent's action count for --orders market (5) or passive (9)."""
    return ORDERS[orders]


def n_state_features(orders: str) -> int:
    """The features after h in the agent's state: the position's, and with resting orders the quotes'."""
    return N_POSITION_FEATURES + (N_QUOTE_FEATURES if orders == "passive" else 0)
# The learner's losses, in the order the diagnostics frame holds them (foxc.agent.layout).
LOSS_NAMES = ("l_q", "l_pi", "l_v", "l_bce")


def valid_actions(side, n_actions: int = N_ACTIONS):
    """bool [..., n_actions]: which actions change something for a position of sign `side` (numpy, any shape).

    HOLD always; LONG and SHORT unless already on that side (LONG while short reverses); each
    exit only from its own side. The others are no-ops the simulator would take as HOLD, so the
    agent neither acts on nor bootstraps from them: three choices in every state. The quote actions
    (n_actions 9) are always valid."""
    import numpy as np
    side = np.asarray(side)[..., None]
    a = np.arange(n_actions)
    return ((a == HOLD) | ((a == LONG) & (side <= 0)) | ((a == SHORT) & (side >= 0))
            | ((a == FLAT_FROM_LONG) & (side > 0)) | ((a == FLAT_FROM_SHORT) & (side < 0)) | (a >= N_ACTIONS))


SSM_PARTS = 4  # input projection columns per channel: value, decay, input gate, output gate
C51_ATOMS = 51
N_PERCEPTION = 3 * HORIZONS  # up/down, long wins, short wins at each label horizon
ACT_IDENTITY, ACT_RELU, ACT_TANH, ACT_SIGMOID = range(4)  # activation codes of linear_fwd_* and act_bwd
ADAMW_MAX_TENSORS = 32  # adamw_all's table capacity
# reduce_grad_splits' table: a row of int64 fields per split dW + db pass (matmul.GradPartials)
GRAD_SPLIT_FIELDS = ("begin", "size", "splits", "partials", "n_main", "out", "tail")
GRAD_SPLITS_MAX = 16  # the table's capacity (rows held in shared memory)
# linear_fwd_*_group's table: a row of int64 fields per layer (addresses, then the shape and activation)
LINEAR_GROUP_FIELDS = ("Y", "X", "W", "bias", "M", "K", "N", "act")
# matmul_tn_ones_f32_t32_group's table: a row per dW + db pass; z_begin: the pass's first block z
TN_GROUP_FIELDS = ("C", "A", "B", "R", "M", "N", "r_chunk", "z_begin")
# ssm_proj_scan_fwd's tiling: a lane per channel, PS_WINDOWS_PER_THREAD windows per thread.
PS_CHANNELS, PS_WINDOWS_PER_THREAD, PS_WARPS, PS_MAX_FEATURES = 32, 2, 8, 48
PS_STEPS = 4  # ssm_proj_scan_fwd: steps whose projections are computed together (each W_in load feeds 4x)
PS_MIN_BLOCKS = 2  # __launch_bounds__ minimum resident blocks per SM of both scan kernels
PS_F_UNROLL = 4  # unrolling of ssm_proj_scan_fwd's loop over features
PS_WINDOWS = PS_WINDOWS_PER_THREAD * PS_WARPS  # windows per block
PS_THREADS = 32 * PS_WARPS


def header_lines() -> list[str]:
    return defines([
        ("NN_SSM_PARTS", SSM_PARTS, "input projection columns per channel: value, decay, input gate, output gate"),
        ("NN_N_ACTIONS", N_ACTIONS, "HOLD, LONG, SHORT, FLAT_FROM_LONG, FLAT_FROM_SHORT"),
        ("NN_N_PASSIVE_ACTIONS", ORDERS["passive"], "and QUOTE_BID, QUOTE_ASK, QUOTE_BOTH, QUOTE_NONE"),
        ("NN_C51_ATOMS", C51_ATOMS, ""),
        ("NN_N_PERCEPTION", N_PERCEPTION, "up/down, long wins, short wins at each label horizon"),
        ("NN_ACT_IDENTITY", ACT_IDENTITY, "activation codes of linear_fwd_* and act_bwd"),
        ("NN_ACT_RELU", ACT_RELU, ""),
        ("NN_ACT_TANH", ACT_TANH, ""),
        ("NN_ACT_SIGMOID", ACT_SIGMOID, ""),
        ("NN_ADAMW_MAX_TENSORS", ADAMW_MAX_TENSORS, "adamw_all's table capacity"),
        ("NN_GRAD_SPLITS_MAX", GRAD_SPLITS_MAX, "reduce_grad_splits' table capacity (rows)"),
        ("NN_GS_FIELDS", len(GRAD_SPLIT_FIELDS), "int64 fields of a row of reduce_grad_splits' table"),
        *[(f"NN_GS_{name.upper()}", i, "") for i, name in enumerate(GRAD_SPLIT_FIELDS)],
        ("NN_LG_FIELDS", len(LINEAR_GROUP_FIELDS), "int64 fields of a row of linear_fwd_*_group's table"),
        *[(f"NN_LG_{name.upper()}", i, "") for i, name in enumerate(LINEAR_GROUP_FIELDS)],
        ("NN_TG_FIELDS", len(TN_GROUP_FIELDS), "int64 fields of a row of matmul_tn_ones_f32_t32_group's table"),
        *[(f"NN_TG_{name.upper()}", i, "") for i, name in enumerate(TN_GROUP_FIELDS)],
        ("NN_PS_CHANNELS", PS_CHANNELS, "ssm_proj_scan_fwd: channels per block, one per lane"),
        ("NN_PS_WINDOWS_PER_THREAD", PS_WINDOWS_PER_THREAD, "windows per thread"),
        ("NN_PS_WARPS", PS_WARPS, "warps per block"),
        ("NN_PS_MAX_FEATURES", PS_MAX_FEATURES, "W_in rows held in shared memory"),
        ("NN_PS_MIN_BLOCKS", PS_MIN_BLOCKS, "minimum resident blocks per SM (launch bounds)"),
        ("NN_PS_F_UNROLL", PS_F_UNROLL, "unrolling of the forward's loop over features"),
        ("NN_PS_STEPS", PS_STEPS, "the forward's steps per chunk (projections computed together)"),
    ])


HEADER = GeneratedHeader.of("nn.h", header_lines, "foxc.nn.layout")

if __name__ == "__main__":
    sys.exit(HEADER.main())
