// Episodes of the standalone environment: advance each backtest's cursor, or draw a new episode.
#include "foxc/lobsim.h"
#include "foxc/rng.h"

// episode_advance — 1-D grid of ceil(n / block) blocks, one thread per backtest b < n.
// dones[b] == 0: cursor[b] += 1. Otherwise draws a new episode from rng[b] (xorshift32, never 0):
// a segment s uniformly among n_segments, then, when the segment is longer than episode_len > 0,
// a start uniformly among its episode_len-long windows (else the whole segment); writes cursor[b],
// episode_end[b] (the episode's last snapshot) and rng[b]. Segment lengths are below 2^32
// (checked on the host), so the 32x32 -> 64-bit multiply-shift picks are exact.
extern "C" __global__ void episode_advance(
    long long* __restrict__ cursor, long long* __restrict__ episode_end, const float* __restrict__ dones,
    unsigned int* __restrict__ rng, const long long* __restrict__ seg_first, const long long* __restrict__ seg_last,
    long long episode_len, int n_segments, int n)
{
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n) return;
    if (dones[b] == 0.0f) {
        cursor[b] += 1;
        return;
    }
    unsigned int s = rng[b];
    const unsigned int seg = (unsigned int)(((unsigned long long)(s = xorshift32(s)) * (unsigned int)n_segments) >> 32);
    const long long first = seg_first[seg], last = seg_last[seg];
    const long long span = last - first + 1;
    long long start = first, end = last;
    if (episode_len > 0 && span > episode_len) {
        const unsigned long long windows = (unsigned long long)(span - episode_len + 1);
        start = first + (long long)(((unsigned long long)(s = xorshift32(s)) * windows) >> 32);
        end = start + episode_len - 1;
    }
    rng[b] = s;
    cursor[b] = start;
    episode_end[b] = end;
}
