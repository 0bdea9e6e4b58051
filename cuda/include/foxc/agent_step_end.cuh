// The parts of agent_step_end (cuda/agent/step_end.cu) and agent_step_end_quotes (step_end_quotes.cu), a kernel
// per module: two kernels in one module calling the same __noinline__ parts compile them differently.
// The end of a training step in one launch: the step's statistics, the controllers that adapt the
// ISV from them and from the losses, the diagnostics frame, the step counter and the ISV published
// to the host. Each part is microseconds of work for one block (most of it for one thread), less
// than a launch costs, so one block does them all, in that order. The parts are __noinline__
// functions so that each compiles as it would alone (no contraction of one part's products into
// the next part's sums): the same inputs give the same bits however the parts are grouped.
//
// Nothing written here is read through a __restrict__ pointer later in the kernel: a const
// __restrict__ pointer may be read through the non-coherent cache, which need not see this
// kernel's own writes (the statistics, the ISV).
#ifndef FOXC_AGENT_STEP_END_CUH
#define FOXC_AGENT_STEP_END_CUH
#include "foxc/agent.h"
#include "foxc/isv_slots.h"

// The per-step statistics, as every thread of the block calls it (blockDim.x == AGENT_STATS_BLOCK).
// Reads  probs[B, 5] (the behaviour distribution; its entropy counts p > 0 only), actions[B], flags[B], reward_raw[B], reward_scaled[B], clipped[B],
//        closed[B] (trades closed this step by backtest b), closed_pnl[B] (their summed PnL),
//        lots[B] (the position each backtest acted from).
// Writes stats[AGENT_N_STATS] (float64; thread 0).
// Deterministic: thread t sums b = t, t + 256, ... in order, then a fixed shared-memory tree;
// no atomics, so the same inputs give the same bits on every run.
constexpr int N_SUMS = 17;
// The step's per-backtest arrays, as step_stats and agent_step_end take them.
#define STEP_ARRAYS                                                                                            \
    const float* __restrict__ probs, const int* __restrict__ actions, const unsigned int* __restrict__ flags,   \
    const float* __restrict__ reward_raw, const float* __restrict__ reward_scaled,                             \
    const unsigned int* __restrict__ clipped, const unsigned int* __restrict__ closed,                         \
    const float* __restrict__ closed_pnl, const int* __restrict__ lots
// agent_step_end's parameters and, as arguments, their names (its template body and both kernels).
#define STEP_END_PARAMS                                                                                        \
    STEP_ARRAYS, int B, const float* __restrict__ losses, double* stats, float* isv,                           \
    float* __restrict__ isv_host, const double* __restrict__ extras, const int* __restrict__ isv_slots,        \
    int n_isv, double* __restrict__ ring, int ring_len
#define STEP_END_ARGS                                                                                          \
    probs, actions, flags, reward_raw, reward_scaled, clipped, closed, closed_pnl, lots, B, losses, stats, isv, \
    isv_host, extras, isv_slots, n_isv, ring, ring_len
