// The trainer's per-backtest glue after the simulator's step (closed trades, the perception targets), shared by
// backtest_step (cuda/trainer/bridge.cu) and backtest_step_passive (bridge_passive.cu).
#ifndef FOXC_BRIDGE_CUH
#define FOXC_BRIDGE_CUH
#include "foxc/agent_reward.cuh"
#include "foxc/data.h"
#include "foxc/lobsim.h"
#include "foxc/position.h"
#include "foxc/snapshot.h"

// The trainer's parameters of backtest_step and backtest_step_passive, after the simulator's.
#define BACKTEST_TRAINER_PARAMS                                                                                \
    unsigned int* __restrict__ prev_trades, unsigned int* __restrict__ closed, float* __restrict__ closed_pnl,  \
    float* __restrict__ drawdown, float money_scale, const float* __restrict__ isv,                            \
    float* __restrict__ reward_raw, float* __restrict__ reward_scaled, unsigned int* __restrict__ clipped,      \
    const float* __restrict__ labels_out, float* __restrict__ labels, float* __restrict__ mask

constexpr int PERCEPTION_LOGITS = 3 * FOXC_HORIZONS;  // up/down, long wins, short wins at each horizon

// closed_trades — backtest b, after pnl_track.
// Reads  pos[b], trade_log[b][trade_cap], prev_trades[b] (trades logged before this step).
// Writes closed[b] = trades closed this step, closed_pnl[b] = their net PnL * money_scale,
//        prev_trades[b] = trades logged now, drawdown[b] = the open trade's drawdown after the step.
__device__ __noinline__ void closed_trades(
    int b, const FoxcPosition* pos, const FoxcTrade* trade_log, unsigned int* prev_trades, unsigned int* closed,
    float* closed_pnl, float* drawdown, float money_scale, int trade_cap)
{
    const FoxcPosition p = pos[b];
    const unsigned int now = p.trades, before = prev_trades[b];
    const unsigned int n = now - before;
    long long pnl = 0;
    const unsigned int kept = n < (unsigned int)trade_cap ? n : (unsigned int)trade_cap;
    for (unsigned int k = 0; k < kept; ++k)
        pnl += trade_log[(long long)b * trade_cap + (now - 1u - k) % (unsigned int)trade_cap].pnl;
    closed[b] = n;
    closed_pnl[b] = (float)((double)pnl * (double)money_scale);
    prev_trades[b] = now;
    drawdown[b] = trade_drawdown(p, money_scale);
}

// perception_targets — backtest b of B.
// Reads  labels_out[7][B][3] (the label planes the gather took at the cursor).
// Writes the perception targets labels[b][9] and mask[b][9]: mid up (weight: mid_weight), long wins
//        and short wins (weight: outcome_weight) per horizon.
__device__ __noinline__ void perception_targets(
    int b, const float* __restrict__ labels_out, float* labels, float* mask, int B)
{
    for (int h = 0; h < FOXC_HORIZONS; ++h) {
        const float mid_w = labels_out[(5 * B + b) * FOXC_HORIZONS + h];
        const float out_w = labels_out[(6 * B + b) * FOXC_HORIZONS + h];
        for (int src = 0; src < 3; ++src) {
            labels[b * PERCEPTION_LOGITS + src * FOXC_HORIZONS + h] = labels_out[(src * B + b) * FOXC_HORIZONS + h];
            mask[b * PERCEPTION_LOGITS + src * FOXC_HORIZONS + h] = src == 0 ? mid_w : out_w;
        }
    }
}

#endif  // FOXC_BRIDGE_CUH
