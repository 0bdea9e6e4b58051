// The encoder's selective diagonal state-space scan over the K snapshots of a window.
//
// The input projection (linear_fwd_* in matmul.cu) gives z[K, B, 4D], time-major, with four
// pre-activations per channel d: value u = tanh(z[.., d]), decay a = sigmoid(z[.., D + d]),
// input gate i = sigmoid(z[.., 2D + d]) and output gate g = sigmoid(z[.., 3D + d]). Decay and
// input gate depend on the snapshot, which is what makes the scan selective:
//     s_t = a_t * s_{t-1} + i_t * u_t,  s_{-1} = 0,      y = g_{K-1} * s_{K-1}.
// Each (window b, channel d) is an independent sequential recurrence: one thread per pair.
#include "foxc/nn_math.cuh"

#define SCAN_CHUNK 8  // steps whose inputs are loaded together before the recurrence walks them

// ssm_proj_scan_fwd's tiling (NN_PS_* in nn.h, from foxc/nn/layout.py).
#define PS_CHANNELS NN_PS_CHANNELS
#define PS_WINDOWS_PER_THREAD NN_PS_WINDOWS_PER_THREAD
#define PS_WARPS NN_PS_WARPS
#define PS_WINDOWS (PS_WINDOWS_PER_THREAD * PS_WARPS)  // windows per block (16)
#define PS_MAX_FEATURES NN_PS_MAX_FEATURES
#define PS_X_PER_THREAD (PS_MAX_FEATURES * PS_WINDOWS / (PS_WARPS * 32))
#define PS_STEPS NN_PS_STEPS
#define PS_XS_STRIDE (PS_WINDOWS * PS_STEPS + 4)       // words per feature row of the forward's xs
constexpr int PS_F_UNROLL = NN_PS_F_UNROLL;  // #pragma unroll takes a constant, not a macro

// The parameters of the fused forwards (FP32 and TF32) and of the fused backwards.
#define PROJ_SCAN_FWD_PARAMS                                                                                   \
    float* __restrict__ gates, float* __restrict__ states, float* __restrict__ y, const float* __restrict__ x,  \
    const float* __restrict__ W, const float* __restrict__ bias, int K, int B, int D, int F
#define SCAN_BWD_DW_PARAMS                                                                                     \
    float* __restrict__ partials, const float* __restrict__ gates, const float* __restrict__ states,           \
    const float* __restrict__ dy, const float* __restrict__ x, int K, int B, int D, int F

// The gates' sigmoid: FP32 kernels nn_sigmoid (expf, IEEE division); the TF32 kernels, whose products
// already carry TF32's 2^-11 rounding, the hardware exponential and approximate division (about 1e-6
// relative error, a quarter of the instructions).
template <bool FAST>
__device__ __forceinline__ float scan_sigmoid(float x)
{
    return FAST ? __fdividef(1.0f, 1.0f + __expf(-x)) : nn_sigmoid(x);
}

// One step of the recurrence of window b, channel d from its four pre-activations: advances s and,
// for a window that exists, writes the gates u, a, i (and g at the last step: the backward reads no
// other) to gt = &gates[t, b, d] (+ p*D), the state to st = &states[t, b, d] and, at the last step,
// y to yb = &y[b, d]. The fused backwards read the gates instead of recomputing them from z (three
// transcendentals an element fewer there; the same values, so the same bits). Both fused forwards;
// the callers step the pointers (the scans are bound by issue, and index arithmetic was most of it).
template <bool FAST>
__device__ __forceinline__ void scan_step(float& s, float zu, float za, float zi, float zg, float* __restrict__ gt,
                                          float* __restrict__ st, float* __restrict__ yb, bool last, bool exists,
                                          int D)
{
    const float u = tanhf(zu);
    const float a = scan_sigmoid<FAST>(za);
    const float i = scan_sigmoid<FAST>(zi);
    s = a * s + i * u;
    if (exists) {
        gt[0] = u;
        gt[D] = a;
        gt[2 * D] = i;
        *st = s;
        if (last) {
            const float g = scan_sigmoid<FAST>(zg);
            gt[3 * D] = g;
            *yb = g * s;
        }
    }
}

// Where a thread of the fused forwards writes: its first window's gates, state and y at the step it is
// at (the R windows of a thread are consecutive rows). `next()` moves to the following step: the
// pointers are carried from step to step, because index arithmetic recomputed per store was most of
// the scans' instructions and they are bound by issue.
struct ScanOut {
    float *g, *s, *y;
    long long gstep, sstep;  // elements from one step to the next
    int D;

    __device__ __forceinline__ ScanOut(float* gates, float* states, float* y_, int b, int d, int B, int D_)
        : g(gates + (long long)b * (NN_SSM_PARTS * D_) + d), s(states + (long long)b * D_ + d),
          y(y_ + (long long)b * D_ + d), gstep((long long)B * (NN_SSM_PARTS * D_)), sstep((long long)B * D_), D(D_)
    {
    }

    // This step of the thread's window r, from its pre-activations.
    template <bool FAST>
    __device__ __forceinline__ void step(float& s_r, float zu, float za, float zi, float zg, int r, bool last,
                                         bool exists) const
    {
        scan_step<FAST>(s_r, zu, za, zi, zg, g + r * (NN_SSM_PARTS * D), s + r * D, y + r * D, last, exists, D);
    }

    __device__ __forceinline__ void next()
    {
        g += gstep;
        s += sstep;
    }
};

