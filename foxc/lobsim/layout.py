"""The simulator's records: the position record and the trade-log entry, shared by numpy and CUDA.

Defined once here as numpy structured dtypes; cuda/include/foxc/lobsim.h is
generated from them (`python -m foxc.lobsim.layout --write`, also run by
tools/build_cubins.py) with static_asserts on every offset, so nvcc refuses to
build against a layout that disagrees.

Money is int64 in price units × lots: a fill of q lots at price p (int64, ×1e9)
moves cash by exactly q·p. Integer money keeps every conservation law exact and
every result independent of summation order; it overflows only past 9.2e9 of
notional (in the instrument's price currency per lot), far beyond a backtest.
"""
from __future__ import annotations

import sys

import numpy as np

from ..cgen import HOST_CHECKABLE, GeneratedHeader, c_struct, defines
from ..data.record import LEVELS

# Actions: what the policy asks for; the simulator turns each into a target position.
ACTION_NAMES = ("HOLD", "LONG", "SHORT", "FLAT_FROM_LONG", "FLAT_FROM_SHORT")
N_ACTIONS = len(ACTION_NAMES)
HOLD, LONG, SHORT, FLAT_FROM_LONG, FLAT_FROM_SHORT = range(N_ACTIONS)
# What the simulator makes of a snapshot (snapshot_verdict in lobsim_book.cuh).
BOOK_OK, BOOK_UNREASONABLE, BOOK_CROSSED = range(3)
# Why a trade closed (FoxcTrade.reason).
REASON_SIGNAL, REASON_STOP_LOSS, REASON_EPISODE_END, REASON_PASSIVE = range(4)
REASON_NAMES = ("signal", "stop_loss", "episode_end", "passive")  # passive: a resting order's fill
# A quote, per side, each step (--orders passive): keep what rests (or nothing), cancel it, or join the book k
# ticks behind the side's touch (code QUOTE_JOIN + k): an order already resting at that price keeps its place in
# the queue; one resting at another price is cancelled (the side posts again once the cancel has taken effect).
QUOTE_KEEP, QUOTE_CANCEL, QUOTE_JOIN = 0, 1, 2
QUOTE_NAMES = ("KEEP", "CANCEL", "JOIN")
# The agent's actions with resting orders (--orders passive): the five market actions, which leave the quotes as
# they are, then four that keep the position and set both sides' quotes at once (bid code, ask code): rest a bid at
# the touch and no ask, an ask and no bid, both, or neither. JOIN keeps an order already at the touch in its place.
QUOTE_ACTION_NAMES = ("QUOTE_BID", "QUOTE_ASK", "QUOTE_BOTH", "QUOTE_NONE")
QUOTE_ACTION_CODES = ((QUOTE_JOIN, QUOTE_CANCEL), (QUOTE_CANCEL, QUOTE_JOIN), (QUOTE_JOIN, QUOTE_JOIN),
                      (QUOTE_CANCEL, QUOTE_CANCEL))
N_PASSIVE_ACTIONS = N_ACTIONS + len(QUOTE_ACTION_NAMES)
QUOTE_BID, QUOTE_ASK, QUOTE_BOTH, QUOTE_NONE = range(N_ACTIONS, N_PASSIVE_ACTIONS)
ORDERS = {"market": N_ACTIONS, "passive": N_PASSIVE_ACTIONS}  # --orders: the agent's action count


def action_names(n_actions: int) -> tuple[str, ...]:
    assert n_actions in ORDERS.values(), n_actions
    return (ACTION_NAMES + QUOTE_ACTION_NAMES)[:n_actions]


def split_actions(actions) -> tuple[np.ndarray, np.ndarray]:
    """An agent's actions (0..8) as the simulator takes them: market actions int32 [B] (HOLD for a quote action)
    and quotes int32 [2, B] (KEEP on both sides for a market action); quote_codes in agent.h is the same table."""
    a = np.asarray(actions, np.int32)
    quoting = a >= N_ACTIONS
    codes = np.asarray(((QUOTE_KEEP, QUOTE_KEEP),) + QUOTE_ACTION_CODES, np.int32)
    quotes = codes[np.where(quoting, a - N_ACTIONS + 1, 0)].T.copy()
    return np.where(quoting, HOLD, a).astype(np.int32), quotes
# A resting order's life (the passive state's q_state), the kernel's queue models, and q_cancel without a cancel
QUEUE_NONE, QUEUE_SENT, QUEUE_LIVE = range(3)
KERNEL_QUEUE_MODELS = ("risk_averse", "power")  # (log's device libm differs from numpy's: the reference's only)
NO_CANCEL = int(np.iinfo(np.int64).max)

