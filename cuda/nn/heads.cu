// Distributions of the heads on h. The head matrices themselves (C51 Q, policy, value,
// perception) are linear layers (linear_fwd_* in matmul.cu); these kernels turn their logits
// into what the losses and the action sampler read.
#include "foxc/agent.h"
#include "foxc/isv_slots.h"
#include "foxc/nn_math.cuh"

// c51_distribution's parameters and, as arguments, their names (its template body and both kernels).
#define C51_DISTRIBUTION_PARAMS                                                                        \
    float* __restrict__ probs0, float* __restrict__ q0, const float* __restrict__ logits0,             \
    const float* __restrict__ side0, float* __restrict__ probs1, float* __restrict__ q1,               \
    const float* __restrict__ logits1, const float* __restrict__ side1, const float* __restrict__ isv, \
    int side_stride, int B
#define C51_DISTRIBUTION_ARGS                                                   \
    probs0, q0, logits0, side0, probs1, q1, logits1, side1, isv, side_stride, B

// c51_distribution — the distributions of one or two C51 heads on B states each: blockIdx.y picks
// the head (grid.y = 1: head 0 only, head 1's pointers are not read; 2: both, e.g. the learner's
// target head on the next states and its online head). Within a head, one warp per (b, action)
// row, warp-strided over the B*5 rows (any 1-D grid.x of 32-multiple blocks works; plans use
// 256-thread blocks, one row per warp). Lane l holds atoms l and l + 32 (< 51). Reads
// logits[B, 5, 51], the support bounds isv[ISV_C51_V_MIN], isv[ISV_C51_V_MAX] and
// side[b * side_stride] (the sign of b's position, the state's side feature); writes
// probs[B, 5, 51] (softmax over the atoms) and q[B, 5] = sum_j p_j z_j, with
// z_j = v_min + j (v_max - v_min) / 50, or AGENT_Q_INVALID for an action that changes nothing
// for that side (agent_action_valid): an argmax over q (acting, the C51 target) never picks one.
// Sums are fixed butterfly reductions.
template <int A> __device__ __forceinline__ void c51_distribution_body(C51_DISTRIBUTION_PARAMS)
{
    if (blockIdx.y > 1) return;
    const bool head1 = blockIdx.y == 1;
    float* __restrict__ probs = head1 ? probs1 : probs0;
    float* __restrict__ q = head1 ? q1 : q0;
    const float* __restrict__ logits = head1 ? logits1 : logits0;
    const float* __restrict__ side = head1 ? side1 : side0;
    const int lane = threadIdx.x & 31;
    const int warps = (gridDim.x * blockDim.x) >> 5;
    const float v_min = isv[ISV_C51_V_MIN];
    const float dz = (isv[ISV_C51_V_MAX] - v_min) / (float)(NN_C51_ATOMS - 1);
    const int j1 = lane + 32;
    const bool has1 = j1 < NN_C51_ATOMS;
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < B * A; row += warps) {
        const float* l = logits + (long long)row * NN_C51_ATOMS;
        float* p = probs + (long long)row * NN_C51_ATOMS;
        const float l0 = l[lane];
        const float l1 = has1 ? l[j1] : -INFINITY;
        const float mx = nn_warp_max(fmaxf(l0, l1));
        const float e0 = expf(l0 - mx);
        const float e1 = has1 ? expf(l1 - mx) : 0.0f;
        const float inv = 1.0f / nn_warp_sum(e0 + e1);
        const float p0 = e0 * inv, p1 = e1 * inv;
        p[lane] = p0;
        if (has1) p[j1] = p1;
        float part = p0 * (v_min + (float)lane * dz);
        if (has1) part += p1 * (v_min + (float)j1 * dz);
        const float expect = nn_warp_sum(part);
        if (lane == 0) {
            const float s = side[(long long)(row / A) * side_stride];
            const int sign = s > 0.0f ? 1 : (s < 0.0f ? -1 : 0);
            q[row] = agent_valid<A>(row % A, sign) ? expect : AGENT_Q_INVALID;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
c51_distribution(C51_DISTRIBUTION_PARAMS)
{
    c51_distribution_body<NN_N_ACTIONS>(C51_DISTRIBUTION_ARGS);
}

// c51_distribution_quotes — as c51_distribution for the agent with resting orders: logits and probs
// [B, 9, 51], q[B, 9]; the quote actions are always valid.
extern "C" __global__ void __launch_bounds__(256)
c51_distribution_quotes(C51_DISTRIBUTION_PARAMS)
{
    c51_distribution_body<NN_N_PASSIVE_ACTIONS>(C51_DISTRIBUTION_ARGS);
}