// One step of the reverse scan: dz of the value, decay and input-gate parts from the carried ds, the
// step's gates and the previous state (ssm_scan_bwd's arithmetic); the output-gate part (dzg: nonzero
// at the last step only) passes through. Advances ds. Both fused backwards.
__device__ __forceinline__ float4 scan_step_grad(float& ds, float u, float a, float i, float s_prev, float dzg)
{
    float4 g4;
    g4.x = ds * i * (1.0f - u * u);
    g4.y = ds * s_prev * a * (1.0f - a);
    g4.z = ds * u * i * (1.0f - i);
    g4.w = dzg;
    ds *= a;
    return g4;
}

// Phase A of the fused backwards for one thread: lane = channel d, the warp's PS_WINDOWS_PER_THREAD
// windows from w0 = b0 + wl0. Walks the steps down from K - 1 with its first window's gates and previous
// state as cursors (as ScanOut does in the forwards), each window's row offsets from it clamped to the
// last window (loads stay in range; results for windows past B are masked by the caller), and keeps the
// carried ds and the output gate's dz (nonzero at the last step only).
struct ScanBwdLanes {
    const float *g, *s;  // &gates[t, w0, d] and &states[t - 1, w0, d] of the next step t to load
    int t;
    int go[PS_WINDOWS_PER_THREAD], so[PS_WINDOWS_PER_THREAD];
    float ds[PS_WINDOWS_PER_THREAD], dzg[PS_WINDOWS_PER_THREAD];
    long long zstep, sstep;
    int D;

    // The reverse scan's start from the last step's output gate, dy and state.
    __device__ __forceinline__ void start(const float* __restrict__ gates, const float* __restrict__ states,
                                          const float* __restrict__ dy, int w0, int d, int K, int B, int D_)
    {
        D = D_;
        t = K - 1;
        zstep = (long long)B * (NN_SSM_PARTS * D);
        sstep = (long long)B * D;
        g = gates + t * zstep + (long long)w0 * (NN_SSM_PARTS * D) + d;
        s = states + (t - 1) * sstep + (long long)w0 * D + d;
#pragma unroll
        for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) {
            const int w = min(r, B - 1 - w0);
            go[r] = w * (NN_SSM_PARTS * D);
            so[r] = w * D;
            const float gk = g[go[r] + 3 * D];
            const float dyv = dy[(long long)w0 * D + d + so[r]];
            ds[r] = dyv * gk;
            dzg[r] = dyv * s[sstep + so[r]] * gk * (1.0f - gk);
        }
    }

    // The next step's gates u, a, i and the previous state of every window (0 before the first step).
    __device__ __forceinline__ void load_next(float* u, float* a, float* i, float* s_prev)
    {
#pragma unroll
        for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) {
            const float* gr = g + go[r];
            u[r] = gr[0];
            a[r] = gr[D];
            i[r] = gr[2 * D];
            s_prev[r] = t > 0 ? s[so[r]] : 0.0f;
        }
        g -= zstep;
        s -= sstep;
        --t;
    }

    // Step t's dz of window r (zero for a window past B), advancing its ds.
    __device__ __forceinline__ float4 grad(int r, float u, float a, float i, float s_prev, int t, int K, bool exists)
    {
        const float4 g4 = scan_step_grad(ds[r], u, a, i, s_prev, t == K - 1 ? dzg[r] : 0.0f);
        return exists ? g4 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
};

// An element of the fused backwards' [x, 1] at window b (past B: 0) and column f (F: the ones column of
// the bias gradient; past it: 0), as an offset into a step's rows of x, or ONES / ZERO.
constexpr int X_ONES = -1, X_ZERO = -2;
__device__ __forceinline__ int x_or_one_at(int b, int f, int B, int F)
{
    if (b >= B) return X_ZERO;
    return f < F ? b * F + f : (f == F ? X_ONES : X_ZERO);
}
// The element at that place in step xt = x + t B F.
__device__ __forceinline__ float x_or_one(const float* __restrict__ xt, int at)
{
    return at >= 0 ? xt[at] : (at == X_ONES ? 1.0f : 0.0f);
}

// The fused forwards' staging of a step's features: the block's rows x[t, b0 .. b0 + W - 1, :] are one
// run of rows * F floats, read one float a thread per load, coalesced: thread tid reads the elements
// e = tid + 256 r (r < PS_X_PER_THREAD: window e / F, feature e % F) with e < rows * F. (A thread had read
// a run of one row's features: a warp's load touched eight rows, and the TF32 forward's staging made a
// third of its L1 traffic.) The kernels zero their staging once, so the places no element reaches
// (features past F, windows past B) read as 0.
struct StepRows {
    const float* x;  // &x[0, b0, 0]
    long long step;  // B * F: one step's rows
    int n, tid;      // n = rows * F

    __device__ __forceinline__ StepRows(const float* x_, int b0, int B, int F, int tid_)
        : x(x_ + (long long)b0 * F), step((long long)B * F), n(min(PS_WINDOWS, B - b0) * F), tid(tid_)
    {
    }
    __device__ __forceinline__ int element(int r) const { return tid + r * PS_WARPS * 32; }
    __device__ __forceinline__ bool has(int r) const { return element(r) < n; }
    // The elements of the STEPS steps from t0 (0 for none, or past the window's K steps).
    template <int STEPS>
    __device__ __forceinline__ void load(float (&v)[STEPS][PS_X_PER_THREAD], int t0, int K) const
    {
#pragma unroll
        for (int st = 0; st < STEPS; ++st)
#pragma unroll
            for (int r = 0; r < PS_X_PER_THREAD; ++r)
                v[st][r] = has(r) && t0 + st < K ? x[(t0 + st) * step + element(r)] : 0.0f;
    }
};

