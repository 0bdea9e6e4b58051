// The agent's state: the encoder's h followed by the backtest's own position, what the RL heads
// read and the replay stores, so Q, V and pi can tell flat from long.
#include "foxc/agent.h"
#include "foxc/data.h"
#include "foxc/lobsim.h"
#include "foxc/position.h"

// agent_state — grid (B), block AGENT_STATE_BLOCK; block b builds backtest b's row of state[B, D + 4].
// Reads  h[B, D] (encoder output), pos[b] (the simulator's position after the previous step, marked
//        to the mid of the snapshot about to be acted on), features[K, B, F] (the newest snapshot's
//        spread in ticks), trade_steps[b] and prev_lots[b].
// Writes lots[b] (the position acted from), drawdown[b] (the open trade's fall from its best
//        unrealized PnL, price units per lot: what the stop-loss reads), state[b, 0..D) = h[b];
//        state[b, D + POS_*]:
//          side           sign(lots)
//          unrealized     tanh(unrealized PnL / (|lots| tick) / AGENT_UNREALIZED_SCALE_TICKS), 0 flat
//          time_in_trade  tanh(trade_steps / AGENT_TIME_SCALE_STEPS)
//          spread         min(spread in ticks, AGENT_SPREAD_CAP_TICKS)
//        trade_steps[b] = 0 when flat, 1 on the first step on a new side, else + 1; prev_lots[b] = lots.
// Called once per step, before acting, both in training and in evaluation, so both count alike.
extern "C" __global__ void __launch_bounds__(AGENT_STATE_BLOCK) agent_state(
    const float* __restrict__ h, const FoxcPosition* __restrict__ pos, const float* __restrict__ features,
    int* __restrict__ trade_steps, int* __restrict__ prev_lots, float* __restrict__ state,
    int* __restrict__ lots, float* __restrict__ drawdown, long long tick, float money_scale, int D, int K, int B)
{
    const int b = blockIdx.x;
    if (b >= B) return;
    const int width = D + AGENT_N_POSITION_FEATURES;
    float* row = state + (long long)b * width;
    for (int k = threadIdx.x; k < D; k += blockDim.x) row[k] = h[(long long)b * D + k];
    if (threadIdx.x != 0) return;
    const FoxcPosition p = pos[b];
    const int side = p.lots > 0 ? 1 : (p.lots < 0 ? -1 : 0);
    const int before = prev_lots[b];
    const int side_before = before > 0 ? 1 : (before < 0 ? -1 : 0);
    const int steps = side == 0 ? 0 : (side == side_before ? trade_steps[b] + 1 : 1);
    trade_steps[b] = steps;
    prev_lots[b] = p.lots;
    lots[b] = p.lots;
    drawdown[b] = trade_drawdown(p, money_scale);
    const double held = (double)(p.lots < 0 ? -(long long)p.lots : (long long)p.lots);
    const float unrealized = side == 0 ? 0.0f : (float)((double)p.unrealized_pnl / (held * (double)tick));
    const float spread = features[((long long)(K - 1) * B + b) * FOXC_FEATURES + FOXC_F_SPREAD];
    row[D + POS_SIDE] = (float)side;
    row[D + POS_UNREALIZED] = tanhf(unrealized / AGENT_UNREALIZED_SCALE_TICKS);
    row[D + POS_TIME_IN_TRADE] = tanhf((float)steps / AGENT_TIME_SCALE_STEPS);
    row[D + POS_SPREAD] = fminf(spread, AGENT_SPREAD_CAP_TICKS);
}
