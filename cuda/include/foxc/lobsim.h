// Generated from foxc/lobsim/layout.py by `python -m foxc.lobsim.layout --write`. Do not edit.
#ifndef FOXC_LOBSIM_H
#define FOXC_LOBSIM_H

#include <cstddef>
#ifndef __CUDACC__
#define __align__(n) alignas(n)  // lets a host compiler check the layout too
#endif

#define FOXC_LOBSIM_LEVELS 10
#define FOXC_ACTION_HOLD 0
#define FOXC_ACTION_LONG 1
#define FOXC_ACTION_SHORT 2
#define FOXC_ACTION_FLAT_FROM_LONG 3
#define FOXC_ACTION_FLAT_FROM_SHORT 4
#define FOXC_REASON_SIGNAL 0
#define FOXC_REASON_STOP_LOSS 1
#define FOXC_REASON_EPISODE_END 2
#define FOXC_REASON_PASSIVE 3
#define FOXC_QUEUE_NONE 0
#define FOXC_QUEUE_SENT 1
#define FOXC_QUEUE_LIVE 2
#define FOXC_QUOTE_KEEP 0
#define FOXC_QUOTE_CANCEL 1
#define FOXC_QUOTE_JOIN 2
#define FOXC_QUEUE_RISK_AVERSE 0
#define FOXC_QUEUE_POWER 1
#define FOXC_NO_CANCEL 0X7FFFFFFFFFFFFFFFLL  // q_cancel of an order no cancel was sent for
#define FOXC_BOOK_OK           0           // a usable snapshot
#define FOXC_BOOK_UNREASONABLE 1           // an empty best level, or a price outside [min_px, max_px]
#define FOXC_BOOK_CROSSED      2           // best bid >= best ask

// One backtest's position, accounts and outcome statistics; numpy's POSITION_DTYPE.
struct __align__(16) FoxcPosition {
    long long cash;  // money: −Σ signed fills × price − fees, since the simulator's reset
    long long cost;  // signed cost basis of the open lots: Σ signed lots × price (0 when flat)
    long long equity;  // cash + lots × mid at the last mark (net of every fee paid)
    long long peak_equity;  // highest equity of the current episode
    long long unrealized_pnl;  // lots × mid − cost at the last mark
    long long trail_hwm;  // trailing high-water mark: best unrealized PnL of the open trade (0 at entry)
    int lots;  // signed position in lots: > 0 long, < 0 short
    unsigned int closed_pending;  // 1 when submit_market closed a trade that pnl_track has not logged yet
    unsigned int trades;  // closed trades logged (the trade-log ring's head)
    unsigned int wins;  // closed trades with positive PnL net of fees
    long long realized_pnl;  // gross PnL realized by reducing fills since the reset (fees not included)
    long long fees_paid;  // fees paid since the reset (negative where maker rebates exceed them)
    long long vwap_px;  // volume-weighted entry price of the open lots, cost / lots truncated; 0 when flat
    long long entry_ts;  // ts_ns of the open trade's first fill
    long long open_notional;  // open trade: Σ lots × price of its opening fills
    long long close_notional;  // open trade: Σ lots × price of its closing fills
    long long trade_fees;  // open trade: fees of its fills
    long long pnl_sum;  // Σ PnL net of fees of the closed trades
    long long episode_equity0;  // equity when the current episode began
    long long last_episode_pnl;  // equity change over the last finished episode
    int open_lots;  // open trade: lots bought (long) or sold (short) to open or add
    int close_lots;  // open trade: lots of its reducing fills
    unsigned int unfilled_lots;  // lots of targets the displayed book could not fill (counted, not carried)
    unsigned int forced_lots;  // lots closed beyond the displayed size at an episode end, at the worst level's price
    unsigned int episodes;  // episodes finished
    unsigned int invalid_actions;  // actions outside 0..4, taken as HOLD
    unsigned int last_reason;  // reason of the last order that filled (REASON_*)
    unsigned int reserved;  // padding to a multiple of 16 bytes
};
static_assert(sizeof(FoxcPosition) == 176, "FoxcPosition size");
static_assert(offsetof(FoxcPosition, cash) == 0, "FoxcPosition.cash offset");
static_assert(offsetof(FoxcPosition, cost) == 8, "FoxcPosition.cost offset");
static_assert(offsetof(FoxcPosition, equity) == 16, "FoxcPosition.equity offset");
static_assert(offsetof(FoxcPosition, peak_equity) == 24, "FoxcPosition.peak_equity offset");
static_assert(offsetof(FoxcPosition, unrealized_pnl) == 32, "FoxcPosition.unrealized_pnl offset");
static_assert(offsetof(FoxcPosition, trail_hwm) == 40, "FoxcPosition.trail_hwm offset");
static_assert(offsetof(FoxcPosition, lots) == 48, "FoxcPosition.lots offset");
static_assert(offsetof(FoxcPosition, closed_pending) == 52, "FoxcPosition.closed_pending offset");
static_assert(offsetof(FoxcPosition, trades) == 56, "FoxcPosition.trades offset");
static_assert(offsetof(FoxcPosition, wins) == 60, "FoxcPosition.wins offset");
static_assert(offsetof(FoxcPosition, realized_pnl) == 64, "FoxcPosition.realized_pnl offset");
static_assert(offsetof(FoxcPosition, fees_paid) == 72, "FoxcPosition.fees_paid offset");
static_assert(offsetof(FoxcPosition, vwap_px) == 80, "FoxcPosition.vwap_px offset");
static_assert(offsetof(FoxcPosition, entry_ts) == 88, "FoxcPosition.entry_ts offset");
static_assert(offsetof(FoxcPosition, open_notional) == 96, "FoxcPosition.open_notional offset");
static_assert(offsetof(FoxcPosition, close_notional) == 104, "FoxcPosition.close_notional offset");
static_assert(offsetof(FoxcPosition, trade_fees) == 112, "FoxcPosition.trade_fees offset");
static_assert(offsetof(FoxcPosition, pnl_sum) == 120, "FoxcPosition.pnl_sum offset");
static_assert(offsetof(FoxcPosition, episode_equity0) == 128, "FoxcPosition.episode_equity0 offset");
static_assert(offsetof(FoxcPosition, last_episode_pnl) == 136, "FoxcPosition.last_episode_pnl offset");
static_assert(offsetof(FoxcPosition, open_lots) == 144, "FoxcPosition.open_lots offset");
static_assert(offsetof(FoxcPosition, close_lots) == 148, "FoxcPosition.close_lots offset");
static_assert(offsetof(FoxcPosition, unfilled_lots) == 152, "FoxcPosition.unfilled_lots offset");
static_assert(offsetof(FoxcPosition, forced_lots) == 156, "FoxcPosition.forced_lots offset");
static_assert(offsetof(FoxcPosition, episodes) == 160, "FoxcPosition.episodes offset");
static_assert(offsetof(FoxcPosition, invalid_actions) == 164, "FoxcPosition.invalid_actions offset");
static_assert(offsetof(FoxcPosition, last_reason) == 168, "FoxcPosition.last_reason offset");
static_assert(offsetof(FoxcPosition, reserved) == 172, "FoxcPosition.reserved offset");