// The forwards' walk over the window in chunks of STEPS steps: `load(t0)` reads the features of the chunk
// from step t0 into registers (zero outside x) and `stage()` writes them to the kernel's shared layout.
// Chunk 0 is staged, then each chunk is computed (`chunk(t0)`) while the next chunk's features are
// loaded, which are staged after a barrier (two barriers a chunk). The first barrier also orders the
// kernel's zeroing of its staging before the first stage.
template <int STEPS, class Load, class Stage, class Chunk>
__device__ __forceinline__ void walk_chunks(int K, Load load, Stage stage, Chunk chunk)
{
    __syncthreads();  // the staging is zeroed
    load(0);
    stage();
    __syncthreads();
    for (int t0 = 0; t0 < K; t0 += STEPS) {
        if (t0 + STEPS < K) load(t0 + STEPS);
        chunk(t0);
        if (t0 + STEPS < K) {
            __syncthreads();  // every warp is done reading this chunk's features
            stage();
            __syncthreads();
        }
    }
}

// ssm_proj_scan_fwd — the input projection fused into the forward scan (FP32).
// grid (D/32, ceil(B/W)) with W = PS_WINDOWS (16), block 256; D must be a multiple of 32 and F < 48.
// Block (cx, by), warp w, lane l owns channel d = cx*32 + l and windows b = by*W + R*w + r (r < R =
// PS_WINDOWS_PER_THREAD, 2). Shared memory: the W_in columns of its 32 channels (the 4 parts of a
// channel as one float4, 24 KB) and the features of its W windows at PS_STEPS (4) steps (13 KB).
// The steps are walked in chunks of PS_STEPS: the projections of a chunk's steps do not depend on
// the recurrence, so each thread computes all 4 x R x 4 of them in one pass over the features (each
// W_in load feeds 32 FMAs instead of 8: the pass was bound by shared-memory loads), then advances the
// recurrence through the chunk. The next chunk's features are loaded into registers meanwhile (two
// barriers a chunk). Each pre-activation z[t, b, p*D + d] = (sum over f in increasing order of
// fmaf(x[t,b,f], W_in[f, p*D+d], .)) + b_in[p*D+d] — the same fmaf chain and bias add as
// linear_fwd_f32, so z has the same bits — and the recurrence is ssm_scan_fwd's. Reads x[K,B,F],
// W_in[F,4D], b_in[4D]; writes gates[K,B,4D] (u, a, i; the output gate g at step K-1 only: the
// backward reads no other), states[K,B,D], y[B,D]. Saves linear_fwd's z being read back by the scan
// (64 MB at K=32, B=1024, D=128) and one launch.
extern "C" __global__ void __launch_bounds__(PS_WARPS * 32, NN_PS_MIN_BLOCKS)
ssm_proj_scan_fwd(PROJ_SCAN_FWD_PARAMS)
{
    __shared__ __align__(16) float4 Ws[PS_MAX_FEATURES][PS_CHANNELS];
    __shared__ __align__(16) float xs[PS_MAX_FEATURES][PS_XS_STRIDE];  // xs[f][window * PS_STEPS + step]
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, tid = threadIdx.x;
    const int d = blockIdx.x * PS_CHANNELS + lane;
    const int b0 = blockIdx.y * PS_WINDOWS;
    const int D4 = NN_SSM_PARTS * D;
    for (int e = tid; e < F * PS_CHANNELS; e += PS_WARPS * 32) {
        const int f = e / PS_CHANNELS, c = blockIdx.x * PS_CHANNELS + e % PS_CHANNELS;
        const float* wf = W + (long long)f * D4 + c;
        Ws[f][e % PS_CHANNELS] = make_float4(wf[0], wf[D], wf[2 * D], wf[3 * D]);
    }
    const float bu = bias[d], ba = bias[D + d], bi = bias[2 * D + d], bg = bias[3 * D + d];
    float s[PS_WINDOWS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) s[r] = 0.0f;
    const int wl = warp * PS_WINDOWS_PER_THREAD;  // this thread's first window in the block
    ScanOut out(gates, states, y, b0 + wl, d, B, D);
    // Staging: element r of a step's rows (StepRows) goes to xs[f][window * PS_STEPS + step].
    for (int e = tid; e < PS_MAX_FEATURES * PS_XS_STRIDE; e += PS_WARPS * 32) (&xs[0][0])[e] = 0.0f;
    const StepRows rows(x, b0, B, F, tid);
    int place[PS_X_PER_THREAD];
#pragma unroll
    for (int r = 0; r < PS_X_PER_THREAD; ++r)
        place[r] = rows.element(r) % F * PS_XS_STRIDE + rows.element(r) / F * PS_STEPS;
    float rx[PS_STEPS][PS_X_PER_THREAD];
    auto load = [&](int t0) { rows.load(rx, t0, K); };
    auto stage = [&]() {
#pragma unroll
        for (int st = 0; st < PS_STEPS; ++st)
#pragma unroll
            for (int r = 0; r < PS_X_PER_THREAD; ++r)
                if (rows.has(r)) (&xs[0][0])[place[r] + st] = rx[st][r];
    };
    auto chunk = [&](int t0) {
        float acc[PS_STEPS][PS_WINDOWS_PER_THREAD][NN_SSM_PARTS];
#pragma unroll
        for (int st = 0; st < PS_STEPS; ++st)
#pragma unroll
            for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r)
#pragma unroll
                for (int p = 0; p < NN_SSM_PARTS; ++p) acc[st][r][p] = 0.0f;
#pragma unroll PS_F_UNROLL
        for (int f = 0; f < F; ++f) {
            const float4 w4 = Ws[f][lane];
            const float wv[NN_SSM_PARTS] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
            for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) {
                float xv[PS_STEPS];
                load_vec<PS_STEPS>(xv, &xs[f][(wl + r) * PS_STEPS]);
#pragma unroll
                for (int st = 0; st < PS_STEPS; ++st)
#pragma unroll
                    for (int p = 0; p < NN_SSM_PARTS; ++p) acc[st][r][p] = fmaf(xv[st], wv[p], acc[st][r][p]);
            }
        }
