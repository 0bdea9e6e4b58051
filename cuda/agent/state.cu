// The agent's state: the encoder's h followed by the backtest's own position, what the RL heads
// read and the replay stores, so Q, V and pi can tell flat from long.
#include "foxc/agent.h"
#include "foxc/data.h"
#include "foxc/lobsim.h"
#include "foxc/position.h"
#include "foxc/snapshot.h"

// agent_state's parameters and, as arguments, their names (its template body and both kernels).
#define AGENT_STATE_PARAMS                                                                                     \
    const float* __restrict__ h, const FoxcPosition* __restrict__ pos, const float* __restrict__ features,      \
    int* __restrict__ trade_steps, int* __restrict__ prev_lots, float* __restrict__ state,                     \
    int* __restrict__ lots, float* __restrict__ drawdown, long long tick, float money_scale, int D, int K, int B
#define AGENT_STATE_ARGS                                                                                       \
    h, pos, features, trade_steps, prev_lots, state, lots, drawdown, tick, money_scale, D, K, B

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
// The row of backtest b with the position features written (thread 0 of the block), else nullptr.
template <int W> __device__ __forceinline__ float* agent_state_body(AGENT_STATE_PARAMS)
{
    const int b = blockIdx.x;
    if (b >= B) return nullptr;
    const int width = D + W;
    float* row = state + (long long)b * width;
    for (int k = threadIdx.x; k < D; k += blockDim.x) row[k] = h[(long long)b * D + k];
    if (threadIdx.x != 0) return nullptr;
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
    return row;
}

extern "C" __global__ void __launch_bounds__(AGENT_STATE_BLOCK) agent_state(AGENT_STATE_PARAMS)
{
    agent_state_body<AGENT_N_POSITION_FEATURES>(AGENT_STATE_ARGS);
}

// agent_state_quotes — as agent_state for the agent with resting orders: state[B, D + 12], the position's
// features, then per side (bid, ask; s = 0, 1) at D + 4 + 4 s + QPOS_*, from the simulator's order state
// [2, B] (q_px, q_state, q_front, q_since: what the last step left) and the snapshot about to be acted on,
// snaps[cursor[b]]:
//   live    1 LIVE, 0.5 SENT, 0 none
//   queue   min(front / max(displayed size at q_px, 1), 1) for a live order (1 when only sent), 0 none
//   behind  (touch - q_px) / tick for the bid, (q_px - touch) / tick for the ask, in [0, SPREAD_CAP_TICKS]
//           (0 without a touch or an order)
//   age     tanh(steps / TIME_SCALE_STEPS): quote_steps[s, b] counts the steps an order posted at q_since
//           has been seen (1 the first time; a new post restarts it), 0 with none; quote_since keeps q_since
extern "C" __global__ void __launch_bounds__(AGENT_STATE_BLOCK) agent_state_quotes(
    AGENT_STATE_PARAMS,
    const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor, const long long* __restrict__ q_px,
    const unsigned int* __restrict__ q_state, const double* __restrict__ q_front,
    const long long* __restrict__ q_since, long long* __restrict__ quote_since, int* __restrict__ quote_steps)
{
    float* row = agent_state_body<AGENT_N_POSITION_FEATURES + AGENT_N_QUOTE_FEATURES>(AGENT_STATE_ARGS);
    if (row == nullptr) return;
    const int b = blockIdx.x;
    const FoxcSnapshot* s = snaps + cursor[b];
    for (int side = 0; side < 2; ++side) {
        const long long i = (long long)side * B + b;
        float* f = row + D + AGENT_N_POSITION_FEATURES + side * QPOS_PER_SIDE;
        const unsigned int st = q_state[i];
        if (st == FOXC_QUEUE_NONE) {
            quote_steps[i] = 0;
            quote_since[i] = 0;
            f[QPOS_LIVE] = f[QPOS_QUEUE] = f[QPOS_BEHIND] = f[QPOS_AGE] = 0.0f;
            continue;
        }
        const int steps = quote_steps[i] > 0 && quote_since[i] == q_since[i] ? quote_steps[i] + 1 : 1;
        quote_steps[i] = steps;
        quote_since[i] = q_since[i];
        const long long px = q_px[i];
        const long long* prices = side == 0 ? s->bid_px : s->ask_px;
        const unsigned int* sizes = side == 0 ? s->bid_sz : s->ask_sz;
        unsigned int shown = 0;
        for (int l = 0; l < FOXC_LEVELS; ++l)
            if (prices[l] == px) shown = sizes[l];
        const long long touch = prices[0];
        const double gap = touch == FOXC_PRICE_UNDEF ? 0.0
                                                     : (double)(side == 0 ? touch - px : px - touch) / (double)tick;
        f[QPOS_LIVE] = st == FOXC_QUEUE_LIVE ? 1.0f : 0.5f;
        f[QPOS_QUEUE] = st == FOXC_QUEUE_LIVE ? fminf((float)(q_front[i] / fmax((double)shown, 1.0)), 1.0f) : 1.0f;
        f[QPOS_BEHIND] = fminf(fmaxf((float)gap, 0.0f), AGENT_SPREAD_CAP_TICKS);
        f[QPOS_AGE] = tanhf((float)steps / AGENT_TIME_SCALE_STEPS);
    }
}
