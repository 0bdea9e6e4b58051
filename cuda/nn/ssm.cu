// The encoder's selective diagonal state-space scan over the K snapshots of a window.
//
// The input projection (linear_fwd_* in matmul.cu) gives z[K, B, 4D], time-major, with four
// pre-activations per channel d: value u = tanh(z[.., d]), decay a = sigmoid(z[.., D + d]),
// input gate i = sigmoid(z[.., 2D + d]) and output gate g = sigmoid(z[.., 3D + d]). Decay and
// input gate depend on the snapshot, which is what makes the scan selective:
//     s_t = a_t * s_{t-1} + i_t * u_t,  s_{-1} = 0,      y = g_{K-1} * s_{K-1}.
// Each (window b, channel d) is an independent sequential recurrence: one thread per pair.
#include "foxc/nn.h"

#define SCAN_CHUNK 8  // steps whose inputs are loaded together before the recurrence walks them

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
                const float u = tanhf(zu[c]);
                const float a = nn_sigmoid(za[c]);
                const float i = nn_sigmoid(zi[c]);
                dzt[0] = ds * i * (1.0f - u * u);
                dzt[D] = ds * sp[c] * a * (1.0f - a);
                dzt[2 * D] = ds * u * i * (1.0f - i);
                if (t < K - 1) dzt[3 * D] = 0.0f;
                ds *= a;
            }
        }
    }
}