#pragma unroll
        for (int st = 0; st < PS_STEPS; ++st) {
            const int t = t0 + st;
            if (t < K) {
#pragma unroll
                for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r)
                    out.step<false>(s[r], acc[st][r][0] + bu, acc[st][r][1] + ba, acc[st][r][2] + bi,
                                    acc[st][r][3] + bg, r, t == K - 1, b0 + wl + r < B);
                out.next();
            }
        }
    };
    walk_chunks<PS_STEPS>(K, load, stage, chunk);
}

// ssm_scan_fwd — 1-D grid over B*D threads (256-thread blocks), each running the K steps of
// its (b, d) in order. The z values of SCAN_CHUNK steps are loaded before they are used, so the
// loads overlap instead of each waiting on the recurrence. Reads z[K,B,4D]; writes
// states[K,B,D] (kept for the backward) and y[B,D].
extern "C" __global__ void __launch_bounds__(256, 4)
ssm_scan_fwd(float* __restrict__ states, float* __restrict__ y, const float* __restrict__ z, int K, int B, int D)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * D) return;
    const int b = idx / D, d = idx % D;
    const long long zstep = (long long)B * NN_SSM_PARTS * D, sstep = (long long)B * D;
    const float* zb = z + (long long)b * NN_SSM_PARTS * D + d;
    float* sb = states + (long long)b * D + d;
    float s = 0.0f;
    for (int t0 = 0; t0 < K; t0 += SCAN_CHUNK) {
        float zu[SCAN_CHUNK], za[SCAN_CHUNK], zi[SCAN_CHUNK];
#pragma unroll
        for (int c = 0; c < SCAN_CHUNK; ++c) {
            if (t0 + c < K) {
                const float* zt = zb + (t0 + c) * zstep;
                zu[c] = zt[0];
                za[c] = zt[D];
                zi[c] = zt[2 * D];
            }
        }
#pragma unroll
        for (int c = 0; c < SCAN_CHUNK; ++c) {
            if (t0 + c < K) {
                const float u = tanhf(zu[c]);
                const float a = nn_sigmoid(za[c]);
                const float i = nn_sigmoid(zi[c]);
                s = a * s + i * u;
                sb[(t0 + c) * sstep] = s;
            }
        }
    }
    const float g = nn_sigmoid(zb[(K - 1) * zstep + 3 * D]);
    y[(long long)b * D + d] = g * s;
}

// ssm_scan_bwd — the reverse scan. Same launch shape as the forward; loads SCAN_CHUNK steps of
// z and states ahead the same way. Reads z, states and dy[B,D]; writes every element of
// dz[K,B,4D] (the output-gate part is zero before step K-1).
extern "C" __global__ void __launch_bounds__(256, 4)
ssm_scan_bwd(float* __restrict__ dz, const float* __restrict__ z, const float* __restrict__ states,
             const float* __restrict__ dy, int K, int B, int D)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * D) return;
    const int b = idx / D, d = idx % D;
    const long long zstep = (long long)B * NN_SSM_PARTS * D, sstep = (long long)B * D;
    const float* zb = z + (long long)b * NN_SSM_PARTS * D + d;
    float* dzb = dz + (long long)b * NN_SSM_PARTS * D + d;
    const float* sb = states + (long long)b * D + d;
    const float dyv = dy[(long long)b * D + d];
    const float g = nn_sigmoid(zb[(K - 1) * zstep + 3 * D]);
    float ds = dyv * g;
    dzb[(K - 1) * zstep + 3 * D] = dyv * sb[(K - 1) * sstep] * g * (1.0f - g);
    for (int t0 = K - 1; t0 >= 0; t0 -= SCAN_CHUNK) {
        float zu[SCAN_CHUNK], za[SCAN_CHUNK], zi[SCAN_CHUNK], sp[SCAN_CHUNK];
#pragma unroll
        for (int c = 0; c < SCAN_CHUNK; ++c) {
            const int t = t0 - c;
            if (t >= 0) {
                const float* zt = zb + t * zstep;
                zu[c] = zt[0];
                za[c] = zt[D];
                zi[c] = zt[2 * D];
                sp[c] = t > 0 ? sb[(t - 1) * sstep] : 0.0f;
            }
        }
#pragma unroll
        for (int c = 0; c < SCAN_CHUNK; ++c) {
            const int t = t0 - c;
            if (t >= 0) {
                float* dzt = dzb + t * zstep;
                const float4 g4 = scan_step_grad(ds, tanhf(zu[c]), nn_sigmoid(za[c]), nn_sigmoid(zi[c]), sp[c], 0.0f);
                dzt[0] = g4.x;
                dzt[D] = g4.y;
                dzt[2 * D] = g4.z;
                if (t < K - 1) dzt[3 * D] = 0.0f;
            }
        }
    }
}

