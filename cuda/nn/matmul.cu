// Matrix products for the model's shapes (rows up to B*K = 524,288, widths up to a few hundred),
// in FP32 and on TF32 tensor cores (wmma 16x16x8, FP32 accumulate), plus the bias gradient,
// the split-sum that finishes a split reduction, and the activation backward.
//
// Layout: row-major everywhere. A linear layer is Y[M,N] = act(X[M,K] . W[K,N] + b[N]).
// Every output element is owned by exactly one thread and its sum runs over k in increasing
// order; split reductions write per-split partials that reduce_splits adds in split order.
// No atomics, so every kernel here gives the same bits on every run.
//
// GEMM kernels: grid (ceil(N/64), ceil(M/64), splits), block 256, static shared memory
// (FP32: 8.5 KB, TF32: 26 KB). Each block computes a 64x64 tile of C.
#include <mma.h>
#include "foxc/nn.h"

using namespace nvcuda;

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define TILE_PAD 4   // keeps wmma pointers 32-byte aligned and ldm a multiple of 4
#define GEMM_THREADS 256

struct GemmShape {
    float* C;
    const float* A;
    const float* B;
    const float* bias;  // nullptr: no bias
    int M, N, K;        // C is M x N; the sum runs over K
    int lda, ldb;       // row strides of A and B as stored
    int k_chunk;        // block z sums k in [z*k_chunk, min(K, (z+1)*k_chunk)) into C + z*M*N
    int act;
    int accumulate;     // 1: C += result
};

// Stage op(A)[m0.., k0..] as As[k][m] and op(B)[k0.., n0..] as Bs[k][n]; zero outside the
// matrices and past k_end, so padded products add exact zeros.
template <bool TA, bool TB, bool TF32>
__device__ __forceinline__ void stage_tiles(const GemmShape& g, int m0, int n0, int k0, int k_end,
                                            float (*As)[TILE_M + TILE_PAD], float (*Bs)[TILE_N + TILE_PAD])
{
    const int tid = threadIdx.x;
#pragma unroll
    for (int r = 0; r < (TILE_M * TILE_K) / GEMM_THREADS; ++r) {
        const int e = tid + r * GEMM_THREADS;
        int mm, kk;
        if (TA) { kk = e / TILE_M; mm = e % TILE_M; }  // stored [K][M]: neighbours walk m
        else    { mm = e / TILE_K; kk = e % TILE_K; }  // stored [M][K]: neighbours walk k
        const int m = m0 + mm, k = k0 + kk;
        float v = 0.0f;
        if (m < g.M && k < k_end)
            v = TA ? g.A[(long long)k * g.lda + m] : g.A[(long long)m * g.lda + k];
        As[kk][mm] = TF32 ? wmma::__float_to_tf32(v) : v;
    }
#pragma unroll
    for (int r = 0; r < (TILE_N * TILE_K) / GEMM_THREADS; ++r) {
        const int e = tid + r * GEMM_THREADS;
        int nn, kk;
        if (TB) { nn = e / TILE_K; kk = e % TILE_K; }  // stored [N][K]
        else    { kk = e / TILE_N; nn = e % TILE_N; }  // stored [K][N]
        const int n = n0 + nn, k = k0 + kk;
        float v = 0.0f;
        if (n < g.N && k < k_end)
            v = TB ? g.B[(long long)n * g.ldb + k] : g.B[(long long)k * g.ldb + n];
        Bs[kk][nn] = TF32 ? wmma::__float_to_tf32(v) : v;
    }
}

__device__ __forceinline__ void store_out(const GemmShape& g, int m, int n, float acc)
{
    if (m >= g.M || n >= g.N) return;
    float* c = g.C + (long long)blockIdx.z * g.M * g.N + (long long)m * g.N + n;
    float v = acc;
    if (g.bias) v += g.bias[n];
    v = nn_activate(v, g.act);
    if (g.accumulate) v += *c;
    *c = v;
}

// FP32: 16x16 threads, each owning rows ty+16i and columns tx+16j (i, j < 4) of the tile.
template <bool TA, bool TB>
__device__ __forceinline__ void gemm_f32(const GemmShape& g)
{
    __shared__ float As[TILE_K][TILE_M + TILE_PAD];
    __shared__ float Bs[TILE_K][TILE_N + TILE_PAD];
    const int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;
    const int k_begin = blockIdx.z * g.k_chunk;
    const int k_end = min(g.K, k_begin + g.k_chunk);
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

    for (int k0 = k_begin; k0 < k_end; k0 += TILE_K) {
        stage_tiles<TA, TB, false>(g, m0, n0, k0, k_end, As, Bs);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) store_out(g, m0 + ty + 16 * i, n0 + tx + 16 * j, acc[i][j]);
}

