// Matrix products for the model's shapes (rows up to B*K = 524,288, widths up to a few hundred),
// in FP32 and on TF32 tensor cores (mma.sync m16n8k8, FP32 accumulate), plus the bias gradient,
// the split-sum that finishes a split reduction, and the activation backward.
//
// Layout: row-major everywhere. A linear layer is Y[M,N] = act(X[M,K] . W[K,N] + b[N]).
// Every output element is owned by exactly one thread and its sum runs over k in increasing
// order; split reductions write per-split partials that reduce_grad_splits adds in split order.
// No atomics, so every kernel here gives the same bits on every run.
//
// GEMM kernels: grid (ceil(N/T), ceil(M/T), splits), each block a T x T tile of C: T = 64 (block 256;
// static shared memory FP32 8.5 KB, TF32 30 KB at most), T = 32 for the *_t32 kernels (FP32: block 256,
// 9 KB; TF32: block 128, 38 KB), 16 x 16 for linear_fwd_f32_t16 (block 256, 10 KB) and 64 x 16 for
// linear_fwd_f32_t16_tall (block 256, 23 KB).
#include "foxc/nn_math.cuh"

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define TILE_PAD 4   // keeps float4 rows 16-byte aligned
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
    int a_rows;         // rows of op(A) that exist (= M, or M - 1 with a ones row)
    int ones;           // 1: op(A) row a_rows is all ones (C row a_rows = column sums of op(B))
    int group;          // 1: blockIdx.z picks the layer (and split) of a group launch, else the split
    int split;          // a group launch's split (its block's z is the layer's, not the split's)
};

// The split a block computes: blockIdx.z, except in a group launch (linear_fwd_*_group,
// matmul_tn_ones_f32_t32_group), whose z also picks the layer.
__device__ __forceinline__ unsigned int split_of(const GemmShape& g) { return g.group ? (unsigned int)g.split : blockIdx.z; }

// Row blockIdx.z of a linear_fwd_*_group launch's table (NN_LG_FIELDS int64: Y, X, W, bias, M, K, N,
// act): the layer this block computes a tile of.
__device__ __forceinline__ GemmShape group_layer(const long long* __restrict__ layers)
{
    const long long* row = layers + (long long)blockIdx.z * NN_LG_FIELDS;
    const int M = (int)row[NN_LG_M], K = (int)row[NN_LG_K], N = (int)row[NN_LG_N];
    return GemmShape{reinterpret_cast<float*>(row[NN_LG_Y]), reinterpret_cast<const float*>(row[NN_LG_X]),
                     reinterpret_cast<const float*>(row[NN_LG_W]), reinterpret_cast<const float*>(row[NN_LG_BIAS]),
                     M, N, K, K, N, K, (int)row[NN_LG_ACT], 0, M, 0, 1, 0};
}

// The pass and split of a matmul_tn_ones_f32_t32_group block: the table's rows (NN_TG_FIELDS int64: C,
// A, B, R, M, N, r_chunk, z_begin) give each pass a run of z; block z computes split z - z_begin of the
// row whose run holds it.
__device__ __forceinline__ GemmShape group_pass(const long long* __restrict__ passes, int n_passes)
{
    int j = 0;
    while (j + 1 < n_passes && (long long)blockIdx.z >= passes[(j + 1) * NN_TG_FIELDS + NN_TG_Z_BEGIN]) ++j;
    const long long* row = passes + (long long)j * NN_TG_FIELDS;
    const int M = (int)row[NN_TG_M], N = (int)row[NN_TG_N];
    return GemmShape{reinterpret_cast<float*>(row[NN_TG_C]), reinterpret_cast<const float*>(row[NN_TG_A]),
                     reinterpret_cast<const float*>(row[NN_TG_B]), nullptr, M + 1, N, (int)row[NN_TG_R], M, N,
                     (int)row[NN_TG_R_CHUNK], NN_ACT_IDENTITY, 0, M, 1, 1, (int)(blockIdx.z - row[NN_TG_Z_BEGIN])};
}