// ssm_scan_bwd_dw — the reverse scan with the input projection's weight and bias gradients summed
// inside it (FP32), so dz is never written. grid (D/32, ceil(B/W)), block 256; D a multiple of 32,
// F <= 47. Block (cx, by), warp w, lane l: channel d = cx*32 + l and windows b = by*W + R*w + r
// (r < R), as in ssm_proj_scan_fwd. Step n = 0..K-1 walks t = K-1-n:
//   phase A: each thread turns its R windows' ds into dz[t, b, p*D + d] (p < 4; the arithmetic
//     of ssm_scan_bwd; zero for windows >= B) and puts them in shared dzs[n&1]; the block stages
//     x[t, b, f] of its W windows, with a ones column at f = F, in xs[n&1]. The next step's gates,
//     states and x are then loaded into registers, and one barrier follows.
//   phase B: warp w, lane l keeps the sums for features f = w + 8j (j < 8, f <= F) and columns
//     p*D + d (p < 4) and adds x[t, b, f] * dz[t, b, p*D + d] over the block's W windows in order.
// So each partial is one fmaf chain over (t descending, window ascending). Reads the forward's
// gates[K,B,4D] (u, a, i; g at K-1), states[K,B,D], dy[B,D], x[K,B,F]; writes
// partials[ceil(B/W)][F+1][4D] (row F: column sums of dz = the bias gradient), which
// reduce_grad_splits adds in split order into dW_in and db_in. Shared memory: 6 KB + 16 KB.
extern "C" __global__ void __launch_bounds__(PS_WARPS * 32, NN_PS_MIN_BLOCKS)
ssm_scan_bwd_dw(SCAN_BWD_DW_PARAMS)
{
    __shared__ __align__(16) float xs[2][PS_MAX_FEATURES][PS_WINDOWS];
    __shared__ __align__(16) float4 dzs[2][PS_WINDOWS][PS_CHANNELS];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, tid = threadIdx.x;
    const int d = blockIdx.x * PS_CHANNELS + lane;
    const int b0 = blockIdx.y * PS_WINDOWS;
    const int wl0 = warp * PS_WINDOWS_PER_THREAD;  // this thread's first window in the block
    const int D4 = NN_SSM_PARTS * D;
    ScanBwdLanes lanes;
    lanes.start(gates, states, dy, b0 + wl0, d, K, B, D);
    float pu[PS_WINDOWS_PER_THREAD], pa[PS_WINDOWS_PER_THREAD], pi[PS_WINDOWS_PER_THREAD],
        ps[PS_WINDOWS_PER_THREAD];
    float rx[PS_X_PER_THREAD];
    int xat[PS_X_PER_THREAD];  // element e = f * PS_WINDOWS + window of the block's [x, 1]
#pragma unroll
    for (int r = 0; r < PS_X_PER_THREAD; ++r) {
        const int e = tid + r * PS_WARPS * 32;
        xat[r] = x_or_one_at(b0 + e % PS_WINDOWS, e / PS_WINDOWS, B, F);
    }
    const long long xstep = (long long)B * F;
    const float* xt = x + (K - 1) * xstep;  // the next step's rows, walking down
    auto load_x = [&]() {
#pragma unroll
        for (int r = 0; r < PS_X_PER_THREAD; ++r) rx[r] = x_or_one(xt, xat[r]);
        xt -= xstep;
    };
    float acc[PS_MAX_FEATURES / PS_WARPS][NN_SSM_PARTS];
#pragma unroll
    for (int j = 0; j < PS_MAX_FEATURES / PS_WARPS; ++j)
#pragma unroll
        for (int p = 0; p < NN_SSM_PARTS; ++p) acc[j][p] = 0.0f;
    lanes.load_next(pu, pa, pi, ps);
    load_x();
    for (int n = 0; n < K; ++n) {
        const int t = K - 1 - n, buf = n & 1;
#pragma unroll
        for (int r = 0; r < PS_X_PER_THREAD; ++r) {
            const int e = tid + r * PS_WARPS * 32;
            xs[buf][e / PS_WINDOWS][e % PS_WINDOWS] = rx[r];
        }
#pragma unroll
        for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) {
            dzs[buf][wl0 + r][lane] = lanes.grad(r, pu[r], pa[r], pi[r], ps[r], t, K, b0 + wl0 + r < B);
        }
        if (t > 0) {  // the next step's inputs fly while this one is reduced
            lanes.load_next(pu, pa, pi, ps);
            load_x();
        }
        __syncthreads();
#pragma unroll 2
        for (int wg = 0; wg < PS_WINDOWS; wg += 4) {
            const float4 g0 = dzs[buf][wg][lane], g1 = dzs[buf][wg + 1][lane];
            const float4 g2 = dzs[buf][wg + 2][lane], g3 = dzs[buf][wg + 3][lane];
#pragma unroll
            for (int j = 0; j < PS_MAX_FEATURES / PS_WARPS; ++j) {
                const int f = warp + PS_WARPS * j;
                if (f <= F) {  // warp-uniform
                    const float4 x4 = *reinterpret_cast<const float4*>(&xs[buf][f][wg]);
                    acc[j][0] = fmaf(x4.x, g0.x, acc[j][0]);
                    acc[j][1] = fmaf(x4.x, g0.y, acc[j][1]);
                    acc[j][2] = fmaf(x4.x, g0.z, acc[j][2]);
                    acc[j][3] = fmaf(x4.x, g0.w, acc[j][3]);
                    acc[j][0] = fmaf(x4.y, g1.x, acc[j][0]);
                    acc[j][1] = fmaf(x4.y, g1.y, acc[j][1]);
                    acc[j][2] = fmaf(x4.y, g1.z, acc[j][2]);
                    acc[j][3] = fmaf(x4.y, g1.w, acc[j][3]);
                    acc[j][0] = fmaf(x4.z, g2.x, acc[j][0]);
                    acc[j][1] = fmaf(x4.z, g2.y, acc[j][1]);
                    acc[j][2] = fmaf(x4.z, g2.z, acc[j][2]);
                    acc[j][3] = fmaf(x4.z, g2.w, acc[j][3]);
                    acc[j][0] = fmaf(x4.w, g3.x, acc[j][0]);
                    acc[j][1] = fmaf(x4.w, g3.y, acc[j][1]);
                    acc[j][2] = fmaf(x4.w, g3.z, acc[j][2]);
                    acc[j][3] = fmaf(x4.w, g3.w, acc[j][3]);
                }
            }
        }
    }
    float* out = partials + (long long)blockIdx.y * (F + 1) * D4 + d;
