"""The encoder's selective scan (cuda/nn/ssm.cu): forward and reverse-scan backward.

z[K, B, 4D] (time-major, from the input projection) -> states[K, B, D] and y[B, D];
see `functional.ssm_scan` for the recurrence. `ssm_proj_scan_fwd` computes the FP32 input
projection inside the forward scan and writes the gates [u, a, i, g] for the backward (not z: the
backward then computes no transcendental), replacing linear_fwd_f32 + ssm_scan_fwd with one launch
and one fewer pass over z; `ssm_scan_bwd_dw` sums the input
projection's weight and bias gradients inside the reverse scan (dz never written), replacing
ssm_scan_bwd + matmul_tn_ones_f32 (reduce_grad_splits still adds its per-block partials). Each has a
TF32 form (`*_tf32`, taken with precision "tf32") whose projection products run on the tensor cores.
"""
from __future__ import annotations

import math

import numpy as np

from ..driver import KernelSpec, i32, ptr, reference
from . import functional as F
from .layout import PS_CHANNELS, PS_MAX_FEATURES, PS_THREADS, PS_WINDOWS

PS_SPREAD = 2  # blocks an SM of a forward scan whose grid fits one wave at that many (one_wave_spread)

MODULE = "nn/ssm"
BLOCK = 256
PARTS = 4

SSM_SCAN_FWD = KernelSpec("ssm_scan_fwd", MODULE, (ptr("states"), ptr("y"), ptr("z"), i32("K"), i32("B"), i32("D")),
                          doc="states[K,B,D], y[B,D] from z[K,B,4D]; one thread per (b, d)")
SSM_SCAN_BWD = KernelSpec("ssm_scan_bwd", MODULE,
                          (ptr("dz"), ptr("z"), ptr("states"), ptr("dy"), i32("K"), i32("B"), i32("D")),
                          doc="dz[K,B,4D] from dy[B,D] by the reverse scan; one thread per (b, d)")


def _proj_scan_fwd_spec(name, how):
    return KernelSpec(name, MODULE, (ptr("gates"), ptr("states"), ptr("y"), ptr("x"), ptr("W"), ptr("bias"),
                                     i32("K"), i32("B"), i32("D"), i32("F")),
                      doc=f"z = x W_in + b_in computed in the scan ({how}); its gates [K,B,4D], states, y")


def _scan_bwd_dw_spec(name, how):
    return KernelSpec(name, MODULE, (ptr("partials"), ptr("gates"), ptr("states"), ptr("dy"), ptr("x"), i32("K"),
                                     i32("B"), i32("D"), i32("F")),
                      doc=f"partials[ceil(B/PS_WINDOWS)][F+1][4D] of [x, 1]^T dz summed in the reverse scan ({how})")


# The fused kernels by precision: FP32 (z has linear_fwd_f32's bits) or TF32 tensor cores.
SSM_PROJ_SCAN_FWD = _proj_scan_fwd_spec("ssm_proj_scan_fwd", "FP32, the bits of linear_fwd_f32")
SSM_SCAN_BWD_DW = _scan_bwd_dw_spec("ssm_scan_bwd_dw", "FP32")
PROJ_SCAN_FWD = {"f32": SSM_PROJ_SCAN_FWD,
                 "tf32": _proj_scan_fwd_spec("ssm_proj_scan_fwd_tf32", "TF32 tensor cores")}
SCAN_BWD_DW = {"f32": SSM_SCAN_BWD_DW, "tf32": _scan_bwd_dw_spec("ssm_scan_bwd_dw_tf32", "TF32 tensor cores")}


def proj_scan_fits(D: int, F: int) -> bool:
    """Whether ssm_proj_scan_fwd / ssm_scan_bwd_dw take these shapes (channels in whole lanes,
    W_in or the features plus a ones column in shared memory)."""
    return D % PS_CHANNELS == 0 and 0 < F < PS_MAX_FEATURES


