// agent_step_end: the training step's last launch (cuda/include/foxc/agent_step_end.cuh has its parts).
#include "foxc/agent_step_end.cuh"

extern "C" __global__ void agent_step_end(STEP_END_PARAMS)
{
    agent_step_end_body<AGENT_N_ACTIONS>(STEP_END_ARGS);
}