#pragma unroll
    for (int j = 0; j < PS_MAX_FEATURES / PS_WARPS; ++j) {
        const int f = warp + PS_WARPS * j;
        if (f <= F) {
#pragma unroll
            for (int p = 0; p < NN_SSM_PARTS; ++p) out[(long long)f * D4 + p * D] = acc[j][p];
        }
    }
}

// The TF32 tensor-core forms of the fused kernels (--precision tf32): the same launch shape, grid
// (D/32, ceil(B/W)), block 256, and the same outputs, with the input projection's products on the
// tensor cores (mma m16n8k8: operands rounded to TF32, sums in FP32, so the gates differ from the
// FP32 kernels' in the last bits). Warp w of a block owns its channels 4w..4w+3 and every part of them:
// the n = 16 columns of its two 8-column mma tiles are (channel 4w + j/2, part j%2) in tile 0 and
// (channel 4w + j/2, part 2 + j%2) in tile 1, so that lane (g, q) = (lane/4, lane%4) ends each
// product holding all four parts of channel 4w + q for windows g and g + 8 of the block.
#define TC_KSTEPS (PS_MAX_FEATURES / 8)        // mma k-steps over the (padded) features
#define TC_XG_STRIDE (TC_KSTEPS * 16 + 16)     // ssm_proj_scan_fwd_tf32: words per row pair (16 mod 32: no conflicts)
#define TC_X_STRIDE (PS_MAX_FEATURES + 8)      // ssm_scan_bwd_dw_tf32: words per window row of staged features
#define TC_DZ_STRIDE (NN_SSM_PARTS * PS_CHANNELS + 8)  // words per window row of staged dz
#define TC_Z_STRIDE (NN_SSM_PARTS * PS_CHANNELS + 4)   // words per window row of staged products (conflict-free)
#define TC_MTILES (PS_MAX_FEATURES / 16)
#define TC_STEPS 2  // ssm_proj_scan_fwd_tf32: steps of features staged at a time
#define TC_AHEAD 2  // ssm_scan_bwd_dw_tf32: steps between loading a step's inputs and using them
static_assert(PS_WINDOWS == 16 && PS_CHANNELS == 4 * PS_WARPS && PS_MAX_FEATURES % 16 == 0,
              "the tensor-core scans: 16 windows (one mma row tile), 4 channels a warp, whole feature tiles");

// The column of the block's [parts x channels] tile that holds part p of channel c (c < 32): warp c/4's
// 16 columns, in its mma tiles' order.
__device__ __forceinline__ int tc_column(int c, int p) { return (c / 4) * 16 + (p / 2) * 8 + (c % 4) * 2 + (p % 2); }

// ssm_proj_scan_fwd_tf32 — ssm_proj_scan_fwd with the projection on the tensor cores. The W_in
// fragments of a warp's 16 columns stay in registers (2 tiles x TC_KSTEPS k-steps x 2); the block
// stages the features of TC_STEPS (2) steps at a time, rounded to TF32, in the order of the mma's A
// fragments (one 16-byte load a k-step). Per step each
// warp runs 2 x TC_KSTEPS mma and puts the products in zs[window][part * 32 + channel] (double
// buffered, one barrier a step); then, as in ssm_proj_scan_fwd, lane l advances the recurrence of
// channel l for the warp's two windows (scan_step with the fast sigmoid), so that every store of gates and states
// is one 128-byte row (written from the mma fragments, a store touched eight rows). Reads and writes what
// ssm_proj_scan_fwd does. Shared memory: 24 KB.
extern "C" __global__ void __launch_bounds__(PS_WARPS * 32, NN_PS_MIN_BLOCKS)
ssm_proj_scan_fwd_tf32(PROJ_SCAN_FWD_PARAMS)
{
    __shared__ __align__(16) float xs[TC_STEPS][8][TC_XG_STRIDE];
    __shared__ __align__(16) float zs[2][PS_WINDOWS][TC_Z_STRIDE];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, tid = threadIdx.x;
    const int g = lane / 4, q = lane % 4;
    const int b0 = blockIdx.y * PS_WINDOWS, c0 = blockIdx.x * PS_CHANNELS;
    unsigned int bw[2][TC_KSTEPS][2];
#pragma unroll
    for (int tile = 0; tile < 2; ++tile)
#pragma unroll
        for (int ks = 0; ks < TC_KSTEPS; ++ks)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int f = ks * 8 + q + 4 * h, part = 2 * tile + g % 2, c = c0 + warp * 4 + g / 2;
                bw[tile][ks][h] = nn_tf32(f < F ? W[(long long)f * (NN_SSM_PARTS * D) + part * D + c] : 0.0f);
            }
    const int d = c0 + lane;  // the recurrence: a lane per channel, the warp's two windows
    const int wl = warp * PS_WINDOWS_PER_THREAD;
    const float bu = bias[d], ba = bias[D + d], bi = bias[2 * D + d], bg = bias[3 * D + d];
    float s[PS_WINDOWS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) s[r] = 0.0f;
    const int col = warp * 4 + q;  // this lane's channel in the mma fragments
    ScanOut out(gates, states, y, b0 + wl, d, B, D);
    // Staging: element r of a step's rows (StepRows) goes, rounded to TF32, where the mma's A fragments
    // read it: windows g and g + 8 (g < 8) share a row pair, in which k-step ks, lane q holds
    // {x[g][8ks + q], x[g + 8][8ks + q], x[g][8ks + q + 4], x[g + 8][8ks + q + 4]} = a[0..3], one 16-byte load.
    for (int e = tid; e < TC_STEPS * 8 * TC_XG_STRIDE; e += PS_WARPS * 32) (&xs[0][0][0])[e] = 0.0f;
    const StepRows rows(x, b0, B, F, tid);
    int place[PS_X_PER_THREAD];