// Whether a block of a group launch (sized for the group's largest layer) lies outside its layer.
__device__ __forceinline__ bool outside_layer(const GemmShape& g, int tile_m, int tile_n)
{
    return (int)blockIdx.y * tile_m >= g.M || (int)blockIdx.x * tile_n >= g.N;
}

// An operand element. A group launch's addresses come from its table, where the compiler cannot see they are
// read-only global memory (it would issue generic, uncached loads): say so. (The single-layer kernels' own
// __restrict__ parameters already give read-only loads; there g.group is a constant 0 and this folds away.)
__device__ __forceinline__ float operand(const GemmShape& g, const float* p) { return g.group ? __ldg(p) : *p; }

// The element of op(A) at (m, k), or 0 outside (a ones row gives 1 for k < k_end).
template <bool TA>
__device__ __forceinline__ float load_a(const GemmShape& g, int m, int k, int k_end)
{
    if (k >= k_end) return 0.0f;
    if (m < g.a_rows) return operand(g, TA ? g.A + (long long)k * g.lda + m : g.A + (long long)m * g.lda + k);
    return (g.ones && m == g.a_rows) ? 1.0f : 0.0f;
}

template <bool TB>
__device__ __forceinline__ float load_b(const GemmShape& g, int n, int k, int k_end)
{
    if (n >= g.N || k >= k_end) return 0.0f;
    return operand(g, TB ? g.B + (long long)n * g.ldb + k : g.B + (long long)k * g.ldb + n);
}

// Whether every row of a row-major matrix (leading dimension ld) starts 16-byte aligned.
__device__ __forceinline__ bool rows_aligned16(const float* p, int ld) { return ld % 4 == 0 && ((size_t)p & 15) == 0; }

__device__ __forceinline__ float4 operand4(const GemmShape& g, const float* p)
{
    const float4* p4 = reinterpret_cast<const float4*>(p);
    return g.group ? __ldg(p4) : *p4;
}

// Four neighbours along the stored matrix's contiguous index from op(A)'s (m, k): one 16-byte load when
// `vec` (rows 16-byte aligned) and all four lie inside, else load_a's element by element (zeros outside,
// the ones row). The same values either way.
template <bool TA>
__device__ __forceinline__ void load_a4(const GemmShape& g, int m, int k, int k_end, bool vec, float* v)
{
    const bool inside = TA ? (m + 3 < g.a_rows && k < k_end) : (m < g.a_rows && k + 3 < k_end);
    if (vec && inside) {
        const float4 x = operand4(g, TA ? g.A + (long long)k * g.lda + m : g.A + (long long)m * g.lda + k);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = load_a<TA>(g, TA ? m + j : m, TA ? k : k + j, k_end);
    }
}

template <bool TB>
__device__ __forceinline__ void load_b4(const GemmShape& g, int n, int k, int k_end, bool vec, float* v)
{
    const bool inside = TB ? (n < g.N && k + 3 < k_end) : (n + 3 < g.N && k < k_end);
    if (vec && inside) {
        const float4 x = operand4(g, TB ? g.B + (long long)n * g.ldb + k : g.B + (long long)k * g.ldb + n);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = load_b<TB>(g, TB ? n : n + j, TB ? k + j : k, k_end);
    }
}

// A thread's element r of a stage when it takes four neighbours (along the stored contiguous index) at a time.
template <int THREADS>
__device__ __forceinline__ int stage_elem(int r) { return 4 * ((int)threadIdx.x + (r / 4) * THREADS) + r % 4; }

// Element e of a BM x KT (A) or KT x BN (B) stage: (row in the tile, k in the tile),
// neighbours walking the stored matrix's contiguous index.
template <bool T, int W, int KT = TILE_K>
__device__ __forceinline__ void stage_index(int e, int& w, int& kk)
{
    if (T) { kk = e / W; w = e % W; }   // stored [K][W]: neighbours walk w
    else   { w = e / KT; kk = e % KT; }  // stored [W][K]: neighbours walk k
}

