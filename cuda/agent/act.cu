// Acting: each backtest's action from the C51 head's means (or the distilled policy), the
// exploration schedule, the confidence gate and the hard stop-loss, before the simulator steps.
#include "foxc/agent.h"
#include "foxc/isv_slots.h"
#include "foxc/rng.h"

// epsilon of the behaviour policy at the ISV's step: explore_eps_start falling linearly to
// explore_eps_end over explore_eps_steps steps, held in [0, 1]. Multiply and add are rounded
// separately (no contraction), so the numpy reference reproduces it bit for bit.
__device__ __forceinline__ float agent_epsilon(const float* isv)
{
    const float steps = isv[ISV_EXPLORE_EPS_STEPS];
    const float step = isv[ISV_STEP_HI] * ISV_STEP_WRAP + isv[ISV_STEP_LO];
    const float left = steps > 0.0f ? fmaxf(1.0f - step / steps, 0.0f) : 0.0f;
    const float start = isv[ISV_EXPLORE_EPS_START], end = isv[ISV_EXPLORE_EPS_END];
    return fminf(fmaxf(__fadd_rn(end, __fmul_rn(start - end, left)), 0.0f), 1.0f);
}

// Whether the seed's confidence gate acts this step: enabled, warmed up, and holding no more
// than gate_max_hold_frac of the time (so at least the rest keeps trading).
__device__ __forceinline__ bool agent_gate_open(const float* isv)
{
    const float step = isv[ISV_STEP_HI] * ISV_STEP_WRAP + isv[ISV_STEP_LO];
    return isv[ISV_GATE_ENABLED] >= 0.5f && step >= isv[ISV_GATE_WARMUP_STEPS]
        && isv[ISV_HOLD_FRAC_EMA] <= isv[ISV_GATE_MAX_HOLD_FRAC];
}

// The position (-1, 0, +1) action a leads to from side s, and the action that reaches target t from s.
__device__ __forceinline__ int agent_target(int a, int s)
{
    return a == ACTION_LONG ? 1 : a == ACTION_SHORT ? -1 : a == ACTION_HOLD ? s : 0;
}

__device__ __forceinline__ int agent_action_to(int t, int s)
{
    return t == s ? ACTION_HOLD : t > 0 ? ACTION_LONG : t < 0 ? ACTION_SHORT
         : s > 0 ? ACTION_FLAT_FROM_LONG : ACTION_FLAT_FROM_SHORT;
}

// The greedy choice under the entry margin: `best` when it does not open or reverse a position, or when it
// beats staying out (HOLD when flat, the exit when holding) by more than `margin`; else the better of staying
// out and (holding) keeping the position, HOLD first on ties.
__device__ __forceinline__ int agent_margin_best(const float* score, const bool* valid, int best, int side,
                                                 float margin)
{
    if (best != ACTION_LONG && best != ACTION_SHORT) return best;  // valid, so it opens (flat) or reverses
    const int out = side > 0 ? ACTION_FLAT_FROM_LONG : side < 0 ? ACTION_FLAT_FROM_SHORT : ACTION_HOLD;
    if (score[best] - score[out] > margin) return best;
    return valid[ACTION_HOLD] && score[ACTION_HOLD] >= score[out] ? ACTION_HOLD : out;
}

// agent_act's parameters and, as arguments, their names: the template body and both kernels take them.
#define AGENT_ACT_PARAMS                                                                                          \
    const float* __restrict__ q, const float* __restrict__ policy_logits, unsigned int* __restrict__ rng_state,   \
    int* __restrict__ explore, const int* __restrict__ position_lots, const float* __restrict__ drawdown,         \
    const float* __restrict__ isv, int* __restrict__ actions, float* __restrict__ log_prob,                       \
    float* __restrict__ probs, unsigned int* __restrict__ flags, unsigned int* __restrict__ stop_loss, int actor, \
    int greedy, int B
#define AGENT_ACT_ARGS                                                                                              \
    q, policy_logits, rng_state, explore, position_lots, drawdown, isv, actions, log_prob, probs, flags, stop_loss, \
    actor, greedy, B

