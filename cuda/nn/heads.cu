// Distributions of the heads on h. The head matrices themselves (C51 Q, policy, value,
// perception) are linear layers (linear_fwd_* in matmul.cu); these kernels turn their logits
// into what the losses and the action sampler read.
#include "foxc/isv_slots.h"
#include "foxc/nn.h"

// c51_distribution — 1-D grid over B*5 threads (256-thread blocks), one per (b, action).
// Reads logits[B, 5, 51] and the support bounds isv[ISV_C51_V_MIN], isv[ISV_C51_V_MAX];
// writes probs[B, 5, 51] (softmax over the atoms) and q[B, 5] = sum_j p_j z_j,
// with z_j = v_min + j (v_max - v_min) / 50.
extern "C" __global__ void __launch_bounds__(256)
c51_distribution(float* __restrict__ probs, float* __restrict__ q, const float* __restrict__ logits,
                 const float* __restrict__ isv, int B)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NN_N_ACTIONS) return;
    const float* l = logits + (long long)idx * NN_C51_ATOMS;
    float* p = probs + (long long)idx * NN_C51_ATOMS;
    const float v_min = isv[ISV_C51_V_MIN];
    const float dz = (isv[ISV_C51_V_MAX] - v_min) / (float)(NN_C51_ATOMS - 1);
    float mx = l[0];
    for (int j = 1; j < NN_C51_ATOMS; ++j) mx = fmaxf(mx, l[j]);
    float sum = 0.0f;
    for (int j = 0; j < NN_C51_ATOMS; ++j) sum += expf(l[j] - mx);
    const float inv = 1.0f / sum;
    float expect = 0.0f;
    for (int j = 0; j < NN_C51_ATOMS; ++j) {
        const float pj = expf(l[j] - mx) * inv;
        p[j] = pj;
        expect += pj * (v_min + (float)j * dz);
    }
    q[idx] = expect;
}

// policy_softmax — 1-D grid over B threads (256-thread blocks), one per window.
// Reads logits[B, 5]; writes probs[B, 5] and log_probs[B, 5] (log-sum-exp form).
extern "C" __global__ void __launch_bounds__(256)
policy_softmax(float* __restrict__ probs, float* __restrict__ log_probs, const float* __restrict__ logits, int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float* l = logits + (long long)b * NN_N_ACTIONS;
    float mx = l[0];
    for (int k = 1; k < NN_N_ACTIONS; ++k) mx = fmaxf(mx, l[k]);
    float sum = 0.0f;
    for (int k = 0; k < NN_N_ACTIONS; ++k) sum += expf(l[k] - mx);
    const float lse = mx + logf(sum);
    for (int k = 0; k < NN_N_ACTIONS; ++k) {
        const float lp = l[k] - lse;
        log_probs[(long long)b * NN_N_ACTIONS + k] = lp;
        probs[(long long)b * NN_N_ACTIONS + k] = expf(lp);
    }
}
