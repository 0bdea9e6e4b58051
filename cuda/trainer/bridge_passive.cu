// The trainer's backtest step with resting orders (--orders passive): as backtest_step (bridge.cu), with the
// simulator's step_backtest_passive (lobsim_passive.cuh) in place of step_backtest. A module of its own, so
// that backtest_step's code is what it was.
#include "foxc/bridge.cuh"
#include "foxc/lobsim_passive.cuh"

// backtest_step_passive — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n; after
// agent_act_quotes (it wrote the market actions and both sides' quote codes) and the gather.
//   step_backtest_passive: book_update -> submit_market -> passive_phase -> pnl_track
//   closed_trades, agent_reward, perception_targets: as backtest_step
// The parameters are lobsim_step_passive's, then backtest_step's own.
extern "C" __global__ void backtest_step_passive(
    LOBSIM_STEP_PARAMS, LOBSIM_PASSIVE_PARAMS,
    BACKTEST_TRAINER_PARAMS)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    step_backtest_passive(b, LOBSIM_STEP_ARGS, PassiveParams{LOBSIM_PASSIVE_ARGS});
    closed_trades(b, pos, trade_log, prev_trades, closed, closed_pnl, drawdown, money_scale, trade_cap);
    agent_reward(b, rewards, drawdown, isv, reward_raw, reward_scaled, clipped);
    perception_targets(b, labels_out, labels, mask, n);
}
