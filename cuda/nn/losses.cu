// Losses and their gradients with respect to the heads' outputs. Every per-sample gradient is
// already divided by the batch size B: the batch loss is the mean of the per-sample losses.
#include "foxc/agent.h"
#include "foxc/isv_slots.h"
#include "foxc/nn_math.cuh"

// c51_loss's parameters and, as arguments, their names (its template body and both kernels).
#define C51_LOSS_PARAMS                                                                                       \
    float* __restrict__ grad_logits, float* __restrict__ loss, float* __restrict__ td_error,                  \
    const float* __restrict__ logits, const float* __restrict__ next_probs, const float* __restrict__ next_q, \
    const int* __restrict__ action, const float* __restrict__ ret, const float* __restrict__ gamma_n,         \
    const float* __restrict__ done, const float* __restrict__ weight, const float* __restrict__ isv, int B
#define C51_LOSS_ARGS                                                                                   \
    grad_logits, loss, td_error, logits, next_probs, next_q, action, ret, gamma_n, done, weight, isv, B

// c51_loss — one warp per sample, warp-strided over B (any 1-D launch of 32-multiple blocks;
// plans use 128-thread blocks, one sample per warp). Lane l owns atoms l and l + 32 (< 51).
// Target: the next state's target distribution next_probs[B,5,51] under its greedy action
// (argmax of next_q[B,5], first on ties), atoms moved to ret + gamma_n (1 - done) z_j, clipped to
// [v_min, v_max] (ISV) and split onto the two neighbouring atoms: m[51]. Every lane walks the 51
// source atoms in order and adds the pieces that land on its own atoms (the serial order per atom).
// Online: logits[B,5,51] of the taken action[b]. Writes loss[b] = -sum m log p,
// td_error[b] = |E_m[z] - E_p[z]| (for the priorities) and grad_logits[B,5,51] =
// weight[b] (p - m) / B on the taken action, 0 on the others (weight: PER importance weights).
// Sums over atoms are fixed butterfly warp reductions.
template <int A> __device__ __forceinline__ void c51_loss_body(C51_LOSS_PARAMS)
{
    const int lane = threadIdx.x & 31;
    const int warps = (gridDim.x * blockDim.x) >> 5;
    const float v_min = isv[ISV_C51_V_MIN], v_max = isv[ISV_C51_V_MAX];
    const float dz = (v_max - v_min) / (float)(NN_C51_ATOMS - 1);
    const int i0 = lane, i1 = lane + 32;
    const bool has1 = i1 < NN_C51_ATOMS;
    for (int b = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; b < B; b += warps) {
        int best = 0;
        float best_q = next_q[(long long)b * A];
        for (int a = 1; a < A; ++a) {
            const float qa = next_q[(long long)b * A + a];
            if (qa > best_q) { best_q = qa; best = a; }
        }
        const float* pn = next_probs + ((long long)b * A + best) * NN_C51_ATOMS;
        const float pn0 = pn[i0];
        const float pn1 = has1 ? pn[i1] : 0.0f;
        const float shift = gamma_n[b] * (1.0f - done[b]);
        const float r = ret[b];
        float m0 = 0.0f, m1 = 0.0f;
        for (int j = 0; j < NN_C51_ATOMS; ++j) {
            const float pj = __shfl_sync(0xffffffffu, j < 32 ? pn0 : pn1, j & 31);
            const float tz = fminf(fmaxf(r + shift * (v_min + (float)j * dz), v_min), v_max);
            const float bj = fminf(fmaxf((tz - v_min) / dz, 0.0f), (float)(NN_C51_ATOMS - 1));
            const float lo = floorf(bj), hi = ceilf(bj);
            const int l = (int)lo, h = (int)hi;
            if (l == h) {
                if (l == i0) m0 += pj;
                else if (l == i1) m1 += pj;
            } else {
                const float wl = pj * (hi - bj), wh = pj * (bj - lo);
                if (l == i0) m0 += wl;
                else if (l == i1) m1 += wl;
                if (h == i0) m0 += wh;
                else if (h == i1) m1 += wh;
            }
        }

        const int act = min(max(action[b], 0), A - 1);
        float* gb = grad_logits + (long long)b * A * NN_C51_ATOMS;
        for (int e = lane; e < A * NN_C51_ATOMS; e += 32)
            if (e / NN_C51_ATOMS != act) gb[e] = 0.0f;
        const float* l = logits + ((long long)b * A + act) * NN_C51_ATOMS;
        float* g = gb + act * NN_C51_ATOMS;
        const float l0 = l[i0];
        const float l1 = has1 ? l[i1] : -INFINITY;
        const float mx = nn_warp_max(fmaxf(l0, l1));
        const float e0 = expf(l0 - mx);
        const float e1 = has1 ? expf(l1 - mx) : 0.0f;
        const float lse = mx + logf(nn_warp_sum(e0 + e1));
        const float scale = weight[b] / (float)B;
        const float lp0 = l0 - lse, p0 = expf(lp0), z0 = v_min + (float)i0 * dz;
        float ce = -(m0 * lp0), e_p = p0 * z0, e_m = m0 * z0;
        g[i0] = scale * (p0 - m0);
        if (has1) {
            const float lp1 = l1 - lse, p1 = expf(lp1), z1 = v_min + (float)i1 * dz;
            ce -= m1 * lp1;
            e_p += p1 * z1;
            e_m += m1 * z1;
            g[i1] = scale * (p1 - m1);
        }
        ce = nn_warp_sum(ce);
        e_p = nn_warp_sum(e_p);
        e_m = nn_warp_sum(e_m);
        if (lane == 0) {
            loss[b] = ce;
            td_error[b] = fabsf(e_m - e_p);
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
c51_loss(C51_LOSS_PARAMS)
{
    c51_loss_body<NN_N_ACTIONS>(C51_LOSS_ARGS);
}

// c51_loss_quotes — as c51_loss for the agent with resting orders: [B, 9, 51] and next_q[B, 9].
extern "C" __global__ void __launch_bounds__(256)
c51_loss_quotes(C51_LOSS_PARAMS)
{
    c51_loss_body<NN_N_PASSIVE_ACTIONS>(C51_LOSS_ARGS);
}

// value_policy_loss's parameters and, as arguments, their names (its template body and both kernels).
#define VALUE_POLICY_LOSS_PARAMS                                                                    \
    float* __restrict__ grad_v, float* __restrict__ loss_v, float* __restrict__ advantage,          \
    const float* __restrict__ v, const float* __restrict__ v_next, const float* __restrict__ ret,   \
    const float* __restrict__ gamma_n, const float* __restrict__ done, float* __restrict__ grad_pi, \
    float* __restrict__ loss_pi, const float* __restrict__ pi_logits, const float* __restrict__ q,  \
    const float* __restrict__ isv, int B
#define VALUE_POLICY_LOSS_ARGS                                                                       \
    grad_v, loss_v, advantage, v, v_next, ret, gamma_n, done, grad_pi, loss_pi, pi_logits, q, isv, B

// value_policy_loss — 1-D grid over B threads (256-thread blocks): thread b does the value head's
// loss, then the policy head's (independent: one launch for two heads of a few flops a sample).
// Value: target y = ret + gamma_n (1 - done) v_next (v_next held constant). Reads v[B], v_next[B],
// ret, gamma_n, done; writes loss_v[b] = (v - y)^2, advantage[b] = y - v (the policy's
// baseline-corrected return) and grad_v[b] = 2 (v - y) / B.
// Policy, distilled from the C51 head: reads pi_logits[B,5], q[B,5] (the online C51 means on the
// same states, held constant; AGENT_Q_INVALID where an action changes nothing) and
// isv[ISV_DISTILL_TEMPERATURE] = T. Over the valid actions, target t = softmax(q / T) and
// pi = softmax(pi_logits); writes loss_pi[b] = KL(t || pi) = sum t (log t - log pi) and
// grad_pi[b,k] = (pi_k - t_k) / B (0 on invalid actions, whose logits the policy never uses).
template <int A> __device__ __forceinline__ void value_policy_loss_body(VALUE_POLICY_LOSS_PARAMS)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float y = ret[b] + gamma_n[b] * (1.0f - done[b]) * v_next[b];
    const float adv = y - v[b];
    loss_v[b] = adv * adv;
    advantage[b] = adv;
    grad_v[b] = -2.0f * adv / (float)B;

    const float* l = pi_logits + (long long)b * A;
    const float* qb = q + (long long)b * A;
    const float inv_t = 1.0f / fmaxf(isv[ISV_DISTILL_TEMPERATURE], 1e-6f);
    bool valid[A];
    float l_max = -INFINITY, s_max = -INFINITY;
    for (int k = 0; k < A; ++k) {
        valid[k] = qb[k] > 0.5f * AGENT_Q_INVALID;
        if (valid[k]) {
            l_max = fmaxf(l_max, l[k]);
            s_max = fmaxf(s_max, qb[k] * inv_t);
        }
    }
    float l_sum = 0.0f, s_sum = 0.0f;
    for (int k = 0; k < A; ++k)
        if (valid[k]) {
            l_sum += expf(l[k] - l_max);
            s_sum += expf(qb[k] * inv_t - s_max);
        }
    const float l_lse = l_max + logf(l_sum), s_lse = s_max + logf(s_sum);
    const float inv_b = 1.0f / (float)B;
    float kl = 0.0f;
    for (int k = 0; k < A; ++k) {
        float g = 0.0f;
        if (valid[k]) {
            const float log_t = qb[k] * inv_t - s_lse, log_pi = l[k] - l_lse;
            const float t = expf(log_t);
            kl += t * (log_t - log_pi);
            g = (expf(log_pi) - t) * inv_b;
        }
        grad_pi[(long long)b * A + k] = g;
    }
    loss_pi[b] = kl;
}

extern "C" __global__ void __launch_bounds__(256)
value_policy_loss(VALUE_POLICY_LOSS_PARAMS)
{
    value_policy_loss_body<NN_N_ACTIONS>(VALUE_POLICY_LOSS_ARGS);
}

// value_policy_loss_quotes — as value_policy_loss for the agent with resting orders: pi_logits, q, grad_pi
// [B, 9].
extern "C" __global__ void __launch_bounds__(256)
value_policy_loss_quotes(VALUE_POLICY_LOSS_PARAMS)
{
    value_policy_loss_body<NN_N_PASSIVE_ACTIONS>(VALUE_POLICY_LOSS_ARGS);
}

// bce_masked — 1-D grid-stride over rows*cols elements (256-thread blocks). Reads logits, labels
// and mask [rows, cols]; where mask is 0 writes 0 (labels there may be NaN), elsewhere
// loss = mask (max(x,0) - x y + log1p(exp(-|x|))) and grad = mask (sigmoid(x) - y) / rows.
extern "C" __global__ void bce_masked(float* __restrict__ grad, float* __restrict__ loss,
                                      const float* __restrict__ logits, const float* __restrict__ labels,
                                      const float* __restrict__ mask, int rows, int cols)
{
    const long long n = (long long)rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const float mk = mask[i];
        if (mk == 0.0f) {
            grad[i] = 0.0f;
            loss[i] = 0.0f;
            continue;
        }
        const float x = logits[i], y = labels[i];
        loss[i] = mk * (fmaxf(x, 0.0f) - x * y + log1pf(expf(-fabsf(x))));
        grad[i] = mk * (nn_sigmoid(x) - y) / (float)rows;
    }
}

// loss_means — grid 4, block 256: block k writes out[k], the mean of the k-th per-sample loss:
// loss_q[B] (C51), loss_pi[B] (policy), loss_v[B] (value), loss_bce[n_bce] (the perception's masked
// BCE, every label slot). Each block sums the way a one-block mean does: thread t adds x[t],
// x[t+256], ... in order, then a fixed shared-memory tree; out[k] = sum / n. One launch for the four
// means the controllers and the diagnostics frame read (out is the learner's mapped losses).
extern "C" __global__ void __launch_bounds__(256)
loss_means(float* __restrict__ out, const float* __restrict__ loss_q, const float* __restrict__ loss_pi,
           const float* __restrict__ loss_v, const float* __restrict__ loss_bce, int B, int n_bce)
{
    __shared__ float part[256];
    const int k = blockIdx.x;
    if (k >= 4) return;
    const float* __restrict__ x = k == 0 ? loss_q : k == 1 ? loss_pi : k == 2 ? loss_v : loss_bce;
    const int n = k == 3 ? n_bce : B;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += 256) s += x[i];
    const float sum = nn_block_sum<256>(part, s);
    if (threadIdx.x == 0) out[k] = sum / (float)n;
}