__device__ __forceinline__ void store_out(const GemmShape& g, int m, int n, float acc)
{
    if (m >= g.M || n >= g.N) return;
    float* c = g.C + (long long)split_of(g) * g.M * g.N + (long long)m * g.N + n;
    float v = acc;
    if (g.bias) v += operand(g, g.bias + n);
    v = nn_activate(v, g.act);
    if (g.accumulate) v += *c;
    *c = v;
}

// FP32, a BM x BN tile per block of (BM/TM)(BN/TN) threads: thread (tx, ty) owns rows ty*TM+i and
// columns tx*TN+j (i < TM, j < TN) and reads them from shared memory as one vector each. The
// next k-stage (KT deep) is loaded into registers while the current one is multiplied (one shared
// buffer, two barriers per stage), four neighbours at a time (one 16-byte load where rows align). Every output is one fmaf chain over k in increasing order,
// whatever the tiling, so every FP32 tiling gives the same bits.
template <int BM, int BN, int TM, int TN, int KT>
struct F32Tile {
    static constexpr int THREADS = (BM / TM) * (BN / TN);
    static constexpr int A_PER = BM * KT / THREADS;
    static constexpr int B_PER = BN * KT / THREADS;
};

template <bool TA, bool TB, int BM, int BN, int TM, int TN, int KT>
__device__ __forceinline__ void gemm_f32(const GemmShape& g)
{
    using T = F32Tile<BM, BN, TM, TN, KT>;
    static_assert((BM * KT) % T::THREADS == 0 && (BN * KT) % T::THREADS == 0, "stage split");
    __shared__ __align__(16) float As[KT][BM + TILE_PAD];
    __shared__ __align__(16) float Bs[KT][BN + TILE_PAD];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int k_begin = split_of(g) * g.k_chunk;
    const int k_end = min(g.K, k_begin + g.k_chunk);
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    // The next stage's operands, four neighbours at a time (16-byte loads where rows are aligned).
    static_assert(T::A_PER % 4 == 0 && T::B_PER % 4 == 0, "whole vectors per thread");
    const bool va = rows_aligned16(g.A, g.lda), vb = rows_aligned16(g.B, g.ldb);
    float ra[T::A_PER], rb[T::B_PER];
    auto fetch = [&](int k0) {
#pragma unroll
        for (int r = 0; r < T::A_PER; r += 4) {
            int mm, kk;
            stage_index<TA, BM, KT>(stage_elem<T::THREADS>(r), mm, kk);
            load_a4<TA>(g, m0 + mm, k0 + kk, k_end, va, &ra[r]);
        }
#pragma unroll
        for (int r = 0; r < T::B_PER; r += 4) {
            int nn, kk;
            stage_index<!TB, BN, KT>(stage_elem<T::THREADS>(r), nn, kk);
            load_b4<TB>(g, n0 + nn, k0 + kk, k_end, vb, &rb[r]);
        }
    };
    fetch(k_begin);
    for (int k0 = k_begin; k0 < k_end; k0 += KT) {
#pragma unroll
        for (int r = 0; r < T::A_PER; ++r) {
            int mm, kk;
            stage_index<TA, BM, KT>(stage_elem<T::THREADS>(r), mm, kk);
            As[kk][mm] = ra[r];
        }
#pragma unroll
        for (int r = 0; r < T::B_PER; ++r) {
            int nn, kk;
            stage_index<!TB, BN, KT>(stage_elem<T::THREADS>(r), nn, kk);
            Bs[kk][nn] = rb[r];
        }
        __syncthreads();
        if (k0 + KT < k_end) fetch(k0 + KT);  // the next stage's loads fly while this one is multiplied
#pragma unroll
        for (int kk = 0; kk < KT; ++kk) {
            float a[TM], b[TN];
            load_vec<TM>(a, &As[kk][ty * TM]);
            load_vec<TN>(b, &Bs[kk][tx * TN]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) store_out(g, m0 + ty * TM + i, n0 + tx * TN + j, acc[i][j]);
}

// TF32 on mma.sync (m16n8k8): a TILE x TILE output tile per block of WM x WN warps, warp (wm, wn) =
// (warp / WN, warp % WN) owning rows wm*(TILE/WM).. and columns wn*(TILE/WN).. (MT = TILE/WM/16 mma row
// tiles, NT = TILE/WN/8 column tiles). k over the block's split [k_begin, k_end) is staged KT deep by
// cp.async with STAGES stages in flight, so a product waits for global memory about once, not once a
// stage (these products are bound by latency and instruction count). Each stage keeps the stored
// matrices' contiguous dimension contiguous (op(A) as [m][k], or [k][m] when TA; op(B) as [n][k] for B^T,
// [k][n] for B), so a row whose address is 16-byte aligned (the model's rows of 128, 136, 256 floats) is
// copied 16 bytes at a time, others 4; padded strides make the fragment reads conflict-free. Operands are
// rounded to TF32 (cvt.rna) as the fragments are read; sums in FP32 on the tensor cores, each output's
// over k in increasing 8-steps whatever the tiling. Two tilings:
//   *_t32 (TG_*): 32x32, 4 warps, KT 32, 4 stages (38 KB): layers too small to fill the GPU with 64x64
//     tiles (the learner's layers at B = 1,024);
//   the 64x64 kernels (TM_*): 8 warps of 32x16, KT 16, 3 stages (30 KB at most), 4 blocks an SM (64
//     registers): 4 mma a k-step share each warp's fragment reads, where wmma's 16x16 tiles staged through
//     registers a k-step at a time were bound by instruction issue, and at 2 blocks an SM the group
//     forwards of B = 4,096 ran in 3 waves (4 stages, or 2 blocks an SM: 0.676 and 0.682 ms a step against
//     0.669 on an H200).
#define TG_TILE 32
#define TG_KT 32
#define TG_STAGES 4
#define TG_THREADS 128
#define TM_KT 16
#define TM_STAGES 3
#define TM_MIN_BLOCKS 4

// 4 bytes global -> shared without passing through registers; an invalid element is zero-filled.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid)
{
    const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}

// 16 bytes (4 floats) global -> shared, of which the first `n` (0..4) floats exist; the rest zero-filled.
// src must be 16-byte aligned when n > 0.
__device__ __forceinline__ void cp_async16(float* dst, const float* src, int n)
{
    const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(4 * n));
}

// Stage ROWS x COLS of a row-major matrix `src` (leading dimension ld) starting at (r0, c0), into
// dst[row][col] (row stride STRIDE words) with THREADS threads; rows from `rows` on and columns from
// `cols` on are zero. VEC: 16-byte copies (ld and src 16-byte aligned).
template <int ROWS, int COLS, int STRIDE, int THREADS, bool VEC>
__device__ __forceinline__ void stage_async(float* dst, const float* src, long long ld, int r0, int c0, int rows,
                                            int cols)
{
    if (VEC) {
        static_assert(ROWS * COLS % (4 * THREADS) == 0, "whole 16-byte copies a thread");
#pragma unroll
        for (int r = 0; r < ROWS * COLS / 4 / THREADS; ++r) {
            const int e = threadIdx.x + r * THREADS, row = e / (COLS / 4), col = (e % (COLS / 4)) * 4;
            const int n = r0 + row < rows ? min(max(cols - (c0 + col), 0), 4) : 0;
            cp_async16(dst + row * STRIDE + col, n > 0 ? src + (r0 + row) * ld + c0 + col : src, n);
        }
    } else {
#pragma unroll
        for (int r = 0; r < ROWS * COLS / THREADS; ++r) {
            const int e = threadIdx.x + r * THREADS, row = e / COLS, col = e % COLS;
            const bool ok = r0 + row < rows && c0 + col < cols;
            cp_async4(dst + row * STRIDE + col, ok ? src + (r0 + row) * ld + c0 + col : src, ok);
        }
    }
}

template <int TILE, int WM, int WN, int KT, int STAGES, bool TA, bool TB>
__device__ __forceinline__ void gemm_tf32_mma(const GemmShape& g)
{
    constexpr int THREADS = WM * WN * 32, MT = TILE / WM / 16, NT = TILE / WN / 8;
    static_assert(MT * WM * 16 == TILE && NT * WN * 8 == TILE && KT % 8 == 0, "the tiling");
    constexpr int KSTRIDE = KT + 4, WSTRIDE = TILE + 8;  // words per staged row: conflict-free fragment reads
    // op(A) as [m][k] ([k][m] when TA), op(B) as [n][k] when TB, else [k][n]
    constexpr int A_ROWS = TA ? KT : TILE, A_STRIDE = TA ? WSTRIDE : KSTRIDE;
    constexpr int B_ROWS = TB ? TILE : KT, B_STRIDE = TB ? KSTRIDE : WSTRIDE;
    __shared__ __align__(16) float As[STAGES][A_ROWS][A_STRIDE];
    __shared__ __align__(16) float Bs[STAGES][B_ROWS][B_STRIDE];
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    const int k_begin = split_of(g) * g.k_chunk;
    const int k_end = min(g.K, k_begin + g.k_chunk);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, q = lane % 4;
    const int wr = (warp / WN) * (MT * 16), wc = (warp % WN) * (NT * 8);  // the warp's first row and column
    const int stages = (k_end - k_begin + KT - 1) / KT;
    const bool a16 = rows_aligned16(g.A, g.lda), b16 = rows_aligned16(g.B, g.ldb);  // uniform
    auto issue = [&](int st) {
        const int k0 = k_begin + st * KT, buf = st % STAGES;
        float* as = &As[buf][0][0];
        float* bs = &Bs[buf][0][0];
        if (TA) {  // A stored [K][M]: rows k, m contiguous
            if (a16) stage_async<KT, TILE, A_STRIDE, THREADS, true>(as, g.A, g.lda, k0, m0, k_end, g.a_rows);
            else stage_async<KT, TILE, A_STRIDE, THREADS, false>(as, g.A, g.lda, k0, m0, k_end, g.a_rows);
        } else {  // A stored [M][K]: rows m, k contiguous
            if (a16) stage_async<TILE, KT, A_STRIDE, THREADS, true>(as, g.A, g.lda, m0, k0, g.a_rows, k_end);
            else stage_async<TILE, KT, A_STRIDE, THREADS, false>(as, g.A, g.lda, m0, k0, g.a_rows, k_end);
        }
        if (TB) {  // B stored [N][K]: rows n, k contiguous
            if (b16) stage_async<TILE, KT, B_STRIDE, THREADS, true>(bs, g.B, g.ldb, n0, k0, g.N, k_end);
            else stage_async<TILE, KT, B_STRIDE, THREADS, false>(bs, g.B, g.ldb, n0, k0, g.N, k_end);
        } else {  // B stored [K][N]: rows k, n contiguous
            if (b16) stage_async<KT, TILE, B_STRIDE, THREADS, true>(bs, g.B, g.ldb, k0, n0, k_end, g.N);
            else stage_async<KT, TILE, B_STRIDE, THREADS, false>(bs, g.B, g.ldb, k0, n0, k_end, g.N);
        }
    };
#pragma unroll
    for (int st = 0; st < STAGES; ++st) {
        if (st < stages) issue(st);
        asm volatile("cp.async.commit_group;\n" ::);  // empty groups too: one group per stage slot
    }
    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
    for (int st = 0; st < stages; ++st) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1));  // stage st has landed
        __syncthreads();
        const int buf = st % STAGES;
        auto a_at = [&](int m, int k) { return nn_tf32(TA ? As[buf][k][m] : As[buf][m][k]); };
        auto b_at = [&](int k, int n) { return nn_tf32(TB ? Bs[buf][n][k] : Bs[buf][k][n]); };
