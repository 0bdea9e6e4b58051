// The diagnostics frame: one fixed-layout record per step in a mapped-pinned ring the host
// reads without synchronising the step.
#include "foxc/agent.h"
#include "foxc/isv_slots.h"

// agent_diagnostics_frame — grid 1, block 1.
// Reads stats[AGENT_N_STATS], losses[FRAME_N_LOSSES], isv, extras[FRAME_N_EXTRAS] (float64 counters
// of other components), isv_slots[n_isv] (indices of the ISV slots to record, FRAME_ISV order).
// Writes ring[(step % ring_len) * FRAME_LEN ...]: every field, FRAME_T_NS = the device's global
// timer (ns; consecutive frames are one step apart in device time), a system-wide fence, then
// FRAME_SEQ = step + 1, so a host that sees the sequence number also sees the fields.
extern "C" __global__ void agent_diagnostics_frame(
    const double* __restrict__ stats, const float* __restrict__ losses, const float* __restrict__ isv,
    const double* __restrict__ extras, const int* __restrict__ isv_slots, int n_isv,
    double* __restrict__ ring, int ring_len)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const double step = (double)isv[ISV_STEP_HI] * (double)ISV_STEP_WRAP + (double)isv[ISV_STEP_LO];
    double* frame = ring + (long long)fmod(step, (double)ring_len) * FRAME_LEN;
    frame[FRAME_STEP] = step;
    for (int k = 0; k < AGENT_N_STATS; ++k) frame[FRAME_STATS + k] = stats[k];
    for (int k = 0; k < FRAME_N_LOSSES; ++k) frame[FRAME_LOSSES + k] = losses[k];
    for (int k = 0; k < n_isv; ++k) frame[FRAME_ISV_FIELDS + k] = isv[isv_slots[k]];
    for (int k = 0; k < FRAME_N_EXTRAS; ++k) frame[FRAME_EXTRAS + k] = extras[k];
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    frame[FRAME_T_NS] = (double)now;
    __threadfence_system();
    frame[FRAME_SEQ] = step + 1.0;
}
