// Optimizer and parameter updates: AdamW, gradient-norm clipping (deterministic two-stage
// reduction) and the target soft update. Everything a step needs that changes between steps
// (learning rates, clip norm, tau, Adam's step count) is read on the device, so a captured
// graph replays the right values.
#include "foxc/isv_slots.h"
#include "foxc/nn_math.cuh"

#define REDUCE_THREADS 256

// One parameter's AdamW update (bias corrections bc1, bc2 of the tensor's step already formed):
// decoupled weight decay, bias-corrected moments.
__device__ __forceinline__ void adamw_element(float* __restrict__ theta, const float* __restrict__ grad,
                                              float* __restrict__ m, float* __restrict__ v, long long i, float scale,
                                              float bc1, float bc2, float lr, float beta1, float beta2, float eps,
                                              float wd)
{
    const float g = grad[i] * scale;
    const float mi = beta1 * m[i] + (1.0f - beta1) * g;
    const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float m_hat = mi / fmaxf(bc1, 1e-12f);
    const float v_hat = vi / fmaxf(bc2, 1e-12f);
    theta[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + wd * theta[i]);
}

// The global norm from the sumsq partials (thread t adds t, t+256, ... then a fixed tree), and
// clip[0] = clip_norm / norm when norm exceeds clip_norm = isv[ISV_GRAD_CLIP_NORM] > 0, else 1;
// clip[1] = norm. Called by all REDUCE_THREADS threads of one block. The partials are read from L2
// (__ldcg): other blocks of the launch wrote them.
__device__ __forceinline__ void clip_scale(float* __restrict__ clip, const float* partials, int n_partials,
                                           const float* __restrict__ isv)
{
    __shared__ float part[REDUCE_THREADS];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n_partials; i += REDUCE_THREADS) s += __ldcg(partials + i);
    const float sum = nn_block_sum<REDUCE_THREADS>(part, s);
    if (threadIdx.x == 0) {
        const float norm = sqrtf(sum);
        const float limit = isv[ISV_GRAD_CLIP_NORM];
        clip[0] = (limit > 0.0f && norm > limit) ? limit / norm : 1.0f;
        clip[1] = norm;
    }
}

// grad_norm_clip — grid G (SUMSQ_BLOCKS: part of the norm's definition, the order of its
// additions; keep it fixed), block 256.
// Block k adds grad[i]^2 over i in chunks of 256 starting at k*256 and striding G*256 (each thread
// in order), then a fixed shared-memory tree; writes partials[k]. Each block's thread 0 then bumps
// ticket[0] (an integer atomic) after a __threadfence(); the block drawing G - 1 sees every partial
// and runs clip_scale (clip[0] the gradient scale, clip[1] the norm), bumps steps[i] += 1 for
// i < n_steps (Adam's per-tensor step counts; n_steps 0 without them) and sets ticket[0] back to 0.
// Which block is last changes no value: the norm adds the partials in index order in every case.
// One launch instead of a partial-sum launch and a one-block launch; adamw_all, the next one,
// reads clip and steps. ticket[0] is 0 before and after.
extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)
grad_norm_clip(float* __restrict__ partials, float* __restrict__ clip, const float* __restrict__ grad, long long n,
               const float* __restrict__ isv, int* __restrict__ steps, int n_steps, unsigned int* __restrict__ ticket)
{
    __shared__ float part[REDUCE_THREADS];
    __shared__ bool s_last;
    float s = 0.0f;
    for (long long i = blockIdx.x * (long long)REDUCE_THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * REDUCE_THREADS)
        s += grad[i] * grad[i];
    const float sum = nn_block_sum<REDUCE_THREADS>(part, s);
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = sum;
        __threadfence();  // partials[k] is visible to every block before the ticket counts it
        s_last = atomicAdd(ticket, 1u) == gridDim.x - 1u;
        __threadfence();
    }
    __syncthreads();
    if (!s_last) return;
    clip_scale(clip, partials, gridDim.x, isv);
    for (int i = threadIdx.x; i < n_steps; i += REDUCE_THREADS) steps[i] += 1;
    if (threadIdx.x == 0) ticket[0] = 0u;
}

// adamw_all — every trained tensor of the flat parameter buffer in one launch, then the target
// soft update. 1-D grid-stride over i < n (256-thread blocks). table[3j..3j+2] = begin, end,
// lr_slot of tensor j (j < n_tensors <= NN_ADAMW_MAX_TENSORS, disjoint ranges): element i in
// [begin_j, end_j) gets AdamW with lr = isv[lr_slot_j], step count steps[j] (already
// incremented) and scale clip[0]; elements in no tensor
// (alignment padding) are not touched. Then, for target_begin <= i < target_begin + target_n,
// target[i - target_begin] += tau (theta[i] - target[..]), tau = isv[ISV_TAU], reading the theta
// this thread has just updated (so the target follows the new online weights).
extern "C" __global__ void __launch_bounds__(256)
adamw_all(float* __restrict__ theta, const float* __restrict__ grad, float* __restrict__ m, float* __restrict__ v,
          float* __restrict__ target, const float* __restrict__ clip, const int* __restrict__ steps,
          const int* __restrict__ table, int n_tensors, const float* __restrict__ isv, long long n,
          long long target_begin, long long target_n, float beta1, float beta2, float eps, float wd)
{
    __shared__ int tab[3 * NN_ADAMW_MAX_TENSORS];
    for (int e = threadIdx.x; e < 3 * n_tensors; e += blockDim.x) tab[e] = table[e];
    __syncthreads();
    const float scale = clip[0];
    const float tau = isv[ISV_TAU];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        int j = -1;
        for (int k = 0; k < n_tensors; ++k)
            if (i >= tab[3 * k] && i < tab[3 * k + 1]) j = k;
        if (j >= 0) {
            const int step = steps[j];
            adamw_element(theta, grad, m, v, i, scale, 1.0f - powf(beta1, (float)step),
                          1.0f - powf(beta2, (float)step), isv[tab[3 * j + 2]], beta1, beta2, eps, wd);
        }
        if (i >= target_begin && i < target_begin + target_n) {
            float* t = target + (i - target_begin);
            *t += tau * (theta[i] - *t);
        }
    }
}
