// Device helpers of the learning kernels: activations and deterministic warp reductions.
#ifndef FOXC_NN_MATH_CUH
#define FOXC_NN_MATH_CUH
#include "foxc/nn.h"

__device__ __forceinline__ float nn_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ __forceinline__ float nn_activate(float x, int act)
{
    switch (act) {
    case NN_ACT_RELU: return fmaxf(x, 0.0f);
    case NN_ACT_TANH: return tanhf(x);
    case NN_ACT_SIGMOID: return nn_sigmoid(x);
    default: return x;
    }
}

// The derivative of the activation, expressed through its output y.
__device__ __forceinline__ float nn_activate_grad(float y, int act)
{
    switch (act) {
    case NN_ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;
    case NN_ACT_TANH: return 1.0f - y * y;
    case NN_ACT_SIGMOID: return y * (1.0f - y);
    default: return 1.0f;
    }
}

// v[0..N) = p[0..N) in one vector load (p aligned to 4N bytes): N = 1, 2 or 4.
template <int N>
__device__ __forceinline__ void load_vec(float (&v)[N], const float* p)
{
    if constexpr (N == 4) {
        const float4 t = *reinterpret_cast<const float4*>(p);
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else if constexpr (N == 2) {
        const float2 t = *reinterpret_cast<const float2*>(p);
        v[0] = t.x; v[1] = t.y;
    } else {
        static_assert(N == 1, "vector of 1, 2 or 4");
        v[0] = *p;
    }
}

// Butterfly warp reductions over all 32 lanes: every lane ends with the same bits (each step adds
// the same two values on both partner lanes), and the order is fixed, so results are deterministic.
__device__ __forceinline__ float nn_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float nn_warp_max(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif  // FOXC_NN_MATH_CUH
