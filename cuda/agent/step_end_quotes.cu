// agent_step_end_quotes: agent_step_end for the agent with resting orders (cuda/include/foxc/agent_step_end.cuh).
#include "foxc/agent_step_end.cuh"

// agent_step_end_quotes — as agent_step_end for the agent with resting orders: probs[B, 9].
extern "C" __global__ void agent_step_end_quotes(STEP_END_PARAMS)
{
    agent_step_end_body<AGENT_N_PASSIVE_ACTIONS>(STEP_END_ARGS);
}