// agent_act — grid ceil(B / 256), block 256; one thread per backtest b.
// Reads  q[b, 0..5) (the online C51 head's means on the agent's state; AGENT_Q_INVALID for an
//        action that changes nothing), policy_logits[b, 0..5) (read when actor is
//        AGENT_ACTOR_POLICY), rng_state[b], explore[b], position_lots[b], drawdown[b], isv.
// Writes rng_state[b] (advanced twice: u1, u2), explore[b], actions[b], log_prob[b], probs[b, 0..5)
//        (the distribution the action was drawn from), flags[b], stop_loss[b] = 1 when the
//        stop-loss fired.
//   valid   the actions that change something for the position's side (agent_action_valid)
//   best    the valid action with the highest score (q, or the policy's logits), first on ties
//   greedy  best, probs 1 on it; explore[] is left alone. Acting under uncertainty: best opens a position
//           from flat (LONG, SHORT) or reverses one only when its score beats staying out (HOLD when flat,
//           the exit when reversing) by more than isv[ENTRY_MARGIN] (price units); otherwise it is the best
//           of staying out and, when holding, keeping the position. Exits are never held back.
//   explore temporally extended epsilon-greedy: exploration holds a random position for a random
//           time, so the replay sees what holding through the market's moves earns, not only one
//           random step that the greedy policy undoes at once. explore[b] = 0 when acting
//           greedily, else 2 + the position (-1, 0, +1) being held. While exploring, the segment
//           ends with probability 1 / explore_hold_steps (u1; that step acts greedily), else the
//           action keeps (or restores) that position, probs 1 on it. Otherwise, with probability
//           eps = agent_epsilon(isv) (u1 < eps) a segment starts on the valid action
//           floor(u2 * n_valid) in action order; its position becomes explore[b]. probs are then
//           eps / n_valid on each valid action plus 1 - eps on best (actor q) or times the
//           softmax of the logits over the valid actions (actor policy, sampled by inverse CDF
//           with u2 when not exploring).
//   gate    the seed's confidence gate, when agent_gate_open: an entry (LONG, SHORT; greedy or
//           exploring) whose confidence, its probability under softmax(score / T) over the valid
//           actions (T = distill_temperature for q, 1 for the policy's logits), is below
//           isv[GATE_THRESHOLD] becomes HOLD; exits are never gated
//   stop    when holding, isv[STOP_LOSS_THRESHOLD] > 0 and drawdown / max(isv[MEAN_ABS_PNL_EMA],
//           1e-6) exceeds it, the action becomes FLAT_FROM_LONG / FLAT_FROM_SHORT, overriding all
//   log_prob is log probs[chosen action] (before the gate and the stop-loss).
template <int A> __device__ __forceinline__ void agent_act_body(
    AGENT_ACT_PARAMS, int* __restrict__ market, int* __restrict__ quotes)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;

    const int lots = position_lots[b];
    const int side = lots > 0 ? 1 : (lots < 0 ? -1 : 0);
    const float* score = (actor == AGENT_ACTOR_POLICY ? policy_logits : q) + (long long)b * A;
    bool valid[A];
    int n_valid = 0, best = ACTION_HOLD;
    float best_score = score[ACTION_HOLD];
    for (int a = 0; a < A; ++a) {
        valid[a] = agent_valid<A>(a, side);
        n_valid += valid[a] ? 1 : 0;
        if (valid[a] && score[a] > best_score) {
            best_score = score[a];
            best = a;
        }
    }
    const unsigned int x1 = xorshift32(rng_state[b]), x2 = xorshift32(x1);
    rng_state[b] = x2;
    const float u1 = uniform24(x1), u2 = uniform24(x2);

    if (greedy) best = agent_margin_best(score, valid, best, side, isv[ISV_ENTRY_MARGIN]);

    float p[A];
    int action = best;
    int segment = greedy ? 0 : explore[b];
    if (segment != 0 && u1 < 1.0f / fmaxf(isv[ISV_EXPLORE_HOLD_STEPS], 1.0f)) segment = 0;  // it ends
    if (greedy) {
        for (int a = 0; a < A; ++a) p[a] = a == best ? 1.0f : 0.0f;
    } else if (segment != 0) {  // an exploration segment goes on
        action = A > AGENT_N_ACTIONS && segment >= AGENT_EXPLORE_QUOTE ? segment - AGENT_EXPLORE_QUOTE
                                                                       : agent_action_to(segment - 2, side);
        for (int a = 0; a < A; ++a) p[a] = a == action ? 1.0f : 0.0f;
    } else {
        const float eps = agent_epsilon(isv);
        const float uniform = eps / (float)n_valid;
        if (actor == AGENT_ACTOR_POLICY) {
            float e[A], sum = 0.0f;
            for (int a = 0; a < A; ++a) {
                e[a] = valid[a] ? expf(score[a] - best_score) : 0.0f;
                sum += e[a];
            }
            for (int a = 0; a < A; ++a)
                p[a] = valid[a] ? __fadd_rn(__fmul_rn(1.0f - eps, e[a] / sum), uniform) : 0.0f;
        } else {
            for (int a = 0; a < A; ++a)
                p[a] = !valid[a] ? 0.0f : (a == best ? (1.0f - eps) + uniform : uniform);
        }
        if (explore[b] == 0 && u1 < eps) {  // a segment starts (not on the step one ended)
            int k = min((int)(u2 * (float)n_valid), n_valid - 1);
            for (int a = 0; a < A; ++a)
                if (valid[a] && k-- == 0) { action = a; break; }
            segment = A > AGENT_N_ACTIONS && action >= AGENT_N_ACTIONS ? AGENT_EXPLORE_QUOTE + action
                                                                       : agent_target(action, side) + 2;
        } else if (actor == AGENT_ACTOR_POLICY) {  // the softmax part, sampled with u2
            float cdf = 0.0f, total = 0.0f;
            for (int a = 0; a < A; ++a) total += valid[a] ? p[a] - uniform : 0.0f;
            for (int a = 0; a < A; ++a) {
                cdf += valid[a] ? p[a] - uniform : 0.0f;
                if (valid[a] && u2 * total < cdf) { action = a; break; }
            }
        }
    }
    if (!greedy) explore[b] = segment;
    for (int a = 0; a < A; ++a) probs[(long long)b * A + a] = p[a];
    const float p_action = p[action];

    unsigned int flag = 0;
    if ((action == ACTION_LONG || action == ACTION_SHORT) && agent_gate_open(isv)) {
        // the head's confidence in this entry: its Boltzmann probability among the valid actions
        const float temp = actor == AGENT_ACTOR_POLICY ? 1.0f : fmaxf(isv[ISV_DISTILL_TEMPERATURE], 1e-6f);
        float sum = 0.0f;
        for (int a = 0; a < A; ++a)
            sum += valid[a] ? expf((score[a] - best_score) / temp) : 0.0f;
        const float confidence = expf((score[action] - best_score) / temp) / sum;
        if (confidence < isv[ISV_GATE_THRESHOLD]) {
            action = ACTION_HOLD;
            flag |= AGENT_FLAG_GATED;
        }
    }
    const float threshold = isv[ISV_STOP_LOSS_THRESHOLD];
    if (lots != 0 && threshold > 0.0f && drawdown[b] / fmaxf(isv[ISV_MEAN_ABS_PNL_EMA], 1e-6f) > threshold) {
        action = lots > 0 ? ACTION_FLAT_FROM_LONG : ACTION_FLAT_FROM_SHORT;
        flag |= AGENT_FLAG_STOPPED;
    }
    actions[b] = action;
    log_prob[b] = logf(p_action);
    flags[b] = flag;
    stop_loss[b] = (flag & AGENT_FLAG_STOPPED) ? 1u : 0u;
    if (A > AGENT_N_ACTIONS) {  // the simulator's inputs: the market action and both sides' quote codes
        int bid, ask;
        agent_quote_codes(action, &bid, &ask);
        market[b] = action < AGENT_N_ACTIONS ? action : ACTION_HOLD;
        quotes[b] = bid;
        quotes[B + b] = ask;
    }
}

extern "C" __global__ void agent_act(AGENT_ACT_PARAMS)
{
    agent_act_body<AGENT_N_ACTIONS>(AGENT_ACT_ARGS, nullptr, nullptr);
}

// agent_act_quotes — as agent_act, for the agent with resting orders (--orders passive): q[b, 0..9),
// policy_logits[b, 0..9), probs[b, 0..9); the quote actions (ACTION_QUOTE_*) are always valid; an exploration
// segment that starts on one repeats it (explore[b] = AGENT_EXPLORE_QUOTE + a) until it ends. Also writes the
// simulator's inputs: market[b] (the action, HOLD for a quote action) and quotes[b], quotes[B + b] (the bid's and
// the ask's code, agent_quote_codes: KEEP for a market action).
extern "C" __global__ void agent_act_quotes(
    AGENT_ACT_PARAMS, int* __restrict__ market, int* __restrict__ quotes)
{
    agent_act_body<AGENT_N_PASSIVE_ACTIONS>(AGENT_ACT_ARGS, market, quotes);
}
