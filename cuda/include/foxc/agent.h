// Generated from foxc/agent/layout.py by `python -m foxc.agent.layout --write`. Do not edit.
#ifndef FOXC_AGENT_H
#define FOXC_AGENT_H

#define AGENT_N_ACTIONS 5
#define ACTION_HOLD 0
#define ACTION_LONG 1
#define ACTION_SHORT 2
#define ACTION_FLAT_FROM_LONG 3
#define ACTION_FLAT_FROM_SHORT 4
#define AGENT_FLAG_GATED 1
#define AGENT_FLAG_STOPPED 2
#define AGENT_STATS_BLOCK 256
#define AGENT_STATE_BLOCK 128
#define AGENT_ACTOR_Q 0
#define AGENT_ACTOR_POLICY 1
#define AGENT_Q_INVALID -1e+30f

#define AGENT_N_POSITION_FEATURES 4
#define POS_SIDE 0  // sign of the position: -1 short, 0 flat, +1 long
#define POS_UNREALIZED 1  // tanh(unrealized PnL per lot, in ticks, at the current mid / UNREALIZED_SCALE_TICKS); 0 flat
#define POS_TIME_IN_TRADE 2  // tanh(steps the position has been held / TIME_SCALE_STEPS); 0 flat
#define POS_SPREAD 3  // the current snapshot's spread in ticks, at most SPREAD_CAP_TICKS
#define AGENT_UNREALIZED_SCALE_TICKS 4.0f
#define AGENT_TIME_SCALE_STEPS 64.0f
#define AGENT_SPREAD_CAP_TICKS 8.0f
#define AGENT_GATE_THRESHOLD_MIN 0.05f
#define AGENT_GATE_THRESHOLD_MAX 0.95f
#define AGENT_GATE_HOLD_EMA_RATE 0.1f
#define AGENT_LOSS_CLAMP_GAIN 1.1f
#define AGENT_LOSS_CLAMP_MIN 1.0f
#define AGENT_LOSS_CLAMP_MAX 3.0f

// Whether action a changes anything for a position of sign `side` (valid_actions in layout.py).
__device__ __forceinline__ bool agent_action_valid(int a, int side)
{
    return a == ACTION_HOLD || (a == ACTION_LONG && side <= 0) || (a == ACTION_SHORT && side >= 0)
        || (a == ACTION_FLAT_FROM_LONG && side > 0) || (a == ACTION_FLAT_FROM_SHORT && side < 0);
}

// With resting orders (--orders passive): four quote actions after the market ones, always valid.
#define AGENT_N_PASSIVE_ACTIONS 9
#define ACTION_QUOTE_BID 5
#define ACTION_QUOTE_ASK 6
#define ACTION_QUOTE_BOTH 7
#define ACTION_QUOTE_NONE 8
#define AGENT_EXPLORE_QUOTE 16  // explore[b] of a segment repeating quote action a: + a
#define AGENT_N_QUOTE_FEATURES 8  // after the position's, per side (bid, ask):
#define QPOS_PER_SIDE 4
#define QPOS_LIVE 0  // 1 an order rests on the side, 0.5 it is sent and not yet at the exchange, 0 none
#define QPOS_QUEUE 1  // the lots in front of it / the size displayed at its price, at most 1; 0 none
#define QPOS_BEHIND 2  // ticks between its price and the side's touch, at most SPREAD_CAP_TICKS; 0 none
#define QPOS_AGE 3  // tanh(steps since it was posted / TIME_SCALE_STEPS); 0 none

// Whether action a of an agent of A actions changes anything for a position of sign `side`.
template <int A> __device__ __forceinline__ bool agent_valid(int a, int side)
{
    return (A > AGENT_N_ACTIONS && a >= AGENT_N_ACTIONS) || agent_action_valid(a, side);
}

// The quote codes (FOXC_QUOTE_*) for the bid and the ask of agent action a (split_actions in
// foxc/lobsim/layout.py): KEEP on both sides for a market action.
__device__ __forceinline__ void agent_quote_codes(int a, int* bid, int* ask)
{
    *bid = 0;
    *ask = 0;
    if (a == ACTION_QUOTE_BID) { *bid = 2; *ask = 1; }
    if (a == ACTION_QUOTE_ASK) { *bid = 1; *ask = 2; }
    if (a == ACTION_QUOTE_BOTH) { *bid = 2; *ask = 2; }
    if (a == ACTION_QUOTE_NONE) { *bid = 1; *ask = 1; }
}

#define AGENT_N_STATS 16
#define STAT_N 0  // backtests reduced (B)
#define STAT_ENTROPY_MEAN 1  // mean entropy of the sampling distribution, nats
#define STAT_HOLD_FRAC 2  // fraction of backtests whose executed action is HOLD (keeps the position, flat or not)
#define STAT_GATED_FRAC 3  // fraction of entries turned into HOLD by the confidence gate
#define STAT_STOPPED_FRAC 4  // fraction of backtests forced flat by the stop-loss
#define STAT_REWARD_RAW_MEAN 5  // mean raw reward
#define STAT_REWARD_RAW_SQ_MEAN 6  // mean squared raw reward
#define STAT_REWARD_SCALED_MEAN 7  // mean reward after PopArt scaling and the clamp
#define STAT_CLIPPED_FRAC 8  // fraction of scaled rewards that hit a clamp bound
#define STAT_CLOSED_TRADES 9  // trades closed this step
#define STAT_CLOSED_ABS_PNL_SUM 10  // sum of |PnL| of the trades closed this step
#define STAT_CLOSED_WINS 11  // closed trades with positive PnL this step
#define STAT_CLOSED_PNL_SUM 12  // sum of PnL of the trades closed this step
#define STAT_IN_MARKET_FRAC 13  // fraction of backtests holding a position when they act (time in the market)
#define STAT_REWARD_POS_MEAN 14  // mean of the positive raw rewards (0 when none)
#define STAT_REWARD_NEG_MEAN 15  // mean magnitude of the negative raw rewards (0 when none)

#define FRAME_LEN 43  // float64 fields per diagnostics frame
#define FRAME_SEQ 0  // step + 1, written last: a frame is complete when it matches
#define FRAME_STEP 1
#define FRAME_STATS 2  // AGENT_N_STATS fields from here
#define FRAME_LOSSES 18  // 4 losses from here
#define FRAME_N_LOSSES 4
#define FRAME_ISV_FIELDS 22  // 12 ISV slots from here
#define FRAME_EXTRAS 34
#define FRAME_N_EXTRAS 8
#define FRAME_T_NS 42  // the device clock (ns) when the frame was written

#endif  // FOXC_AGENT_H
