// Controllers: single-thread kernels that adapt ISV slots from the step's statistics and losses.
// Each runs as grid 1, block 1, so its read-modify-writes of the ISV need no synchronisation.
#include "foxc/agent.h"
#include "foxc/isv_slots.h"

__device__ __forceinline__ float ema(float prev, float obs, float rate)
{
    return prev == 0.0f ? obs : (1.0f - rate) * prev + rate * obs;
}

__device__ __forceinline__ float isv_step(const float* isv)
{
    return isv[ISV_STEP_HI] * ISV_STEP_WRAP + isv[ISV_STEP_LO];
}

// agent_reward_controller — grid 1, block 1.
// Reads stats (this step's), isv. Writes isv: popart_mean, popart_var, reward_clip_frac_ema,
// reward_pos_ema, reward_neg_ema, reward_clamp_lo/hi, mean_abs_pnl_ema.
//   PopArt: EMA (rate popart_rate) of the batch mean and variance of the raw reward, mixing the
//     two distributions exactly: var' = (1-r) var + r var_b + r (1-r) (mean_b - mean)^2.
//   reward_pos_ema / reward_neg_ema follow the step's mean positive and mean |negative| raw
//     reward (rate loss_ema_rate; a step without any leaves its EMA alone).
//   reward_clamp_mode 0, the adaptive symmetric clamp: when more than reward_clip_target of the
//     scaled rewards clip (EMA), both bounds widen by reward_clamp_rate; below a quarter of it
//     they narrow; |bound| stays within [reward_clamp_min, reward_clamp_max].
//   reward_clamp_mode 1, the seed's asymmetric clamp: hi = reward_clamp_win, lo = -win x
//     clamp(1.1 x reward_neg_ema / reward_pos_ema, 1, 3) once both EMAs are positive.
//   mean_abs_pnl_ema: EMA (rate loss_ema_rate) of |PnL| per closed trade, when trades closed.
extern "C" __global__ void agent_reward_controller(float* __restrict__ isv, const double* __restrict__ stats)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const float r = isv[ISV_POPART_RATE];
    const float mean_b = (float)stats[STAT_REWARD_RAW_MEAN];
    const float var_b = fmaxf((float)(stats[STAT_REWARD_RAW_SQ_MEAN] - stats[STAT_REWARD_RAW_MEAN] * stats[STAT_REWARD_RAW_MEAN]), 0.0f);
    const float mean = isv[ISV_POPART_MEAN], var = isv[ISV_POPART_VAR];
    const float d = mean_b - mean;
    isv[ISV_POPART_MEAN] = (1.0f - r) * mean + r * mean_b;
    isv[ISV_POPART_VAR] = fmaxf((1.0f - r) * var + r * var_b + r * (1.0f - r) * d * d, 1e-8f);

    const float clip = (1.0f - isv[ISV_LOSS_EMA_RATE]) * isv[ISV_REWARD_CLIP_FRAC_EMA]
                     + isv[ISV_LOSS_EMA_RATE] * (float)stats[STAT_CLIPPED_FRAC];
    isv[ISV_REWARD_CLIP_FRAC_EMA] = clip;
    const float rate = isv[ISV_LOSS_EMA_RATE];
    const float pos = (float)stats[STAT_REWARD_POS_MEAN], neg = (float)stats[STAT_REWARD_NEG_MEAN];
    if (pos > 0.0f) isv[ISV_REWARD_POS_EMA] = ema(isv[ISV_REWARD_POS_EMA], pos, rate);
    if (neg > 0.0f) isv[ISV_REWARD_NEG_EMA] = ema(isv[ISV_REWARD_NEG_EMA], neg, rate);
    if (isv[ISV_REWARD_CLAMP_MODE] >= 0.5f) {  // the seed's: wins at the fixed bound, losses adaptive
        const float win = isv[ISV_REWARD_CLAMP_WIN], pos_e = isv[ISV_REWARD_POS_EMA], neg_e = isv[ISV_REWARD_NEG_EMA];
        isv[ISV_REWARD_CLAMP_HI] = win;
        if (pos_e > 0.0f && neg_e > 0.0f)
            isv[ISV_REWARD_CLAMP_LO] = -win * fmaxf(AGENT_LOSS_CLAMP_MIN,
                                                    fminf(AGENT_LOSS_CLAMP_GAIN * (neg_e / pos_e), AGENT_LOSS_CLAMP_MAX));
    } else {
        const float target = isv[ISV_REWARD_CLIP_TARGET];
        const float factor = clip > target ? 1.0f + isv[ISV_REWARD_CLAMP_RATE]
                           : clip < 0.25f * target ? 1.0f - isv[ISV_REWARD_CLAMP_RATE] : 1.0f;
        const float lo_b = isv[ISV_REWARD_CLAMP_MIN], hi_b = isv[ISV_REWARD_CLAMP_MAX];
        isv[ISV_REWARD_CLAMP_HI] = fminf(fmaxf(isv[ISV_REWARD_CLAMP_HI] * factor, lo_b), hi_b);
        isv[ISV_REWARD_CLAMP_LO] = -fminf(fmaxf(-isv[ISV_REWARD_CLAMP_LO] * factor, lo_b), hi_b);
    }

    const double closed = stats[STAT_CLOSED_TRADES];
    if (closed > 0.0) {
        const float per_trade = (float)(stats[STAT_CLOSED_ABS_PNL_SUM] / closed);
        isv[ISV_MEAN_ABS_PNL_EMA] = (1.0f - isv[ISV_LOSS_EMA_RATE]) * isv[ISV_MEAN_ABS_PNL_EMA]
                                  + isv[ISV_LOSS_EMA_RATE] * per_trade;
    }
}