#pragma unroll
    for (int r = 0; r < PS_X_PER_THREAD; ++r) {
        const int w = rows.element(r) / F, f = rows.element(r) % F;
        place[r] = (w % 8) * TC_XG_STRIDE + (f / 8) * 16 + (f % 4) * 4 + w / 8 + 2 * ((f / 4) % 2);
    }
    float rx[TC_STEPS][PS_X_PER_THREAD];
    auto load = [&](int t0) { rows.load(rx, t0, K); };
    auto stage = [&]() {
#pragma unroll
        for (int st = 0; st < TC_STEPS; ++st)
#pragma unroll
            for (int r = 0; r < PS_X_PER_THREAD; ++r)
                if (rows.has(r)) (&xs[st][0][0])[place[r]] = __uint_as_float(nn_tf32(rx[st][r]));
    };
    auto chunk = [&](int t0) {
#pragma unroll 1
        for (int st = 0; st < TC_STEPS; ++st) {
            const int t = t0 + st;
            if (t < K) {
                float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
                for (int ks = 0; ks < TC_KSTEPS; ++ks) {
                    const float4 a4 = *reinterpret_cast<const float4*>(&xs[st][g][ks * 16 + q * 4]);
                    const unsigned int a[4] = {__float_as_uint(a4.x), __float_as_uint(a4.y), __float_as_uint(a4.z),
                                               __float_as_uint(a4.w)};
                    nn_mma_tf32(acc[0], a, bw[0][ks]);
                    nn_mma_tf32(acc[1], a, bw[1][ks]);
                }
                // acc[tile] = {(g, part 2 tile), (g, part 2 tile + 1), (g + 8, 2 tile), (g + 8, 2 tile + 1)}
                float(*zt)[TC_Z_STRIDE] = zs[t & 1];
#pragma unroll
                for (int tile = 0; tile < 2; ++tile) {
                    zt[g][(2 * tile) * PS_CHANNELS + col] = acc[tile][0];
                    zt[g][(2 * tile + 1) * PS_CHANNELS + col] = acc[tile][1];
                    zt[g + 8][(2 * tile) * PS_CHANNELS + col] = acc[tile][2];
                    zt[g + 8][(2 * tile + 1) * PS_CHANNELS + col] = acc[tile][3];
                }
                __syncthreads();  // zs[t & 1] is whole; zs[(t + 1) & 1] is free (read before the last barrier)
#pragma unroll
                for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) {
                    const float* zr = zt[wl + r];
                    out.step<true>(s[r], zr[lane] + bu, zr[PS_CHANNELS + lane] + ba, zr[2 * PS_CHANNELS + lane] + bi,
                                   zr[3 * PS_CHANNELS + lane] + bg, r, t == K - 1, b0 + wl + r < B);
                }
                out.next();
            }
        }
    };
    walk_chunks<TC_STEPS>(K, load, stage, chunk);
}

