// Rewards: the equity change, a drawdown penalty, PopArt scaling and the adaptive clamp.
#include "foxc/isv_slots.h"

// agent_reward — grid ceil(B / 256), block 256; one thread per backtest b.
// Reads  pnl_delta[b] (equity change this step, net of fees: realized PnL of a close plus the
//        mark-to-market change of what is held), drawdown[b] (peak equity - equity, >= 0), isv.
// Writes reward_raw[b], reward_scaled[b], clipped[b].
//   raw    = reward_scale * pnl_delta - drawdown_penalty_rate * drawdown / max(mean_abs_pnl_ema, 1e-6)
//            (the penalty term is never positive)
//   scaled = clamp(raw / sqrt(popart_var + 1e-8), reward_clamp_lo, reward_clamp_hi)
//   PopArt only scales: subtracting the mean would change which policy is optimal.
extern "C" __global__ void agent_reward(
    const float* __restrict__ pnl_delta,
    const float* __restrict__ drawdown,
    const float* __restrict__ isv,
    float* __restrict__ reward_raw,
    float* __restrict__ reward_scaled,
    unsigned int* __restrict__ clipped,
    int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float penalty = isv[ISV_DRAWDOWN_PENALTY_RATE] * fmaxf(drawdown[b], 0.0f)
                        / fmaxf(isv[ISV_MEAN_ABS_PNL_EMA], 1e-6f);
    const float raw = isv[ISV_REWARD_SCALE] * pnl_delta[b] - fmaxf(penalty, 0.0f);
    const float scaled = raw / sqrtf(isv[ISV_POPART_VAR] + 1e-8f);
    const float lo = isv[ISV_REWARD_CLAMP_LO], hi = isv[ISV_REWARD_CLAMP_HI];
    reward_raw[b] = raw;
    reward_scaled[b] = fminf(fmaxf(scaled, lo), hi);
    clipped[b] = (scaled < lo || scaled > hi) ? 1u : 0u;
}