constexpr int STATS_AHEAD = 4;  // rows of a thread whose inputs are loaded before any of them is added
template <int A> __device__ __noinline__ void step_stats(STEP_ARRAYS, double* stats, int B)
{
    __shared__ double sums[N_SUMS][AGENT_STATS_BLOCK];
    const int t = threadIdx.x;
    double acc[N_SUMS];
    for (int k = 0; k < N_SUMS; ++k) acc[k] = 0.0;
    // STATS_AHEAD rows at a time: their loads are in flight together (one memory latency, not one a
    // row), then they are added in the order b = t, t + 256, ... as before.
    for (int b0 = t; b0 < B; b0 += AGENT_STATS_BLOCK * STATS_AHEAD) {
        float p[STATS_AHEAD][A], raw_f[STATS_AHEAD], scaled[STATS_AHEAD], pnl_f[STATS_AHEAD];
        int action[STATS_AHEAD], lot[STATS_AHEAD];
        unsigned int flag[STATS_AHEAD], clip[STATS_AHEAD], n_closed[STATS_AHEAD];
#pragma unroll
        for (int u = 0; u < STATS_AHEAD; ++u) {
            const int b = b0 + u * AGENT_STATS_BLOCK;
            if (b < B) {
                for (int a = 0; a < A; ++a) p[u][a] = probs[b * A + a];
                action[u] = actions[b];
                flag[u] = flags[b];
                raw_f[u] = reward_raw[b];
                scaled[u] = reward_scaled[b];
                clip[u] = clipped[b];
                n_closed[u] = closed[b];
                pnl_f[u] = closed_pnl[b];
                lot[u] = lots[b];
            }
        }
#pragma unroll
        for (int u = 0; u < STATS_AHEAD; ++u) {
            if (b0 + u * AGENT_STATS_BLOCK >= B) break;
            float h = 0.0f;
            for (int a = 0; a < A; ++a) {
                const float pa = p[u][a];
                if (pa > 0.0f) h -= pa * logf(pa);  // invalid actions have probability 0
            }
            const double raw = raw_f[u];
            const double pnl = pnl_f[u];
            acc[0] += h;
            acc[1] += action[u] == ACTION_HOLD ? 1.0 : 0.0;
            acc[2] += (flag[u] & AGENT_FLAG_GATED) ? 1.0 : 0.0;
            acc[3] += (flag[u] & AGENT_FLAG_STOPPED) ? 1.0 : 0.0;
            acc[4] += raw;
            acc[5] += raw * raw;
            acc[6] += scaled[u];
            acc[7] += clip[u] ? 1.0 : 0.0;
            acc[8] += n_closed[u];
            acc[9] += n_closed[u] ? fabs(pnl) : 0.0;
            acc[10] += (n_closed[u] && pnl > 0.0) ? 1.0 : 0.0;
            acc[11] += n_closed[u] ? pnl : 0.0;
            acc[12] += lot[u] != 0 ? 1.0 : 0.0;
            acc[13] += raw > 0.0 ? raw : 0.0;
            acc[14] += raw > 0.0 ? 1.0 : 0.0;
            acc[15] += raw < 0.0 ? -raw : 0.0;
            acc[16] += raw < 0.0 ? 1.0 : 0.0;
        }
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

// The controllers: single-thread read-modify-writes of ISV slots (thread 0 runs them in turn).

__device__ __forceinline__ float ema(float prev, float obs, float rate)
{
    return prev == 0.0f ? obs : (1.0f - rate) * prev + rate * obs;
}

__device__ __forceinline__ float isv_step(const float* isv)
{
    return isv[ISV_STEP_HI] * ISV_STEP_WRAP + isv[ISV_STEP_LO];
}

// The reward controller. Reads stats (this step's), isv. Writes isv: popart_mean, popart_var,
// reward_clip_frac_ema, reward_pos_ema, reward_neg_ema, reward_clamp_lo/hi, mean_abs_pnl_ema.
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
__device__ __noinline__ void reward_controller(float* isv, const double* stats)
{
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

// The learning-rate plateau controller. Reads losses[0..4) = (C51, policy, value, perception BCE)
// of this step (the learner's loss means); reads and writes isv.
// A head's learning rate decays by lr_decay_factor (floor lr_min) after lr_plateau_patience
// steps in which its loss EMA did not fall below best x lr_plateau_improvement. The encoder's
// rate follows the perception head's (the perception losses are what train it most).
__device__ __noinline__ void lr_plateau(float* isv, const float* losses)
{
    const bool warming_up = isv_step(isv) < isv[ISV_LR_WARMUP_STEPS];
    plateau_head(isv, losses[0], ISV_LR_Q, -1, ISV_LOSS_EMA_Q, ISV_BEST_LOSS_Q, ISV_PLATEAU_COUNT_Q, warming_up);
    plateau_head(isv, losses[1], ISV_LR_POLICY, -1, ISV_LOSS_EMA_PI, ISV_BEST_LOSS_PI, ISV_PLATEAU_COUNT_PI, warming_up);
    plateau_head(isv, losses[2], ISV_LR_VALUE, -1, ISV_LOSS_EMA_V, ISV_BEST_LOSS_V, ISV_PLATEAU_COUNT_V, warming_up);
    plateau_head(isv, losses[3], ISV_LR_PERCEPTION, ISV_LR_ENCODER, ISV_LOSS_EMA_BCE, ISV_BEST_LOSS_BCE,
                 ISV_PLATEAU_COUNT_BCE, warming_up);
}

// The other controllers. Reads stats and isv; writes isv.
//   per_beta rises linearly to 1 at per_beta_anneal_steps: beta += (1 - beta) / steps_left.
//   action_entropy_ema follows the behaviour distribution's entropy (rate loss_ema_rate).
//   With gate_enabled: hold_frac_ema follows the HOLD fraction (rate 0.1) and gate_threshold moves
//     by gate_lambda x (gate_hold_target - hold_frac_ema), within [0.05, 0.95]: holding less than
//     the target raises the bar for entries, holding more lowers it.
//   gamma, tau and per_alpha are held inside their valid ranges, so a bad setting cannot
//     poison training.
__device__ __noinline__ void other_controllers(float* isv, const double* stats)
{
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

// The diagnostics frame: one fixed-layout record per step in a mapped-pinned ring the host reads
// without synchronising the step. Every thread of the block writes a share of the fields (one thread
// waited a load's latency for each ISV slot index and extra, and the frame was most of the kernel).
// Reads stats[AGENT_N_STATS], losses[FRAME_N_LOSSES], isv (shared: the block's copy), extras[FRAME_N_EXTRAS]
// (float64 counters of other components), isv_slots[n_isv] (indices of the ISV slots to record, FRAME_ISV
// order). Writes frame = ring + (step % ring_len) * FRAME_LEN: every field but FRAME_SEQ, FRAME_T_NS = the
// device's global timer (ns; consecutive frames are one step apart in device time), then a system-wide
// fence; the caller writes FRAME_SEQ = step + 1 after a barrier, so a host that sees the sequence number
// also sees the fields.
__device__ __forceinline__ double frame_step(const float* isv)
{
    return (double)isv[ISV_STEP_HI] * (double)ISV_STEP_WRAP + (double)isv[ISV_STEP_LO];
}
__device__ __forceinline__ double* frame_of(const float* isv, double* ring, int ring_len)
{
    return ring + (long long)fmod(frame_step(isv), (double)ring_len) * FRAME_LEN;
}
__device__ __forceinline__ void diagnostics_frame(
    const double* stats, const float* losses, const float* isv, const double* __restrict__ extras,
    const int* __restrict__ isv_slots, int n_isv, double* __restrict__ ring, int ring_len)
{
    double* frame = frame_of(isv, ring, ring_len);
    const int t = threadIdx.x;
    if (t == 0) {
        frame[FRAME_STEP] = frame_step(isv);
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        frame[FRAME_T_NS] = (double)now;
    }
    if (t < AGENT_N_STATS) frame[FRAME_STATS + t] = stats[t];
    else if (t < AGENT_N_STATS + FRAME_N_LOSSES) frame[FRAME_LOSSES + t - AGENT_N_STATS] = losses[t - AGENT_N_STATS];
    else if (t < AGENT_N_STATS + FRAME_N_LOSSES + FRAME_N_EXTRAS)
        frame[FRAME_EXTRAS + t - AGENT_N_STATS - FRAME_N_LOSSES] = extras[t - AGENT_N_STATS - FRAME_N_LOSSES];
    const int k = t - (AGENT_N_STATS + FRAME_N_LOSSES + FRAME_N_EXTRAS);
    if (k >= 0 && k < n_isv && k < FRAME_EXTRAS - FRAME_ISV_FIELDS) frame[FRAME_ISV_FIELDS + k] = isv[isv_slots[k]];
    __threadfence_system();
}

// The device-resident step counter: step_lo += 1. float32 holds integers exactly only to 2^24,
// so step_lo wraps there and carries into step_hi.
__device__ __forceinline__ void step_increment(float* isv)
{
    const float next = isv[ISV_STEP_LO] + 1.0f;
    if (next >= ISV_STEP_WRAP) {
        isv[ISV_STEP_LO] = 0.0f;
        isv[ISV_STEP_HI] += 1.0f;
    } else {
        isv[ISV_STEP_LO] = next;
    }
}

// agent_step_end — grid 1, block AGENT_STATS_BLOCK (256); the step's last launch.
// Reads  the step's per-backtest arrays (as step_stats above; B of each), losses[4] (the learner's
//        loss means: C51, policy, value, perception BCE), isv (the device-resident working copy),
//        extras, isv_slots (as diagnostics_frame).
// Writes stats[AGENT_N_STATS]; isv (controllers, then the step counter); ring (the frame of this
//        step, recorded before the counter moves); isv_host[ISV_N_SLOTS] (the mapped-pinned view the
//        host reads) = isv as the step leaves it.
// Order: the block copies the ISV and the losses into shared memory; the statistics (every thread, into
// shared memory); then on thread 0 the reward controller, the plateau controller and the other
// controllers, on the shared copies (thread 0's reads and writes are a dependent chain: shared memory's
// latency, not global memory's, is what they wait for); after a barrier the frame (every thread a share);
// after another, on thread 0, the frame's sequence number and the step counter; then, after a barrier,
// every thread writes its share of the ISV to isv and isv_host and of the statistics to stats. The
// arithmetic is the same whichever memory holds the values and whichever thread copies them.
template <int A> __device__ __forceinline__ void agent_step_end_body(STEP_END_PARAMS)
{
    __shared__ float isv_s[ISV_N_SLOTS];
    __shared__ float losses_s[FRAME_N_LOSSES];
    __shared__ double stats_s[AGENT_N_STATS];
    static_assert(AGENT_N_STATS + FRAME_N_LOSSES + FRAME_N_EXTRAS + (FRAME_EXTRAS - FRAME_ISV_FIELDS) <= AGENT_STATS_BLOCK,
                  "the frame: a field a thread");
    if (blockIdx.x != 0) return;
    for (int i = threadIdx.x; i < ISV_N_SLOTS; i += AGENT_STATS_BLOCK) isv_s[i] = isv[i];
    if (threadIdx.x < FRAME_N_LOSSES) losses_s[threadIdx.x] = losses[threadIdx.x];
    step_stats<A>(probs, actions, flags, reward_raw, reward_scaled, clipped, closed, closed_pnl, lots, stats_s, B);
    if (threadIdx.x == 0) {  // step_stats' barriers made isv_s and losses_s whole; its thread 0 wrote stats_s
        reward_controller(isv_s, stats_s);
        lr_plateau(isv_s, losses_s);
        other_controllers(isv_s, stats_s);
    }
    __syncthreads();
    diagnostics_frame(stats_s, losses_s, isv_s, extras, isv_slots, n_isv, ring, ring_len);
    __syncthreads();  // every thread's fields are fenced before the sequence number
    if (threadIdx.x == 0) {
        frame_of(isv_s, ring, ring_len)[FRAME_SEQ] = frame_step(isv_s) + 1.0;
        step_increment(isv_s);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < ISV_N_SLOTS; i += AGENT_STATS_BLOCK) {
        isv[i] = isv_s[i];
        isv_host[i] = isv_s[i];
    }
    for (int i = threadIdx.x; i < AGENT_N_STATS; i += AGENT_STATS_BLOCK) stats[i] = stats_s[i];
}

#endif  // FOXC_AGENT_STEP_END_CUH
