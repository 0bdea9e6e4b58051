// Copies of state rows for the replay kernels. A plain strided loop (`for k = t; k < n; k += threads`)
// stores each float before it loads the next, so a row costs one memory latency per `threads` floats:
// five for a row of 132 floats by a warp. These load REPLAY_ROW_REGS floats a thread before storing
// any: one latency per threads * REPLAY_ROW_REGS floats (one for any row up to 256 floats by a warp).
#ifndef FOXC_REPLAY_ROWS_CUH
#define FOXC_REPLAY_ROWS_CUH

constexpr int REPLAY_ROW_REGS = 8;

// Rows a and b of n floats, copied by `threads` threads of which this is thread t (floats t, t + threads, ...):
// dst_a[k] = src_a[k], dst_b[k] = src_b[k]. A null src copies zeros; a null dst skips its row's stores (its
// loads still go out with the other row's, so deciding late whether to store costs no latency).
__device__ __forceinline__ void replay_copy_rows(float* __restrict__ dst_a, const float* __restrict__ src_a,
                                                 float* __restrict__ dst_b, const float* __restrict__ src_b,
                                                 int n, int t, int threads)
{
    for (int k0 = 0; k0 < n; k0 += threads * REPLAY_ROW_REGS) {
        float a[REPLAY_ROW_REGS], b[REPLAY_ROW_REGS];
#pragma unroll
        for (int r = 0; r < REPLAY_ROW_REGS; ++r) {
            const int k = k0 + r * threads + t;
            a[r] = src_a != nullptr && k < n ? src_a[k] : 0.0f;
            b[r] = src_b != nullptr && k < n ? src_b[k] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < REPLAY_ROW_REGS; ++r) {
            const int k = k0 + r * threads + t;
            if (k < n && dst_a != nullptr) dst_a[k] = a[r];
            if (k < n && dst_b != nullptr) dst_b[k] = b[r];
        }
    }
}

#endif  // FOXC_REPLAY_ROWS_CUH
