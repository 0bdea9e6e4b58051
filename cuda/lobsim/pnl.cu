// The simulator's accounts: mark to mid, rewards, closed-trade statistics, episode ends.
#include "foxc/lobsim.h"
#include "foxc/lobsim_book.cuh"
#include "foxc/snapshot.h"

// pnl_track — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n.
// Marks pos[b] to the mid the position will be held through: the next snapshot's
// (snaps[cursor[b] + 1]) when the episode goes on and that snapshot is usable (the same verdict
// book_update will give it), else the current book's (mid_x2[b]). Writes pos[b].equity,
// unrealized_pnl, peak_equity, trail_hwm; rewards[b] = (equity - previous equity) * reward_scale
// (float32 of the exact integer change: price moves, spread crossed and fees); when
// submit_market closed a trade, reads its record from trade_log and updates trades, wins,
// pnl_sum; at an episode end (cursor[b] >= episode_end[b]) sets dones[b] = 1 and starts the
// next episode's accounts (episodes, last_episode_pnl, episode_equity0, peak_equity), else dones[b] = 0.
extern "C" __global__ void pnl_track(
    const FoxcSnapshot* __restrict__ snaps, const long long* __restrict__ cursor,
    const long long* __restrict__ episode_end, const long long* __restrict__ mid_x2,
    FoxcPosition* __restrict__ pos, const FoxcTrade* __restrict__ trade_log,
    float* __restrict__ rewards, float* __restrict__ dones,
    long long min_px, long long max_px, float reward_scale, int trade_cap, int n)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    const long long c = cursor[b];
    const bool at_end = c >= episode_end[b];
    long long mark = mid_x2[b];
    if (!at_end) {
        const FoxcSnapshot* next = snaps + c + 1;
        if (snapshot_verdict(next, min_px, max_px) == FOXC_BOOK_OK) mark = next->bid_px[0] + next->ask_px[0];
    }
    FoxcPosition* p = pos + b;
    const int lots = p->lots;
    const long long value = ((long long)lots * mark) >> 1;  // mark is twice the mid
    const long long equity = p->cash + value;
    const long long unrealized = value - p->cost;
    rewards[b] = (float)((double)(equity - p->equity) * (double)reward_scale);
    long long peak = p->peak_equity > equity ? p->peak_equity : equity;
    p->equity = equity;
    p->unrealized_pnl = unrealized;
    const long long hwm = p->trail_hwm;
    p->trail_hwm = lots == 0 ? 0 : (hwm > unrealized ? hwm : unrealized);
    if (p->closed_pending != 0u) {
        const unsigned int k = p->trades;
        const long long net = trade_log[(long long)b * trade_cap + k % (unsigned int)trade_cap].pnl;
        p->trades = k + 1u;
        p->wins += net > 0 ? 1u : 0u;
        p->pnl_sum += net;
        p->closed_pending = 0u;
    }
    if (at_end) {
        p->episodes += 1u;
        p->last_episode_pnl = equity - p->episode_equity0;
        p->episode_equity0 = equity;
        peak = equity;
    }
    p->peak_equity = peak;
    dones[b] = at_end ? 1.0f : 0.0f;
}