#pragma unroll
        for (int ks = 0; ks < KT / 8; ++ks) {
            const int k = ks * 8 + q;
            unsigned int a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const int m = wr + mt * 16 + gq;
                a[mt][0] = a_at(m, k);
                a[mt][1] = a_at(m + 8, k);
                a[mt][2] = a_at(m, k + 4);
                a[mt][3] = a_at(m + 8, k + 4);
            }
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int n = wc + nt * 8 + gq;
                const unsigned int b[2] = {b_at(k, n), b_at(k + 4, n)};
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) nn_mma_tf32(acc[mt][nt], a[mt], b);
            }
        }
        __syncthreads();  // every warp is done with this buffer
        if (st + STAGES < stages) issue(st + STAGES);
        asm volatile("cp.async.commit_group;\n" ::);
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int m = m0 + wr + mt * 16 + gq, n = n0 + wc + nt * 8 + 2 * q;
            store_out(g, m, n, acc[mt][nt][0]);
            store_out(g, m, n + 1, acc[mt][nt][1]);
            store_out(g, m + 8, n, acc[mt][nt][2]);
            store_out(g, m + 8, n + 1, acc[mt][nt][3]);
        }
}

// The two tilings (see above).
template <bool TB>
__device__ __forceinline__ void gemm_tf32_t32(const GemmShape& g)
{
    gemm_tf32_mma<TG_TILE, 2, 2, TG_KT, TG_STAGES, false, TB>(g);
}
template <bool TA, bool TB>
__device__ __forceinline__ void gemm_tf32(const GemmShape& g)
{
    static_assert(TILE_M == 64 && TILE_N == 64 && GEMM_THREADS == 256, "the 64x64 kernels: 8 warps");
    gemm_tf32_mma<64, 2, 4, TM_KT, TM_STAGES, TA, TB>(g);
}