FUSED_MIN_PAIRS = 128 * 32 * 32  # (window, channel) pairs from which the fused kernels are faster


def proj_scan_fills_gpu(B: int, D: int) -> bool:
    """Whether the fused kernels are the faster choice: B*D (window, channel) pairs at least 128 blocks
    of 32 x 32. Measured on an H200 with blocks of 32 windows: the training step ran 2,012 steps/s
    fused against 2,639 unfused at B=256, and 1,823 fused against ~1,600 unfused at B=1,024 (with
    today's 16-window blocks the fused encoder is faster still there); B=512 was not measured and
    stays unfused."""
    return B * D >= FUSED_MIN_PAIRS


def bwd_dw_splits(B: int) -> int:
    """Partials of ssm_scan_bwd_dw: one per block row of PS_WINDOWS windows."""
    return -(-B // PS_WINDOWS)


def proj_scan_grid(B: int, D: int) -> tuple[int, int, int]:
    return D // PS_CHANNELS, -(-B // PS_WINDOWS), 1


def one_wave_spread(rt, grid) -> int | None:
    """PS_SPREAD when the grid's blocks fit in one wave at that many an SM, else None. The step's side lane
    (the replay) runs beside the forward scan; with room for three TF32 blocks an SM, the scheduler then
    stacked three on some SMs while others held one, and the scan ran as long as its fullest SM: at
    B = 1,024 (256 blocks, 132 SMs) the training step fell from ~4,140 to ~3,990 steps/s (H200, TF32) as
    soon as the replay lane got faster; capped at two it ran ~4,110. With more blocks than one wave holds,
    the third block hides latency instead (1,645 against 1,620 steps/s capped at B = 4,096)."""
    return PS_SPREAD if math.prod(grid) <= PS_SPREAD * rt.multiprocessors else None


def scan_grid(B: int, D: int) -> int:
    return -(-B * D // BLOCK)


@reference(SSM_SCAN_FWD)
def _ssm_scan_fwd(launch, states, y, z, K, B, D):
    K, B, D = int(K), int(B), int(D)
    s, out = F.ssm_scan(z.f32(K * B * PARTS * D).reshape(K, B, PARTS * D), D)
    states.f32(K * B * D).reshape(K, B, D)[...] = s
    y.f32(B * D).reshape(B, D)[...] = out


def _proj_scan_fwd(gates, states, y, x, W, bias, K, B, D, n_features, tf32: bool):
    """linear_fwd's reference (identity activation; TF32: the operands rounded as the tensor cores take
    them), then ssm_scan_fwd's; the gates' output-gate part is written at the last step only, as the
    kernels do."""
    K, B, D, nf = int(K), int(B), int(D), int(n_features)
    N = PARTS * D
    xv, wv = x.f32(K * B * nf).reshape(K * B, nf), W.f32(nf * N).reshape(nf, N)
    if tf32:
        xv, wv = F.round_tf32(xv), F.round_tf32(wv)
    zz = F.matmul32(xv, wv) + bias.f32(N)
    gv, gz = gates.f32(K * B * N).reshape(K, B, N), np.concatenate(F.ssm_parts(zz.reshape(K, B, N), D), axis=-1)
    gv[:, :, :3 * D] = gz[:, :, :3 * D]
    gv[K - 1, :, 3 * D:] = gz[K - 1, :, 3 * D:]
    s, out = F.ssm_scan(zz.reshape(K, B, N), D)
    states.f32(K * B * D).reshape(K, B, D)[...] = s
    y.f32(B * D).reshape(B, D)[...] = out


def _scan_bwd_dw(partials, gates, states, dy, x, K, B, D, n_features, tf32: bool):
    """ssm_scan_bwd's dz (from the gates), then per block of PS_WINDOWS windows [x, 1]^T dz over all its rows (t, b)
    (TF32: x and dz rounded as the tensor cores take them)."""
    K, B, D, nf = int(K), int(B), int(D), int(n_features)
    N = PARTS * D
    dz = F.ssm_scan_grad_gates(gates.f32(K * B * N).reshape(K, B, N), states.f32(K * B * D).reshape(K, B, D),
                               dy.f32(B * D).reshape(B, D), D)
    xa = np.concatenate([x.f32(K * B * nf).reshape(K, B, nf), np.ones((K, B, 1), np.float32)], axis=2)
    if tf32:
        xa, dz = F.round_tf32(xa), F.round_tf32(dz)
    splits = bwd_dw_splits(B)
    out = partials.f32(splits * (nf + 1) * N).reshape(splits, nf + 1, N)
    for s in range(splits):
        w = slice(s * PS_WINDOWS, min(B, (s + 1) * PS_WINDOWS))
        out[s] = F.matmul32(xa[:, w].reshape(-1, nf + 1).T, dz[:, w].reshape(-1, N))


def _register_fused(precision: str):
    @reference(PROJ_SCAN_FWD[precision])
    def _ssm_proj_scan_fwd(launch, gates, states, y, x, W, bias, K, B, D, n_features):
        _proj_scan_fwd(gates, states, y, x, W, bias, K, B, D, n_features, tf32=precision == "tf32")

    @reference(SCAN_BWD_DW[precision])
    def _ssm_scan_bwd_dw(launch, partials, gates, states, dy, x, K, B, D, n_features):
        _scan_bwd_dw(partials, gates, states, dy, x, K, B, D, n_features, tf32=precision == "tf32")


for _precision in PROJ_SCAN_FWD:  # "f32", "tf32"
    _register_fused(_precision)


@reference(SSM_SCAN_BWD)
def _ssm_scan_bwd(launch, dz, z, states, dy, K, B, D):
    K, B, D = int(K), int(B), int(D)
    zz = z.f32(K * B * PARTS * D).reshape(K, B, PARTS * D)
    dz.f32(K * B * PARTS * D).reshape(K, B, PARTS * D)[...] = F.ssm_scan_grad(
        zz, states.f32(K * B * D).reshape(K, B, D), dy.f32(B * D).reshape(B, D), D)


def plan_scan_fwd(rt, K: int, B: int, D: int, **args):
    """ssm_scan_fwd; its buffers by their parameter names."""
    return rt.plan(SSM_SCAN_FWD, scan_grid(B, D), BLOCK, dict(args, K=K, B=B, D=D))


def plan_proj_scan_fwd(rt, K: int, B: int, D: int, F: int, precision: str = "f32", **args):
    """ssm_proj_scan_fwd[_tf32]; its buffers by their parameter names."""
    if not proj_scan_fits(D, F):
        raise ValueError(f"ssm_proj_scan_fwd needs D % {PS_CHANNELS} == 0 and F < {PS_MAX_FEATURES} (D={D}, F={F})")
    grid = proj_scan_grid(B, D)
    return rt.plan(PROJ_SCAN_FWD[precision], grid, PS_THREADS, dict(args, K=K, B=B, D=D, F=F),
                   max_blocks_per_sm=one_wave_spread(rt, grid))


def plan_scan_bwd_dw(rt, K: int, B: int, D: int, F: int, precision: str = "f32", **args):
    """ssm_scan_bwd_dw[_tf32]; its buffers by their parameter names."""
    if not proj_scan_fits(D, F):
        raise ValueError(f"ssm_scan_bwd_dw needs D % {PS_CHANNELS} == 0 and F < {PS_MAX_FEATURES} (D={D}, F={F})")
    return rt.plan(SCAN_BWD_DW[precision], proj_scan_grid(B, D), PS_THREADS, dict(args, K=K, B=B, D=D, F=F))


def plan_scan_bwd(rt, K: int, B: int, D: int, **args):
    """ssm_scan_bwd; its buffers by their parameter names."""
    return rt.plan(SSM_SCAN_BWD, scan_grid(B, D), BLOCK, dict(args, K=K, B=B, D=D))
