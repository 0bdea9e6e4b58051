// The simulator's step: apply each backtest's current snapshot, fill its order, mark its account.
#include "foxc/lobsim.h"
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
