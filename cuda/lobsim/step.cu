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
extern "C" __global__ void lobsim_step_passive(
    LOBSIM_STEP_PARAMS, const int* __restrict__ quotes, long long* __restrict__ q_px, long long* __restrict__ q_leaves,
    unsigned int* __restrict__ q_state, long long* __restrict__ q_arrive, long long* __restrict__ q_cancel,
    double* __restrict__ q_front, double* __restrict__ q_cum, long long* __restrict__ q_since,
    unsigned int* __restrict__ q_posts, unsigned int* __restrict__ q_rejects, unsigned int* __restrict__ q_fill_lots,
    long long maker_fee, long long entry_latency, long long cancel_latency, long long tick, int queue_model,
    int power, int partial, int max_position)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    const PassiveParams q{quotes, q_px, q_leaves, q_state, q_arrive, q_cancel, q_front, q_cum, q_since, q_posts,
                          q_rejects, q_fill_lots, maker_fee, entry_latency, cancel_latency, tick, queue_model, power,
                          partial, max_position};
    const unsigned int skips = skip_range[b] + skip_crossed[b];  // book_update counts a snapshot it skips
    book_update(b, snaps, cursor, bid_px, ask_px, bid_sz, ask_sz, book_ts, book_idx, mid_x2, atr_ema,
                skip_range, skip_crossed, min_px, max_px, atr_alpha, n);
    const bool fresh = skip_range[b] + skip_crossed[b] == skips;
    submit_market(b, actions, stop_loss, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, mid_x2,
                  fee_per_lot, pos, trade_log, trade_cap, lots_per_entry, n);
    passive_phase(b, snaps, cursor, episode_end, bid_px, ask_px, bid_sz, ask_sz, book_ts, pos, trade_log, min_px,
                  max_px, trade_cap, lots_per_entry, n, fresh, q);
    pnl_track(b, snaps, cursor, episode_end, mid_x2, pos, trade_log, rewards, dones, min_px, max_px, reward_scale,
              trade_cap);
}
