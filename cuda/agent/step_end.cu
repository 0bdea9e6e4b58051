// agent_step_end: the training step's last launch (cuda/include/foxc/agent_step_end.cuh has its parts).
#include "foxc/agent_step_end.cuh"

extern "C" __global__ void agent_step_end(
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
    agent_step_end_body<AGENT_N_ACTIONS>(probs, actions, flags, reward_raw, reward_scaled, clipped, closed,
        closed_pnl, lots, B, losses, stats, isv, isv_host,
        extras, isv_slots, n_isv, ring, ring_len);
}

