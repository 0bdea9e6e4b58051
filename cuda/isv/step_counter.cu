// The device-resident step counter on the ISV bus.
#include "foxc/isv_slots.h"

// isv_step_increment — grid 1, block 1.
// Reads and writes isv[ISV_STEP_LO], isv[ISV_STEP_HI]. float32 holds integers
// exactly only to 2^24, so step_lo wraps there and carries into step_hi.
extern "C" __global__ void isv_step_increment(float* __restrict__ isv)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    const float next = isv[ISV_STEP_LO] + 1.0f;
    if (next >= ISV_STEP_WRAP) {
        isv[ISV_STEP_LO] = 0.0f;
        isv[ISV_STEP_HI] += 1.0f;
    } else {
        isv[ISV_STEP_LO] = next;
    }
}