// TF32: 8 warps; warp w owns rows (w%4)*16.. and columns (w/4)*32.. (two 16x16 accumulators).
// The tile goes through shared memory so the epilogue can bound-check, add bias and activate.
template <bool TA, bool TB>
__device__ __forceinline__ void gemm_tf32(const GemmShape& g)
{
    __shared__ __align__(32) float As[TILE_K][TILE_M + TILE_PAD];
    __shared__ __align__(32) float Bs[TILE_K][TILE_N + TILE_PAD];
    __shared__ __align__(32) float Cs[TILE_M][TILE_N + TILE_PAD];
    const int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;
    const int k_begin = blockIdx.z * g.k_chunk;
    const int k_end = min(g.K, k_begin + g.k_chunk);
    const int warp = threadIdx.x / 32;
    const int wm = warp % 4, wn = warp / 4;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);

    for (int k0 = k_begin; k0 < k_end; k0 += TILE_K) {
        stage_tiles<TA, TB, true>(g, m0, n0, k0, k_end, As, Bs);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a;
            wmma::load_matrix_sync(a, &As[kk][wm * 16], TILE_M + TILE_PAD);
#pragma unroll
            for (int f = 0; f < 2; ++f) {
                wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
                wmma::load_matrix_sync(b, &Bs[kk][wn * 32 + f * 16], TILE_N + TILE_PAD);
                wmma::mma_sync(acc[f], a, b, acc[f]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int f = 0; f < 2; ++f)
        wmma::store_matrix_sync(&Cs[wm * 16][wn * 32 + f * 16], acc[f], TILE_N + TILE_PAD, wmma::mem_row_major);
    __syncthreads();
    for (int e = threadIdx.x; e < TILE_M * TILE_N; e += GEMM_THREADS) {
        const int mm = e / TILE_N, nn = e % TILE_N;
        store_out(g, m0 + mm, n0 + nn, Cs[mm][nn]);
    }
}

// linear_fwd_* — Y[M,N] = act(X[M,K] . W[K,N] + bias[N]). Reads X, W, bias; writes Y.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
linear_fwd_f32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
               const float* __restrict__ bias, int M, int K, int N, int act)
{
    const GemmShape g{Y, X, W, bias, M, N, K, K, N, K, act, 0};
    gemm_f32<false, false>(g);
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
linear_fwd_tf32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
                const float* __restrict__ bias, int M, int K, int N, int act)
{
    const GemmShape g{Y, X, W, bias, M, N, K, K, N, K, act, 0};
    gemm_tf32<false, false>(g);
}

// matmul_nt_* — C[M,N] (+)= A[M,K] . B[N,K]^T (dX = dY . W^T). Reads A, B (and C when
// accumulate is 1); writes C. C must not alias A or B.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
matmul_nt_f32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
              int M, int K, int N, int accumulate)
{
    const GemmShape g{C, A, B, nullptr, M, N, K, K, K, K, NN_ACT_IDENTITY, accumulate};
    gemm_f32<false, true>(g);
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
matmul_nt_tf32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
               int M, int K, int N, int accumulate)
{
    const GemmShape g{C, A, B, nullptr, M, N, K, K, K, K, NN_ACT_IDENTITY, accumulate};
    gemm_tf32<false, true>(g);
}

// matmul_tn_* — C[z][M,N] = sum over r in split z of A[r,m] * B[r,n] (dW = X^T . dY), where
// split z covers rows [z*r_chunk, min(R, (z+1)*r_chunk)) and grid.z is the number of splits.
// With one split C is the product itself; otherwise reduce_splits adds the partials in order.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
matmul_tn_f32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
              int R, int M, int N, int r_chunk)
{
    const GemmShape g{C, A, B, nullptr, M, N, R, M, N, r_chunk, NN_ACT_IDENTITY, 0};
    gemm_f32<true, false>(g);
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS)
matmul_tn_tf32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
               int R, int M, int N, int r_chunk)
{
    const GemmShape g{C, A, B, nullptr, M, N, R, M, N, r_chunk, NN_ACT_IDENTITY, 0};
    gemm_tf32<true, false>(g);
}

// reduce_splits — out[i] = partials[0][i] + partials[1][i] + ... in split order.
// 1-D grid of 256-thread blocks, grid-stride over n. out may alias partials[0].
extern "C" __global__ void reduce_splits(float* out, const float* partials, int splits, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float s = partials[i];
        for (int z = 1; z < splits; ++z) s += partials[(long long)z * n + i];
        out[i] = s;
    }
}

// column_sum_partial — partials[z][n] = sum of X[r][n] over r in split z (the bias gradient).
// Grid (ceil(N/32), splits), block (32, 8): lane y sums rows r_begin+y, r_begin+y+8, ... in
// order; lane 0 adds the 8 lane sums in order. Reads X[R,N]; writes partials[splits][N].
extern "C" __global__ void __launch_bounds__(256)
column_sum_partial(float* __restrict__ partials, const float* __restrict__ X, int R, int N, int r_chunk)
{
    __shared__ float lanes[8][33];
    const int n = blockIdx.x * 32 + threadIdx.x;
    const int r_begin = blockIdx.y * r_chunk;
    const int r_end = min(R, r_begin + r_chunk);
    float s = 0.0f;
    if (n < N)
        for (int r = r_begin + threadIdx.y; r < r_end; r += 8) s += X[(long long)r * N + n];
    lanes[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && n < N) {
        float t = lanes[0][threadIdx.x];
#pragma unroll
        for (int y = 1; y < 8; ++y) t += lanes[y][threadIdx.x];
        partials[(long long)blockIdx.y * N + n] = t;
    }
}

// act_bwd — dx[i] = dy[i] * act'(y[i]), the derivative through the activation's output y.
// 1-D grid of 256-thread blocks, grid-stride over n. dx may alias dy.
extern "C" __global__ void act_bwd(float* dx, const float* dy, const float* __restrict__ y, long long n, int act)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dx[i] = dy[i] * nn_activate_grad(y[i], act);
}
