// The per-step statistics every controller and the diagnostics frame read.
#include "foxc/agent.h"

// agent_step_stats — grid 1, block AGENT_STATS_BLOCK (256).
// Reads  probs[B, 5] (the behaviour distribution; its entropy counts p > 0 only), actions[B], flags[B], reward_raw[B], reward_scaled[B], clipped[B],
//        closed[B] (trades closed this step by backtest b), closed_pnl[B] (their summed PnL),
//        lots[B] (the position each backtest acted from).
// Writes stats[AGENT_N_STATS] (float64).
// Deterministic: thread t sums b = t, t + 256, ... in order, then a fixed shared-memory tree;
// no atomics, so the same inputs give the same bits on every run.
#define N_SUMS 17
extern "C" __global__ void agent_step_stats(
    const float* __restrict__ probs,
    const int* __restrict__ actions,
    const unsigned int* __restrict__ flags,
    const float* __restrict__ reward_raw,
    const float* __restrict__ reward_scaled,
    const unsigned int* __restrict__ clipped,
    const unsigned int* __restrict__ closed,
    const float* __restrict__ closed_pnl,
    const int* __restrict__ lots,
    double* __restrict__ stats,
    int B)
{
    __shared__ double sums[N_SUMS][AGENT_STATS_BLOCK];
    const int t = threadIdx.x;
    double acc[N_SUMS];
    for (int k = 0; k < N_SUMS; ++k) acc[k] = 0.0;
    for (int b = t; b < B; b += AGENT_STATS_BLOCK) {
        float h = 0.0f;
        for (int a = 0; a < AGENT_N_ACTIONS; ++a) {
            const float p = probs[b * AGENT_N_ACTIONS + a];
            if (p > 0.0f) h -= p * logf(p);  // invalid actions have probability 0
        }
        const int action = actions[b];
        const unsigned int flag = flags[b];
        const double raw = reward_raw[b];
        const unsigned int n_closed = closed[b];
        const double pnl = closed_pnl[b];
        acc[0] += h;
        acc[1] += action == ACTION_HOLD ? 1.0 : 0.0;
        acc[2] += (flag & AGENT_FLAG_GATED) ? 1.0 : 0.0;
        acc[3] += (flag & AGENT_FLAG_STOPPED) ? 1.0 : 0.0;
        acc[4] += raw;
        acc[5] += raw * raw;
        acc[6] += reward_scaled[b];
        acc[7] += clipped[b] ? 1.0 : 0.0;
        acc[8] += n_closed;
        acc[9] += n_closed ? fabs(pnl) : 0.0;
        acc[10] += (n_closed && pnl > 0.0) ? 1.0 : 0.0;
        acc[11] += n_closed ? pnl : 0.0;
        acc[12] += lots[b] != 0 ? 1.0 : 0.0;
        acc[13] += raw > 0.0 ? raw : 0.0;
        acc[14] += raw > 0.0 ? 1.0 : 0.0;
        acc[15] += raw < 0.0 ? -raw : 0.0;
        acc[16] += raw < 0.0 ? 1.0 : 0.0;
    }
    for (int k = 0; k < N_SUMS; ++k) sums[k][t] = acc[k];
    __syncthreads();
    for (int stride = AGENT_STATS_BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            for (int k = 0; k < N_SUMS; ++k) sums[k][t] += sums[k][t + stride];
        __syncthreads();
    }
    if (t != 0) return;
    const double n = B > 0 ? (double)B : 1.0;
    stats[STAT_N] = (double)B;
    stats[STAT_ENTROPY_MEAN] = sums[0][0] / n;
    stats[STAT_HOLD_FRAC] = sums[1][0] / n;
    stats[STAT_GATED_FRAC] = sums[2][0] / n;
    stats[STAT_STOPPED_FRAC] = sums[3][0] / n;
    stats[STAT_REWARD_RAW_MEAN] = sums[4][0] / n;
    stats[STAT_REWARD_RAW_SQ_MEAN] = sums[5][0] / n;
    stats[STAT_REWARD_SCALED_MEAN] = sums[6][0] / n;
    stats[STAT_CLIPPED_FRAC] = sums[7][0] / n;
    stats[STAT_CLOSED_TRADES] = sums[8][0];
    stats[STAT_CLOSED_ABS_PNL_SUM] = sums[9][0];
    stats[STAT_CLOSED_WINS] = sums[10][0];
    stats[STAT_CLOSED_PNL_SUM] = sums[11][0];
    stats[STAT_IN_MARKET_FRAC] = sums[12][0] / n;
    stats[STAT_REWARD_POS_MEAN] = sums[14][0] > 0.0 ? sums[13][0] / sums[14][0] : 0.0;
    stats[STAT_REWARD_NEG_MEAN] = sums[16][0] > 0.0 ? sums[15][0] / sums[16][0] : 0.0;
}
