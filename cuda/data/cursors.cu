// Per-backtest cursors over the records, shared by the trainer's dataset, the simulator and the
// standalone environment: move each backtest on by one snapshot, or start its next episode; and
// send the backtests in a range of rows to their episode's end (a resident slot about to be refilled).
#include "foxc/rng.h"

// cursor_advance — grid ceil(B / 256), block 256, one thread per backtest b < B.
// The draw table `spans` (int64, in device memory so that the host can change it between two replays
// of a captured graph): spans[0] = n_spans >= 1, spans[1] = n_starts (1 .. 2^31 - 1), then for each span
// j a triple at 2 + 3j: (end_j, first_j, last_j): the starts of span j are the rows first_j ..
// first_j + (end_j - end_{j-1}) - 1 (end_{-1} = 0, end_{n_spans-1} = n_starts) and last_j is the last row
// of their segment.
// cursor[b] < 0 (unset) or cursor[b] >= episode_end[b] (the episode's last snapshot has been acted on):
// draws a new episode from rng[b] (xorshift32, never 0): i = (x * n_starts) >> 32, an exact
// multiply-shift since n_starts < 2^31; the span j holding start i is the first with end_j > i (a binary
// search); cursor[b] = first_j + i - end_{j-1} and episode_end[b] = last_j, cut to cursor[b] +
// episode_len - 1 when episode_len > 0. Otherwise cursor[b] += 1.
// Reads spans; reads and writes cursor, episode_end, rng.
extern "C" __global__ void cursor_advance(
    long long* __restrict__ cursor, long long* __restrict__ episode_end, unsigned int* __restrict__ rng,
    const long long* __restrict__ spans, long long episode_len, int B)
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
    const long long n_spans = spans[0];
    const unsigned int n_starts = (unsigned int)spans[1];
    const long long i = (long long)(((unsigned long long)x * n_starts) >> 32);
    long long lo = 0, hi = n_spans - 1;
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (spans[2 + 3 * mid] > i)
            hi = mid;
        else
            lo = mid + 1;
    }
    const long long before = lo > 0 ? spans[2 + 3 * (lo - 1)] : 0;
    const long long start = spans[3 + 3 * lo] + (i - before), last = spans[4 + 3 * lo];
    cursor[b] = start;
    episode_end[b] = episode_len > 0 && start + episode_len - 1 < last ? start + episode_len - 1 : last;
}

// cursor_evict — grid ceil(B / 256), block 256, one thread per backtest b < B.
// A backtest whose cursor lies in rows lo .. hi - 1 ends its episode where it stands: episode_end[b] =
// cursor[b], so the simulator's next step forces a flat exit there and the advance after it draws a new
// episode (from a draw table that no longer holds those rows). Others are untouched.
// Reads cursor; reads and writes episode_end.
extern "C" __global__ void cursor_evict(
    const long long* __restrict__ cursor, long long* __restrict__ episode_end, long long lo, long long hi, int B)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B)
        return;
    const long long c = cursor[b];
    if (c >= lo && c < hi && c < episode_end[b])
        episode_end[b] = c;
}
