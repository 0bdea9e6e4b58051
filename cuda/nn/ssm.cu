// The encoder's selective diagonal state-space scan over the K snapshots of a window.
//
// The input projection (linear_fwd_* in matmul.cu) gives z[K, B, 4D], time-major, with four
// pre-activations per channel d: value u = tanh(z[.., d]), decay a = sigmoid(z[.., D + d]),
// input gate i = sigmoid(z[.., 2D + d]) and output gate g = sigmoid(z[.., 3D + d]). Decay and
// input gate depend on the snapshot, which is what makes the scan selective:
//     s_t = a_t * s_{t-1} + i_t * u_t,  s_{-1} = 0,      y = g_{K-1} * s_{K-1}.
// Each (window b, channel d) is an independent sequential recurrence: one thread per pair.
#include "foxc/nn.h"

// ssm_scan_fwd — 1-D grid over B*D threads (256-thread blocks), each running the K steps of
// its (b, d) in order. Reads z[K,B,4D]; writes states[K,B,D] (kept for the backward) and y[B,D].
extern "C" __global__ void __launch_bounds__(256)
ssm_scan_fwd(float* __restrict__ states, float* __restrict__ y, const float* __restrict__ z, int K, int B, int D)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * D) return;
    const int b = idx / D, d = idx % D;
    float s = 0.0f;
    for (int t = 0; t < K; ++t) {
        const float* zt = z + ((long long)t * B + b) * (NN_SSM_PARTS * D);
        const float u = tanhf(zt[d]);
        const float a = nn_sigmoid(zt[D + d]);
        const float i = nn_sigmoid(zt[2 * D + d]);
        s = a * s + i * u;
        states[((long long)t * B + b) * D + d] = s;
    }
    const float g = nn_sigmoid(z[((long long)(K - 1) * B + b) * (NN_SSM_PARTS * D) + 3 * D + d]);
    y[(long long)b * D + d] = g * s;
}

// ssm_scan_bwd — the reverse scan. Same launch shape as the forward. Reads z, states and
// dy[B,D]; writes every element of dz[K,B,4D] (the output-gate part is zero before step K-1).
extern "C" __global__ void __launch_bounds__(256)
ssm_scan_bwd(float* __restrict__ dz, const float* __restrict__ z, const float* __restrict__ states,
             const float* __restrict__ dy, int K, int B, int D)
{
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * D) return;
    const int b = idx / D, d = idx % D;
    const long long last = ((long long)(K - 1) * B + b);
    const float dyv = dy[(long long)b * D + d];
    const float g = nn_sigmoid(z[last * (NN_SSM_PARTS * D) + 3 * D + d]);
    float ds = dyv * g;
    dz[last * (NN_SSM_PARTS * D) + 3 * D + d] = dyv * states[last * D + d] * g * (1.0f - g);
    for (int t = K - 1; t >= 0; --t) {
        const long long row = (long long)t * B + b;
        const float* zt = z + row * (NN_SSM_PARTS * D);
        float* dzt = dz + row * (NN_SSM_PARTS * D);
        const float u = tanhf(zt[d]);
        const float a = nn_sigmoid(zt[D + d]);
        const float i = nn_sigmoid(zt[2 * D + d]);
        const float prev = t > 0 ? states[(row - B) * D + d] : 0.0f;
        dzt[d] = ds * i * (1.0f - u * u);
        dzt[D + d] = ds * prev * a * (1.0f - a);
        dzt[2 * D + d] = ds * u * i * (1.0f - i);
        if (t < K - 1) dzt[3 * D + d] = 0.0f;
        ds *= a;
    }
}
