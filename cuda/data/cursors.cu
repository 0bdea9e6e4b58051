// Per-backtest cursors over the records, shared by the trainer's dataset, the simulator and the
// standalone environment: move each backtest on by one snapshot, or start its next episode.
#include "foxc/rng.h"

// cursor_advance — grid ceil(B / 256), block 256, one thread per backtest b < B.
// cursor[b] < 0 (unset) or cursor[b] >= episode_end[b] (the episode's last snapshot has been acted on):
// draws a new episode from rng[b] (xorshift32, never 0): i = (x * n_starts) >> 32, an exact
// multiply-shift since n_starts < 2^31; cursor[b] = starts[i] and episode_end[b] = segment_last[i]
// (the last row of that start's segment), cut to starts[i] + episode_len - 1 when episode_len > 0.
// Otherwise cursor[b] += 1.
// Reads starts, segment_last; reads and writes cursor, episode_end, rng.
extern "C" __global__ void cursor_advance(
    long long* __restrict__ cursor, long long* __restrict__ episode_end, unsigned int* __restrict__ rng,
    const long long* __restrict__ starts, const long long* __restrict__ segment_last, long long episode_len,
    int n_starts, int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B)
        return;
    const long long c = cursor[b];
    if (c >= 0 && c < episode_end[b]) {
        cursor[b] = c + 1;
        return;
    }
    const unsigned int x = xorshift32(rng[b]);
    rng[b] = x;
    const unsigned int i = (unsigned int)(((unsigned long long)x * (unsigned int)n_starts) >> 32);
    const long long start = starts[i], last = segment_last[i];
    cursor[b] = start;
    episode_end[b] = episode_len > 0 && start + episode_len - 1 < last ? start + episode_len - 1 : last;
}
