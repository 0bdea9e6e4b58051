// Acting: sample each backtest's action from the policy, then the confidence gate,
// then the hard stop-loss, before the simulator steps.
#include "foxc/agent.h"
#include "foxc/isv_slots.h"
#include "foxc/rng.h"

// agent_act — grid ceil(B / 256), block 256; one thread per backtest b.
// Reads  policy_logits[b, 0..5), rng_state[b], position_lots[b], drawdown[b], isv.
// Writes rng_state[b] (advanced once), actions[b], log_prob[b], probs[b, 0..5), flags[b], and
//        stop_loss[b] = 1 when the stop-loss fired (the simulator logs that exit as a stop-loss).
//   probs   = (1 - 5 eps) * softmax(logits) + eps, eps = isv[EXPLORATION_FLOOR] in [0, 0.2]
//   sample  by inverse CDF in action order with u = uniform24(xorshift32(state))
//   gate    an entry (LONG, SHORT) whose probability is below isv[GATE_THRESHOLD] becomes HOLD;
//           exits are never gated
//   stop    when holding and drawdown / max(isv[MEAN_ABS_PNL_EMA], 1e-6) > isv[STOP_LOSS_THRESHOLD],
//           the action becomes FLAT_FROM_LONG / FLAT_FROM_SHORT, overriding everything
//   log_prob is log probs[executed action].
extern "C" __global__ void agent_act(
    const float* __restrict__ policy_logits,
    unsigned int* __restrict__ rng_state,
    const int* __restrict__ position_lots,
    const float* __restrict__ drawdown,
    const float* __restrict__ isv,
    int* __restrict__ actions,
    float* __restrict__ log_prob,
    float* __restrict__ probs,
    unsigned int* __restrict__ flags,
    unsigned int* __restrict__ stop_loss,
    int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;

    float p[AGENT_N_ACTIONS];
    float m = policy_logits[b * AGENT_N_ACTIONS];
    for (int a = 1; a < AGENT_N_ACTIONS; ++a) m = fmaxf(m, policy_logits[b * AGENT_N_ACTIONS + a]);
    float sum = 0.0f;
    for (int a = 0; a < AGENT_N_ACTIONS; ++a) {
        p[a] = expf(policy_logits[b * AGENT_N_ACTIONS + a] - m);
        sum += p[a];
    }
    const float eps = fminf(fmaxf(isv[ISV_EXPLORATION_FLOOR], 0.0f), 0.2f);
    const float keep = 1.0f - AGENT_N_ACTIONS * eps;
    for (int a = 0; a < AGENT_N_ACTIONS; ++a) {
        p[a] = keep * (p[a] / sum) + eps;
        probs[b * AGENT_N_ACTIONS + a] = p[a];
    }

    const unsigned int state = xorshift32(rng_state[b]);
    rng_state[b] = state;
    const float u = uniform24(state);
    int action = AGENT_N_ACTIONS - 1;
    float cdf = 0.0f;
    for (int a = 0; a < AGENT_N_ACTIONS; ++a) {
        cdf += p[a];
        if (u < cdf) { action = a; break; }
    }

    unsigned int flag = 0;
    if ((action == ACTION_LONG || action == ACTION_SHORT) && p[action] < isv[ISV_GATE_THRESHOLD]) {
        action = ACTION_HOLD;
        flag |= AGENT_FLAG_GATED;
    }
    const int lots = position_lots[b];
    if (lots != 0) {
        const float scale = fmaxf(isv[ISV_MEAN_ABS_PNL_EMA], 1e-6f);
        if (drawdown[b] / scale > isv[ISV_STOP_LOSS_THRESHOLD]) {
            action = lots > 0 ? ACTION_FLAT_FROM_LONG : ACTION_FLAT_FROM_SHORT;
            flag |= AGENT_FLAG_STOPPED;
        }
    }
    actions[b] = action;
    log_prob[b] = logf(p[action]);
    flags[b] = flag;
    stop_loss[b] = (flag & AGENT_FLAG_STOPPED) ? 1u : 0u;
}
