// The simulator's step: apply each backtest's current snapshot, fill its order, mark its account.
#include "foxc/lobsim.h"
#include "foxc/lobsim_passive.cuh"
#include "foxc/lobsim_step.cuh"
#include "foxc/snapshot.h"

// lobsim_step — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n.
// book_update -> submit_market -> pnl_track for backtest b (cuda/include/foxc/lobsim_step.cuh says what
// each reads and writes). Reads snaps, cursor, episode_end, actions, stop_loss, fee_per_lot; reads and
// writes the book (bid_px..ask_sz level-major, book_ts, book_idx, mid_x2, atr_ema, skip counts), pos and
// trade_log; writes rewards and dones.
extern "C" __global__ void lobsim_step(LOBSIM_STEP_PARAMS)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    step_backtest(b, LOBSIM_STEP_ARGS);
}

// lobsim_step_passive — as lobsim_step, with resting orders (--orders passive): book_update -> submit_market ->
// passive_phase (cuda/include/foxc/lobsim_passive.cuh: the quotes, then the interval to the next snapshot) ->
// pnl_track, so a step's reward holds the fills of the orders it decided. A separate kernel, so that the
// market-only step's code is what it was.
extern "C" __global__ void lobsim_step_passive(LOBSIM_STEP_PARAMS, LOBSIM_PASSIVE_PARAMS)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    step_backtest_passive(b, LOBSIM_STEP_ARGS, PassiveParams{LOBSIM_PASSIVE_ARGS});
}
