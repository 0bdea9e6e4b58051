// The simulator's step: apply each backtest's current snapshot, fill its order, mark its account.
#include "foxc/lobsim.h"
#include "foxc/lobsim_step.cuh"
#include "foxc/snapshot.h"

// lobsim_step — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n.
// book_update -> submit_market -> pnl_track for backtest b (cuda/include/foxc/lobsim_step.cuh says what
// each reads and writes). Reads snaps, cursor, episode_end, actions, stop_loss, fee_per_lot; reads and
// writes the book (bid_px..ask_sz level-major, book_ts, book_idx, mid_x2, atr_ema, skip counts), pos and
// trade_log; writes rewards and dones.
extern "C" __global__ void lobsim_step(
    const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,
    const long long* __restrict__ episode_end,
    long long* __restrict__ bid_px, long long* __restrict__ ask_px,
    unsigned int* __restrict__ bid_sz, unsigned int* __restrict__ ask_sz,
    long long* __restrict__ book_ts, long long* __restrict__ book_idx,
    long long* __restrict__ mid_x2, float* __restrict__ atr_ema,
    unsigned int* __restrict__ skip_range, unsigned int* __restrict__ skip_crossed,
    const int* __restrict__ actions, const unsigned int* __restrict__ stop_loss,
    const long long* __restrict__ fee_per_lot, FoxcPosition* __restrict__ pos, FoxcTrade* __restrict__ trade_log,
    float* __restrict__ rewards, float* __restrict__ dones,
    long long min_px, long long max_px, float atr_alpha, float reward_scale, int trade_cap, int lots_per_entry,
    int n)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    book_update(b, snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema,
                skip_range, skip_crossed, min_px, max_px, atr_alpha, n);
    submit_market(b, actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n);
    pnl_track(b, snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap);
}