extern "C" __global__ void __launch_bounds__(TG_THREADS)
linear_fwd_tf32_t32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
                    const float* __restrict__ bias, int M, int K, int N, int act)
{
    const GemmShape g{Y, X, W, bias, M, N, K, K, N, K, act, 0, M, 0};
    gemm_tf32_t32<false>(g);
}

extern "C" __global__ void __launch_bounds__(TG_THREADS)
linear_fwd_tf32_t32_group(const long long* __restrict__ layers)
{
    const GemmShape g = group_layer(layers);
    if (outside_layer(g, TG_TILE, TG_TILE)) return;
    gemm_tf32_t32<false>(g);
}

extern "C" __global__ void __launch_bounds__(TG_THREADS)
matmul_nt_tf32_t32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                   int M, int K, int N, int accumulate)
{
    const GemmShape g{C, A, B, nullptr, M, N, K, K, K, K, NN_ACT_IDENTITY, accumulate, M, 0};
    gemm_tf32_t32<true>(g);
}

// linear_fwd_* — Y[M,N] = act(X[M,K] . W[K,N] + bias[N]). Reads X, W, bias; writes Y.
// FP32 tilings (same bits from each): linear_fwd_f32, 64x64 tiles of 4x4 per thread (block 256);
// *_t32, 32x32 tiles of 2x2 per thread (block 256), for shapes with few 64x64 tiles;
// linear_fwd_f32_t16, 16x16 tiles of one output per thread, and *_t16_tall, 64x16 tiles of four
// neighbouring outputs of a row per thread (one output a thread reads two shared floats an FMA: tall
// layers were bound by it), k staged 64 deep (block 256), for outputs at most 16 wide (the heads' few
// logits), where a wider tile would idle most threads.
// Small tiles put more warps on each SM: these products are bound by latency, not FMAs.
// linear_fwd_*_group(layers) — the forwards of independent layers in one launch (the RL heads'):
// grid (tiles of the widest N, tiles of the tallest M, layers), block z computing a tile of layer z
// (row z of `layers`, NN_LG_FIELDS int64 each) with the tiling and arithmetic of the single-layer
// kernel of the same name, so every output has the same bits; blocks past their layer's edge return.
#define F32_SPEC(BM, BN, TM, TN, KT) F32Tile<BM, BN, TM, TN, KT>::THREADS
#define F32_LINEAR(SUFFIX, BM, BN, TM, TN, KT, MINB)                                                                 \
extern "C" __global__ void __launch_bounds__(F32_SPEC(BM, BN, TM, TN, KT), MINB)                                  \
linear_fwd_f32##SUFFIX(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,        \
                       const float* __restrict__ bias, int M, int K, int N, int act)                           \
{                                                                                                              \
    const GemmShape g{Y, X, W, bias, M, N, K, K, N, K, act, 0, M, 0};                                          \
    gemm_f32<false, false, BM, BN, TM, TN, KT>(g);                                                             \
}                                                                                                              \
extern "C" __global__ void __launch_bounds__(F32_SPEC(BM, BN, TM, TN, KT), MINB)                                  \
linear_fwd_f32##SUFFIX##_group(const long long* __restrict__ layers)                                           \
{                                                                                                              \
    const GemmShape g = group_layer(layers);                                                                   \
    if (outside_layer(g, BM, BN)) return;                                                                      \
    gemm_f32<false, false, BM, BN, TM, TN, KT>(g);                                                             \
}
#define F32_GRADS(SUFFIX, BM, BN, TM, TN, KT, MINB)                                                                  \
extern "C" __global__ void __launch_bounds__(F32_SPEC(BM, BN, TM, TN, KT), MINB)                                  \
matmul_nt_f32##SUFFIX(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,          \
                      int M, int K, int N, int accumulate)                                                     \
{                                                                                                              \
    const GemmShape g{C, A, B, nullptr, M, N, K, K, K, K, NN_ACT_IDENTITY, accumulate, M, 0};                  \
    gemm_f32<false, true, BM, BN, TM, TN, KT>(g);                                                              \
}                                                                                                              \
extern "C" __global__ void __launch_bounds__(F32_SPEC(BM, BN, TM, TN, KT), MINB)                                  \
matmul_tn_f32##SUFFIX(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,          \
                      int R, int M, int N, int r_chunk)                                                        \
{                                                                                                              \
    const GemmShape g{C, A, B, nullptr, M, N, R, M, N, r_chunk, NN_ACT_IDENTITY, 0, M, 0};                     \
    gemm_f32<true, false, BM, BN, TM, TN, KT>(g);                                                              \
}                                                                                                              \
extern "C" __global__ void __launch_bounds__(F32_SPEC(BM, BN, TM, TN, KT), MINB)                                  \
matmul_tn_ones_f32##SUFFIX(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,     \
                           int R, int M, int N, int r_chunk)                                                   \
{                                                                                                              \
    const GemmShape g{C, A, B, nullptr, M + 1, N, R, M, N, r_chunk, NN_ACT_IDENTITY, 0, M, 1};                 \
    gemm_f32<true, false, BM, BN, TM, TN, KT>(g);                                                              \
}

