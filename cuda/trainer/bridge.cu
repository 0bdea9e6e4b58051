// The trainer's backtest step: the simulator's step, then the per-backtest glue between the dataset, the
// simulator, the agent and the learner (so each component keeps its own layout), then the reward, one
// thread per backtest in one launch. Each part is a __noinline__ function that compiles as it would
// alone (the simulator's in lobsim_step.cuh, the reward in agent_reward.cuh): the same inputs give the
// same bits however the parts are grouped into launches. Nothing a part writes is read later through a
// __restrict__ pointer (a const __restrict__ pointer may be read through the non-coherent cache).
#include "foxc/bridge.cuh"
#include "foxc/lobsim_step.cuh"

// backtest_step — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n; after act (it fills
// the actions and stop-loss flags) and after the gather (it took labels_out at the cursor).
//   lobsim_step's parts: book_update -> submit_market -> pnl_track (lobsim_step.cuh: the book, pos,
//     trade_log, rewards = the equity change, dones)
//   closed_trades: closed, closed_pnl, prev_trades, drawdown (the agent's, read by the next act)
//   agent_reward: reward_raw, reward_scaled, clipped from rewards, drawdown and the isv
//   perception_targets: labels, mask (read by the learner later in the step)
// The parameters are lobsim_step's, then the trainer's.
extern "C" __global__ void backtest_step(
    LOBSIM_STEP_PARAMS,
    BACKTEST_TRAINER_PARAMS)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    step_backtest(b, LOBSIM_STEP_ARGS);
    closed_trades(b, pos, trade_log, prev_trades, closed, closed_pnl, drawdown, money_scale, trade_cap);
    agent_reward(b, rewards, drawdown, isv, reward_raw, reward_scaled, clipped);
    perception_targets(b, labels_out, labels, mask, n);
}