POSITION_FIELDS = [
    # hot: read or written by pnl_track every step (kept in the first 64 bytes)
    ("cash", np.int64, "money: −Σ signed fills × price − fees, since the simulator's reset"),
    ("cost", np.int64, "signed cost basis of the open lots: Σ signed lots × price (0 when flat)"),
    ("equity", np.int64, "cash + lots × mid at the last mark (net of every fee paid)"),
    ("peak_equity", np.int64, "highest equity of the current episode"),
    ("unrealized_pnl", np.int64, "lots × mid − cost at the last mark"),
    ("trail_hwm", np.int64, "trailing high-water mark: best unrealized PnL of the open trade (0 at entry)"),
    ("lots", np.int32, "signed position in lots: > 0 long, < 0 short"),
    ("closed_pending", np.uint32, "1 when submit_market closed a trade that pnl_track has not logged yet"),
    ("trades", np.uint32, "closed trades logged (the trade-log ring's head)"),
    ("wins", np.uint32, "closed trades with positive PnL net of fees"),
    # touched when an order fills
    ("realized_pnl", np.int64, "gross PnL realized by reducing fills since the reset (fees not included)"),
    ("fees_paid", np.int64, "fees paid since the reset (negative where maker rebates exceed them)"),
    ("vwap_px", np.int64, "volume-weighted entry price of the open lots, cost / lots truncated; 0 when flat"),
    ("entry_ts", np.int64, "ts_ns of the open trade's first fill"),
    ("open_notional", np.int64, "open trade: Σ lots × price of its opening fills"),
    ("close_notional", np.int64, "open trade: Σ lots × price of its closing fills"),
    ("trade_fees", np.int64, "open trade: fees of its fills"),
    ("pnl_sum", np.int64, "Σ PnL net of fees of the closed trades"),
    ("episode_equity0", np.int64, "equity when the current episode began"),
    ("last_episode_pnl", np.int64, "equity change over the last finished episode"),
    ("open_lots", np.int32, "open trade: lots bought (long) or sold (short) to open or add"),
    ("close_lots", np.int32, "open trade: lots of its reducing fills"),
    ("unfilled_lots", np.uint32, "lots of targets the displayed book could not fill (counted, not carried)"),
    ("forced_lots", np.uint32, "lots closed beyond the displayed size at an episode end, at the worst level's price"),
    ("episodes", np.uint32, "episodes finished"),
    ("invalid_actions", np.uint32, "actions outside 0..4, taken as HOLD"),
    ("last_reason", np.uint32, "reason of the last order that filled (REASON_*)"),
    ("reserved", np.uint32, "padding to a multiple of 16 bytes"),
]

TRADE_FIELDS = [
    ("open_ts", np.int64, "ts_ns of the first opening fill"),
    ("close_ts", np.int64, "ts_ns of the fill that made the position flat"),
    ("entry_px", np.int64, "VWAP of the opening fills (price × 1e9, truncated)"),
    ("exit_px", np.int64, "VWAP of the closing fills (price × 1e9, truncated)"),
    ("pnl", np.int64, "PnL of the round trip net of its fees (money units)"),
    ("fees", np.int64, "fees of the trade's fills"),
    ("side", np.int32, "+1 long, −1 short"),
    ("lots", np.int32, "lots opened over the trade's life"),
    ("reason", np.uint32, "REASON_SIGNAL, REASON_STOP_LOSS, REASON_EPISODE_END or REASON_PASSIVE (its last fill's)"),
    ("pad", np.uint32, "padding to 64 bytes"),
]

POSITION_DTYPE = np.dtype([(name, dt) for name, dt, _ in POSITION_FIELDS], align=True)
TRADE_DTYPE = np.dtype([(name, dt) for name, dt, _ in TRADE_FIELDS], align=True)


def header_lines() -> list[str]:
    body = [*HOST_CHECKABLE, f"#define FOXC_LOBSIM_LEVELS {LEVELS}"]
    body += [f"#define FOXC_ACTION_{name} {i}" for i, name in enumerate(ACTION_NAMES)]
    body += [f"#define FOXC_REASON_{name.upper()} {i}" for i, name in enumerate(REASON_NAMES)]
    body += [f"#define FOXC_QUEUE_{name} {i}" for i, name in enumerate(("NONE", "SENT", "LIVE"))]
    body += [f"#define FOXC_QUOTE_{name} {i}" for i, name in enumerate(QUOTE_NAMES)]
    body += [f"#define FOXC_QUEUE_{name.upper()} {i}" for i, name in enumerate(KERNEL_QUEUE_MODELS)]
    body += [f"#define FOXC_NO_CANCEL {NO_CANCEL:#X}LL  // q_cancel of an order no cancel was sent for"]
    body += defines([("FOXC_BOOK_OK", BOOK_OK, "a usable snapshot"),
                     ("FOXC_BOOK_UNREASONABLE", BOOK_UNREASONABLE,
                      "an empty best level, or a price outside [min_px, max_px]"),
                     ("FOXC_BOOK_CROSSED", BOOK_CROSSED, "best bid >= best ask")])
    body += ["", *c_struct("FoxcPosition", POSITION_FIELDS, POSITION_DTYPE,
                           "One backtest's position, accounts and outcome statistics; numpy's POSITION_DTYPE.", 16),
             "", *c_struct("FoxcTrade", TRADE_FIELDS, TRADE_DTYPE,
                           "One closed trade in the log ring; numpy's TRADE_DTYPE.", 16)]
    return body


HEADER = GeneratedHeader.of("lobsim.h", header_lines, "foxc.lobsim.layout")
HEADER_PATH = HEADER.path
header_is_current, write_header, main = HEADER.is_current, HEADER.write, HEADER.main

if __name__ == "__main__":
    sys.exit(main())
