// xorshift32: the per-backtest and per-sample generator shared by the kernels and
// their numpy references (foxc/rng.py). A zero state would stay zero, so seeding
// never produces one.
#ifndef FOXC_RNG_H
#define FOXC_RNG_H

__device__ __forceinline__ unsigned int xorshift32(unsigned int x)
{
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

// A float in [0, 1) from the top 24 bits: exact in float32.
__device__ __forceinline__ float uniform24(unsigned int x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

#endif  // FOXC_RNG_H