// matmul_tn_ones_f32_t32_group(passes, n_passes) — the dW + db passes of independent layers in one
// launch (32x32 tiles): each pass keeps its own r_chunk, so its partials have the bits of its own launch.
extern "C" __global__ void __launch_bounds__(F32_SPEC(32, 32, 2, 2, 32), 2)
matmul_tn_ones_f32_t32_group(const long long* __restrict__ passes, int n_passes)
{
    const GemmShape g = group_pass(passes, n_passes);
    if (outside_layer(g, 32, 32)) return;
    gemm_f32<true, false, 32, 32, 2, 2, 32>(g);
}

F32_LINEAR(, 64, 64, 4, 4, TILE_K, 2)
F32_GRADS(, 64, 64, 4, 4, TILE_K, 2)
F32_LINEAR(_t32, 32, 32, 2, 2, 32, 2)
F32_GRADS(_t32, 32, 32, 2, 2, 32, 2)
F32_LINEAR(_t16, 16, 16, 1, 1, 64, 4)
F32_LINEAR(_t16_tall, 64, 16, 1, 4, 64, 2)

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, TM_MIN_BLOCKS)
linear_fwd_tf32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
                const float* __restrict__ bias, int M, int K, int N, int act)
{
    const GemmShape g{Y, X, W, bias, M, N, K, K, N, K, act, 0, M, 0};
    gemm_tf32<false, false>(g);
}

