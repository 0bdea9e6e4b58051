// agent_step_end_quotes: agent_step_end for the agent with resting orders (cuda/include/foxc/agent_step_end.cuh).
#include "foxc/agent_step_end.cuh"

// agent_step_end_quotes — as agent_step_end for the agent with resting orders: probs[B, 9].
extern "C" __global__ void agent_step_end_quotes(
    STEP_ARRAYS,
    int B,
    const float* __restrict__ losses,
    double* stats,
    float* isv,
    float* __restrict__ isv_host,
    const double* __restrict__ extras,
    const int* __restrict__ isv_slots,
    int n_isv,
    double* __restrict__ ring,
    int ring_len)
{
    agent_step_end_body<AGENT_N_PASSIVE_ACTIONS>(probs, actions, flags, reward_raw, reward_scaled, clipped, closed,
        closed_pnl, lots, B, losses, stats, isv, isv_host,
        extras, isv_slots, n_isv, ring, ring_len);
}
