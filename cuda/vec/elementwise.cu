// Elementwise utilities: fill, copy, scale, axpy.
// All: 1-D grid of 256-thread blocks, grid-stride loop over n elements, so any
// grid size is correct; the host picks min(ceil(n / 256), a few waves).

extern "C" __global__ void fill_f32(float* __restrict__ out, float value, long long n)
{
    // Writes out[0..n).
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = value;
}

extern "C" __global__ void fill_u32(unsigned int* __restrict__ out, unsigned int value, long long n)
{
    // Writes out[0..n).
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = value;
}

extern "C" __global__ void copy_f32(float* __restrict__ dst, const float* __restrict__ src, long long n)
{
    // Reads src[0..n), writes dst[0..n); the ranges must not overlap.
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" __global__ void scale_f32(float* __restrict__ x, float alpha, long long n)
{
    // x[i] *= alpha in place.
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        x[i] *= alpha;
}

extern "C" __global__ void axpy_f32(float* __restrict__ y, float alpha, const float* __restrict__ x, long long n)
{
    // y[i] = fma(alpha, x[i], y[i]): one rounding, which the reference reproduces in float64.
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = fmaf(alpha, x[i], y[i]);
}
