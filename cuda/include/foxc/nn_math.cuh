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

// x rounded to TF32 the way the tensor cores take it (cvt.rna: nearest, ties away from zero), as the
// bits of an mma operand; as a float, it is the rounded value.
__device__ __forceinline__ unsigned int nn_tf32(float x)
{
    unsigned int u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
}

// d += a . b on the tensor cores: m16n8k8, TF32 operands, FP32 accumulation. Fragments (PTX ISA), with
// g = lane / 4 and q = lane % 4: a = {A[g][q], A[g+8][q], A[g][q+4], A[g+8][q+4]} of A[16][8],
// b = {B[q][g], B[q+4][g]} of B[8][8], d = {D[g][2q], D[g][2q+1], D[g+8][2q], D[g+8][2q+1]} of D[16][8].
__device__ __forceinline__ void nn_mma_tf32(float (&d)[4], const unsigned int (&a)[4], const unsigned int (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
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

// The sum of s over a block of THREADS threads by a fixed shared-memory tree (the same order on every
// run), returned to every thread; part: THREADS floats of the caller's shared memory.
template <int THREADS>
__device__ __forceinline__ float nn_block_sum(float* part, float s)
{
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    return part[0];
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
