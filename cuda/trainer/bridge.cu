// The trainer's bridges: per-backtest glue between the dataset, the simulator, the agent and the
// learner, so each component keeps its own layout.
#include "foxc/data.h"
#include "foxc/lobsim.h"
#include "foxc/position.h"

#define PERCEPTION_LOGITS (3 * FOXC_HORIZONS)  // up/down, long wins, short wins at each horizon

// bridge_before_act — grid ceil(B / 256), block 256; one thread per backtest b, after the gather.
// Reads  labels_out[7][B][3] (the label planes gathered at the cursor).
// Writes the perception targets labels[b][9] and mask[b][9]: mid up (weight: mid_weight), long wins
//        and short wins (weight: outcome_weight) per horizon.
extern "C" __global__ void bridge_before_act(
    const float* __restrict__ labels_out, float* __restrict__ labels, float* __restrict__ mask, int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    for (int h = 0; h < FOXC_HORIZONS; ++h) {
        const float mid_w = labels_out[(5 * B + b) * FOXC_HORIZONS + h];
        const float out_w = labels_out[(6 * B + b) * FOXC_HORIZONS + h];
        for (int src = 0; src < 3; ++src) {
            labels[b * PERCEPTION_LOGITS + src * FOXC_HORIZONS + h] = labels_out[(src * B + b) * FOXC_HORIZONS + h];
            mask[b * PERCEPTION_LOGITS + src * FOXC_HORIZONS + h] = src == 0 ? mid_w : out_w;
        }
    }
}

// bridge_after_sim — grid ceil(B / 256), block 256; one thread per backtest b, after pnl_track.
// Reads  pos[b], trade_log[b][trade_cap], prev_trades[b] (trades logged before this step).
// Writes closed[b] = trades closed this step, closed_pnl[b] = their net PnL * money_scale,
//        prev_trades[b] = trades logged now, drawdown[b] = the open trade's drawdown after the step.
extern "C" __global__ void bridge_after_sim(
    const FoxcPosition* __restrict__ pos, const FoxcTrade* __restrict__ trade_log,
    unsigned int* __restrict__ prev_trades, unsigned int* __restrict__ closed, float* __restrict__ closed_pnl,
    float* __restrict__ drawdown, float money_scale, int trade_cap, int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
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