extern "C" __global__ void __launch_bounds__(GEMM_THREADS, TM_MIN_BLOCKS)
linear_fwd_tf32_group(const long long* __restrict__ layers)
{
    const GemmShape g = group_layer(layers);
    if (outside_layer(g, TILE_M, TILE_N)) return;
    gemm_tf32<false, false>(g);
}

// matmul_nt_* — C[M,N] (+)= A[M,K] . B[N,K]^T (dX = dY . W^T). Reads A, B (and C when
// accumulate is 1); writes C. C must not alias A or B. Tilings as linear_fwd_*.
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, TM_MIN_BLOCKS)
matmul_nt_tf32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
               int M, int K, int N, int accumulate)
{
    const GemmShape g{C, A, B, nullptr, M, N, K, K, K, K, NN_ACT_IDENTITY, accumulate, M, 0};
    gemm_tf32<false, true>(g);
}

// matmul_tn_* — C[z][M,N] = sum over r in split z of A[r,m] * B[r,n] (dW = X^T . dY), where
// split z covers rows [z*r_chunk, min(R, (z+1)*r_chunk)) and grid.z is the number of splits.
// reduce_grad_splits adds the partials in split order (matmul.GradPartials).
// matmul_tn_ones_f32(_t32): the same with A given a column of ones: C[z] is (M+1) x N and its
// last row holds the split's column sums of B (the bias gradient in the same pass).
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, TM_MIN_BLOCKS)
matmul_tn_tf32(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
               int R, int M, int N, int r_chunk)
{
    const GemmShape g{C, A, B, nullptr, M, N, R, M, N, r_chunk, NN_ACT_IDENTITY, 0, M, 0};
    gemm_tf32<true, false>(g);
}