// One head of the plateau controller: loss EMA, best, patience, decay.
__device__ void plateau_head(float* isv, float loss, int lr_slot, int lr_slot2, int ema_slot,
                             int best_slot, int count_slot, bool warming_up)
{
    if (!isfinite(loss)) return;  // a NaN loss must not poison the controller
    const float e = ema(isv[ema_slot], loss, isv[ISV_LOSS_EMA_RATE]);
    isv[ema_slot] = e;
    if (warming_up || isv[best_slot] == 0.0f || e < isv[best_slot] * isv[ISV_LR_PLATEAU_IMPROVEMENT]) {
        isv[best_slot] = e;
        isv[count_slot] = 0.0f;
        return;
    }
    const float count = isv[count_slot] + 1.0f;
    if (count < isv[ISV_LR_PLATEAU_PATIENCE]) {
        isv[count_slot] = count;
        return;
    }
    const float decay = isv[ISV_LR_DECAY_FACTOR], floor = isv[ISV_LR_MIN];
    isv[lr_slot] = fmaxf(floor, isv[lr_slot] * decay);
    if (lr_slot2 >= 0) isv[lr_slot2] = fmaxf(floor, isv[lr_slot2] * decay);
    isv[best_slot] = e;  // measure the next plateau from here
    isv[count_slot] = 0.0f;
}

// agent_lr_plateau — grid 1, block 1.
// Reads losses[0..4) = (C51, policy, value, perception BCE) of this step from mapped-pinned
// memory written by the loss kernels earlier in the same stream; reads and writes isv.
// A head's learning rate decays by lr_decay_factor (floor lr_min) after lr_plateau_patience
// steps in which its loss EMA did not fall below best x lr_plateau_improvement. The encoder's
// rate follows the perception head's (the perception losses are what train it most).
extern "C" __global__ void agent_lr_plateau(float* __restrict__ isv, const float* __restrict__ losses)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const bool warming_up = isv_step(isv) < isv[ISV_LR_WARMUP_STEPS];
    plateau_head(isv, losses[0], ISV_LR_Q, -1, ISV_LOSS_EMA_Q, ISV_BEST_LOSS_Q, ISV_PLATEAU_COUNT_Q, warming_up);
    plateau_head(isv, losses[1], ISV_LR_POLICY, -1, ISV_LOSS_EMA_PI, ISV_BEST_LOSS_PI, ISV_PLATEAU_COUNT_PI, warming_up);
    plateau_head(isv, losses[2], ISV_LR_VALUE, -1, ISV_LOSS_EMA_V, ISV_BEST_LOSS_V, ISV_PLATEAU_COUNT_V, warming_up);
    plateau_head(isv, losses[3], ISV_LR_PERCEPTION, ISV_LR_ENCODER, ISV_LOSS_EMA_BCE, ISV_BEST_LOSS_BCE,
                 ISV_PLATEAU_COUNT_BCE, warming_up);
}

// agent_fused_controllers — grid 1, block 1. Reads stats and isv; writes isv.
//   per_beta rises linearly to 1 at per_beta_anneal_steps: beta += (1 - beta) / steps_left.
//   action_entropy_ema follows the behaviour distribution's entropy (rate loss_ema_rate).
//   With gate_enabled: hold_frac_ema follows the HOLD fraction (rate 0.1) and gate_threshold moves
//     by gate_lambda x (gate_hold_target - hold_frac_ema), within [0.05, 0.95]: holding less than
//     the target raises the bar for entries, holding more lowers it.
//   gamma, tau and per_alpha are held inside their valid ranges, so a bad setting cannot
//     poison training.
extern "C" __global__ void agent_fused_controllers(float* __restrict__ isv, const double* __restrict__ stats)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const float steps_left = fmaxf(isv[ISV_PER_BETA_ANNEAL_STEPS] - isv_step(isv), 1.0f);
    const float beta = isv[ISV_PER_BETA];
    isv[ISV_PER_BETA] = fminf(beta + (1.0f - beta) / steps_left, 1.0f);

    const float h = ema(isv[ISV_ACTION_ENTROPY_EMA], (float)stats[STAT_ENTROPY_MEAN], isv[ISV_LOSS_EMA_RATE]);
    isv[ISV_ACTION_ENTROPY_EMA] = h;

    if (isv[ISV_GATE_ENABLED] >= 0.5f) {  // the seed's gate: steer its threshold towards the HOLD target
        const float hold = (1.0f - AGENT_GATE_HOLD_EMA_RATE) * isv[ISV_HOLD_FRAC_EMA]
                         + AGENT_GATE_HOLD_EMA_RATE * (float)stats[STAT_HOLD_FRAC];
        isv[ISV_HOLD_FRAC_EMA] = hold;
        const float thr = isv[ISV_GATE_THRESHOLD] + isv[ISV_GATE_LAMBDA] * (isv[ISV_GATE_HOLD_TARGET] - hold);
        isv[ISV_GATE_THRESHOLD] = fminf(fmaxf(thr, AGENT_GATE_THRESHOLD_MIN), AGENT_GATE_THRESHOLD_MAX);
    }

    isv[ISV_GAMMA] = fminf(fmaxf(isv[ISV_GAMMA], 0.0f), 0.9999f);
    isv[ISV_TAU] = fminf(fmaxf(isv[ISV_TAU], 0.0f), 1.0f);
    isv[ISV_PER_ALPHA] = fminf(fmaxf(isv[ISV_PER_ALPHA], 0.0f), 1.0f);
}
