// Rewards: the equity change, a drawdown penalty, PopArt scaling and the adaptive clamp (called by the
// trainer's backtest_step, cuda/trainer/bridge.cu, after the simulator's step and the closed-trade bridge).
#ifndef FOXC_AGENT_REWARD_CUH
#define FOXC_AGENT_REWARD_CUH

#include "foxc/isv_slots.h"

// agent_reward — backtest b.
// Reads  pnl_delta[b] (equity change this step, net of fees: realized PnL of a close plus the
//        mark-to-market change of what is held), drawdown[b] (peak equity - equity, >= 0), isv.
// Writes reward_raw[b], reward_scaled[b], clipped[b].
//   raw    = reward_scale * pnl_delta - drawdown_penalty_rate * drawdown / max(mean_abs_pnl_ema, 1e-6)
//            (the penalty term is never positive)
//   scaled = clamp(raw / sqrt(popart_var + 1e-8), reward_clamp_lo, reward_clamp_hi)
//   PopArt only scales: subtracting the mean would change which policy is optimal.
// __noinline__: it compiles as it would alone, so the caller's arithmetic never contracts into it (the
// product reward_scale * pnl_delta and the penalty's subtraction are one FMA on the device). pnl_delta and
// drawdown are written earlier in the caller's launch, so they are not read through __restrict__ pointers.
__device__ __noinline__ void agent_reward(
    int b, const float* pnl_delta, const float* drawdown, const float* __restrict__ isv,
    float* reward_raw, float* reward_scaled, unsigned int* clipped)
{
    const float penalty = isv[ISV_DRAWDOWN_PENALTY_RATE] * fmaxf(drawdown[b], 0.0f)
                        / fmaxf(isv[ISV_MEAN_ABS_PNL_EMA], 1e-6f);
    const float raw = isv[ISV_REWARD_SCALE] * pnl_delta[b] - fmaxf(penalty, 0.0f);
    const float scaled = raw / sqrtf(isv[ISV_POPART_VAR] + 1e-8f);
    const float lo = isv[ISV_REWARD_CLAMP_LO], hi = isv[ISV_REWARD_CLAMP_HI];
    reward_raw[b] = raw;
    reward_scaled[b] = fminf(fmaxf(scaled, lo), hi);
    clipped[b] = (scaled < lo || scaled > hi) ? 1u : 0u;
}

#endif  // FOXC_AGENT_REWARD_CUH