// ssm_scan_bwd_dw_tf32 — ssm_scan_bwd_dw with [x, 1]^T dz on the tensor cores. Phase A is the FP32
// kernel's (lane = channel, two windows a warp; scan_step_grad on the forward's gates),
// storing dz rounded to TF32 in dzs[window][tc_column] and the features with their ones column,
// rounded, in xs[window][f] (double buffered, one barrier a step); each step's gates, states and features
// are loaded TC_AHEAD (2) steps before it is reached. Phase B: warp w adds, per step, the product of
// the [48 x 16] block x^T (features by windows) and its [16 x 16] columns of dz into 3 x 2 mma
// accumulators. Writes partials[ceil(B/W)][F+1][4D] as ssm_scan_bwd_dw does (row F: the bias
// gradient's). Shared memory: 24 KB.
extern "C" __global__ void __launch_bounds__(PS_WARPS * 32, NN_PS_MIN_BLOCKS)
ssm_scan_bwd_dw_tf32(SCAN_BWD_DW_PARAMS)
{
    __shared__ __align__(16) float xs[2][PS_WINDOWS][TC_X_STRIDE];
    __shared__ __align__(16) float dzs[2][PS_WINDOWS][TC_DZ_STRIDE];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, tid = threadIdx.x;
    const int g = lane / 4, q = lane % 4;
    const int d = blockIdx.x * PS_CHANNELS + lane;  // phase A: a lane per channel
    const int b0 = blockIdx.y * PS_WINDOWS;
    const int wl0 = warp * PS_WINDOWS_PER_THREAD;
    ScanBwdLanes lanes;
    lanes.start(gates, states, dy, b0 + wl0, d, K, B, D);
    // The inputs of a step, loaded TC_AHEAD steps before it is reached.
    struct Ahead {
        float u[PS_WINDOWS_PER_THREAD], a[PS_WINDOWS_PER_THREAD], i[PS_WINDOWS_PER_THREAD], s[PS_WINDOWS_PER_THREAD];
        float x[PS_X_PER_THREAD];  // element e = window * PS_MAX_FEATURES + f; the ones column at f = F
    };
    int xat[PS_X_PER_THREAD];
#pragma unroll
    for (int r = 0; r < PS_X_PER_THREAD; ++r) {
        const int e = tid + r * PS_WARPS * 32;
        xat[r] = x_or_one_at(b0 + e / PS_MAX_FEATURES, e % PS_MAX_FEATURES, B, F);
    }
    const long long xstep = (long long)B * F;
    const float* xt = x + (K - 1) * xstep;  // the next step's rows, walking down with the lanes' cursors
    auto load = [&](Ahead& p) {
        lanes.load_next(p.u, p.a, p.i, p.s);
#pragma unroll
        for (int r = 0; r < PS_X_PER_THREAD; ++r) p.x[r] = x_or_one(xt, xat[r]);
        xt -= xstep;
    };
    float acc[TC_MTILES][2][4];
#pragma unroll
    for (int mt = 0; mt < TC_MTILES; ++mt)
#pragma unroll
        for (int tile = 0; tile < 2; ++tile)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mt][tile][i] = 0.0f;
    Ahead pre[TC_AHEAD];
#pragma unroll
    for (int k = 0; k < TC_AHEAD; ++k)
        if (K - 1 - k >= 0) load(pre[k]);  // steps K - 1, K - 2, ...
    for (int n0 = 0; n0 < K; n0 += TC_AHEAD) {
#pragma unroll
        for (int k = 0; k < TC_AHEAD; ++k) {
            const int n = n0 + k, t = K - 1 - n, buf = n & 1;
            if (n >= K) break;
#pragma unroll
            for (int r = 0; r < PS_X_PER_THREAD; ++r) {
                const int e = tid + r * PS_WARPS * 32;
                xs[buf][e / PS_MAX_FEATURES][e % PS_MAX_FEATURES] = __uint_as_float(nn_tf32(pre[k].x[r]));
            }
#pragma unroll
            for (int r = 0; r < PS_WINDOWS_PER_THREAD; ++r) {
                const float4 g4 = lanes.grad(r, pre[k].u[r], pre[k].a[r], pre[k].i[r], pre[k].s[r], t, K,
                                             b0 + wl0 + r < B);
                float* row = dzs[buf][wl0 + r];
                row[tc_column(lane, 0)] = __uint_as_float(nn_tf32(g4.x));
                row[tc_column(lane, 1)] = __uint_as_float(nn_tf32(g4.y));
                row[tc_column(lane, 2)] = __uint_as_float(nn_tf32(g4.z));
                row[tc_column(lane, 3)] = __uint_as_float(nn_tf32(g4.w));
            }
            if (t - TC_AHEAD >= 0) load(pre[k]);  // step t - TC_AHEAD: the loads walk down in order
            __syncthreads();
#pragma unroll
            for (int ks = 0; ks < PS_WINDOWS / 8; ++ks) {
                const int w0 = ks * 8 + q;  // this lane's windows in the k-step: w0 and w0 + 4
                unsigned int bfr[2][2];
#pragma unroll
                for (int tile = 0; tile < 2; ++tile) {
                    const int cz = warp * 16 + tile * 8 + g;
                    bfr[tile][0] = __float_as_uint(dzs[buf][w0][cz]);
                    bfr[tile][1] = __float_as_uint(dzs[buf][w0 + 4][cz]);
                }
#pragma unroll
                for (int mt = 0; mt < TC_MTILES; ++mt) {
                    const unsigned int a[4] = {__float_as_uint(xs[buf][w0][mt * 16 + g]),
                                               __float_as_uint(xs[buf][w0][mt * 16 + g + 8]),
                                               __float_as_uint(xs[buf][w0 + 4][mt * 16 + g]),
                                               __float_as_uint(xs[buf][w0 + 4][mt * 16 + g + 8])};
                    nn_mma_tf32(acc[mt][0], a, bfr[0]);
                    nn_mma_tf32(acc[mt][1], a, bfr[1]);
                }
            }
        }
    }
    // acc[mt][tile] = {D[g][2q], D[g][2q+1], D[g+8][2q], D[g+8][2q+1]}: rows are features mt*16 + g (+ 8),
    // columns 2q and 2q+1 of the tile are parts 2*tile and 2*tile + 1 of channel 4*warp + q.
    const int D4 = NN_SSM_PARTS * D;
    float* out = partials + (long long)blockIdx.y * (F + 1) * D4 + blockIdx.x * PS_CHANNELS + warp * 4 + q;
#pragma unroll
    for (int mt = 0; mt < TC_MTILES; ++mt)
#pragma unroll
        for (int tile = 0; tile < 2; ++tile)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int f = mt * 16 + g + 8 * (i / 2), p = 2 * tile + i % 2;
                if (f <= F) out[(long long)f * D4 + p * D] = acc[mt][tile][i];
            }
}