// One closed trade in the log ring; numpy's TRADE_DTYPE.
struct __align__(16) FoxcTrade {
    long long open_ts;  // ts_ns of the first opening fill
    long long close_ts;  // ts_ns of the fill that made the position flat
    long long entry_px;  // VWAP of the opening fills (price × 1e9, truncated)
    long long exit_px;  // VWAP of the closing fills (price × 1e9, truncated)
    long long pnl;  // PnL of the round trip net of its fees (money units)
    long long fees;  // fees of the trade's fills
    int side;  // +1 long, −1 short
    int lots;  // lots opened over the trade's life
    unsigned int reason;  // REASON_SIGNAL, REASON_STOP_LOSS, REASON_EPISODE_END or REASON_PASSIVE (its last fill's)
    unsigned int pad;  // padding to 64 bytes
};
static_assert(sizeof(FoxcTrade) == 64, "FoxcTrade size");
static_assert(offsetof(FoxcTrade, open_ts) == 0, "FoxcTrade.open_ts offset");
static_assert(offsetof(FoxcTrade, close_ts) == 8, "FoxcTrade.close_ts offset");
static_assert(offsetof(FoxcTrade, entry_px) == 16, "FoxcTrade.entry_px offset");
static_assert(offsetof(FoxcTrade, exit_px) == 24, "FoxcTrade.exit_px offset");
static_assert(offsetof(FoxcTrade, pnl) == 32, "FoxcTrade.pnl offset");
static_assert(offsetof(FoxcTrade, fees) == 40, "FoxcTrade.fees offset");
static_assert(offsetof(FoxcTrade, side) == 48, "FoxcTrade.side offset");
static_assert(offsetof(FoxcTrade, lots) == 52, "FoxcTrade.lots offset");
static_assert(offsetof(FoxcTrade, reason) == 56, "FoxcTrade.reason offset");
static_assert(offsetof(FoxcTrade, pad) == 60, "FoxcTrade.pad offset");

#endif  // FOXC_LOBSIM_H