// reduce_grad_splits — every split dW + db pass of a backward reduced in one launch, after the
// last of them: the layers' partials (matmul_tn_ones_f32*, ssm_scan_bwd_dw) lie side by side in one
// workspace, and nothing between those passes and this launch reads the gradients (the optimizer's
// norm is their first reader). 1-D grid of blocks of up to 256 threads (matmul.REDUCE_BLOCK: 64),
// grid-stride over i < total, the entries' elements one after another. table (int64 [n_entries][NN_GS_FIELDS], n_entries <=
// NN_GRAD_SPLITS_MAX, copied to shared memory) row j: begin (entry j's first i), size ((M+1) x N:
// dW's M x N, then db's N), splits, partials (where its [splits][size] block starts in
// `partials`), n_main (M x N), out and tail (where dW and db start in `grad`). Element k = i - begin
// of entry j: s = partials[p + k] + partials[p + size + k] + ... in split order,
// written to grad[out + k] when k < n_main, else to grad[tail + k - n_main].
extern "C" __global__ void __launch_bounds__(256)
reduce_grad_splits(float* __restrict__ grad, const float* __restrict__ partials, const long long* __restrict__ table,
                   int n_entries, long long total)
{
    __shared__ long long tab[NN_GRAD_SPLITS_MAX * NN_GS_FIELDS];
    for (int e = threadIdx.x; e < n_entries * NN_GS_FIELDS; e += blockDim.x) tab[e] = table[e];
    __syncthreads();
    int j = 0;  // i only grows in this thread's loop, so its entry does too
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        while (j + 1 < n_entries && i >= tab[(j + 1) * NN_GS_FIELDS + NN_GS_BEGIN]) ++j;
        const long long* row = tab + j * NN_GS_FIELDS;
        const long long k = i - row[NN_GS_BEGIN], size = row[NN_GS_SIZE];
        const float* p = partials + row[NN_GS_PARTIALS] + k;
        const int splits = (int)row[NN_GS_SPLITS];
        float s = p[0];
        for (int z = 1; z < splits; ++z) s += p[(long long)z * size];  // in split order
        if (k < row[NN_GS_N_MAIN]) grad[row[NN_GS_OUT] + k] = s;
        else grad[row[NN_GS_TAIL] + k - row[NN_GS_N_MAIN]] = s;
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
