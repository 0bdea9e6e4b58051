"""The encoder's selective scan (cuda/nn/ssm.cu): forward and reverse-scan backward.

z[K, B, 4D] (time-major, from the input projection) -> states[K, B, D] and y[B, D];
see `functional.ssm_scan` for the recurrence. `ssm_proj_scan_fwd` computes the FP32 input
projection inside the forward scan (z still written, for the backward), replacing linear_fwd_f32
+ ssm_scan_fwd with one launch and one fewer pass over z.
"""
from __future__ import annotations

from ..driver import KernelSpec, i32, ptr, reference
from . import functional as F

MODULE = "nn/ssm"
BLOCK = 256
PARTS = 4

SSM_SCAN_FWD = KernelSpec("ssm_scan_fwd", MODULE, (ptr("states"), ptr("y"), ptr("z"), i32("K"), i32("B"), i32("D")),
                          doc="states[K,B,D], y[B,D] from z[K,B,4D]; one thread per (b, d)")
SSM_SCAN_BWD = KernelSpec("ssm_scan_bwd", MODULE,
                          (ptr("dz"), ptr("z"), ptr("states"), ptr("dy"), i32("K"), i32("B"), i32("D")),
                          doc="dz[K,B,4D] from dy[B,D] by the reverse scan; one thread per (b, d)")


SSM_PROJ_SCAN_FWD = KernelSpec(
    "ssm_proj_scan_fwd", MODULE,
    (ptr("z"), ptr("states"), ptr("y"), ptr("x"), ptr("W"), ptr("bias"), i32("K"), i32("B"), i32("D"), i32("F")),
    doc="z = x W_in + b_in [K,B,4D] computed in the scan (same bits as linear_fwd_f32), states, y")
PS_CHANNELS, PS_WINDOWS, PS_THREADS, PS_MAX_FEATURES = 32, 32, 256, 64  # cuda/nn/ssm.cu: PS_*


def proj_scan_fits(D: int, F: int) -> bool:
    """Whether ssm_proj_scan_fwd takes these shapes (channels in whole lanes, W_in in shared memory)."""
    return D % PS_CHANNELS == 0 and 0 < F <= PS_MAX_FEATURES


def proj_scan_grid(B: int, D: int) -> tuple[int, int, int]:
    return D // PS_CHANNELS, -(-B // PS_WINDOWS), 1


def scan_grid(B: int, D: int) -> int:
    return -(-B * D // BLOCK)


@reference(SSM_SCAN_FWD)
def _ssm_scan_fwd(launch, states, y, z, K, B, D):
    K, B, D = int(K), int(B), int(D)
    s, out = F.ssm_scan(z.f32(K * B * PARTS * D).reshape(K, B, PARTS * D), D)
    states.f32(K * B * D).reshape(K, B, D)[...] = s
    y.f32(B * D).reshape(B, D)[...] = out


@reference(SSM_PROJ_SCAN_FWD)
def _ssm_proj_scan_fwd(launch, z, states, y, x, W, bias, K, B, D, n_features):
    """linear_fwd_f32's reference (identity activation), then ssm_scan_fwd's."""
    K, B, D, nf = int(K), int(B), int(D), int(n_features)
    N = PARTS * D
    zz = F.matmul32(x.f32(K * B * nf).reshape(K * B, nf), W.f32(nf * N).reshape(nf, N)) + bias.f32(N)
    z.f32(K * B * N)[...] = zz.reshape(-1)
    s, out = F.ssm_scan(zz.reshape(K, B, N), D)
    states.f32(K * B * D).reshape(K, B, D)[...] = s
    y.f32(B * D).reshape(B, D)[...] = out


@reference(SSM_SCAN_BWD)
def _ssm_scan_bwd(launch, dz, z, states, dy, K, B, D):
    K, B, D = int(K), int(B), int(D)
    zz = z.f32(K * B * PARTS * D).reshape(K, B, PARTS * D)
    dz.f32(K * B * PARTS * D).reshape(K, B, PARTS * D)[...] = F.ssm_scan_grad(
        zz, states.f32(K * B * D).reshape(K, B, D), dy.f32(B * D).reshape(B, D), D)


def plan_scan_fwd(rt, states, y, z, K: int, B: int, D: int):
    return rt.plan(SSM_SCAN_FWD, scan_grid(B, D), BLOCK, (states, y, z, K, B, D))


def plan_proj_scan_fwd(rt, z, states, y, x, W, bias, K: int, B: int, D: int, F: int):
    if not proj_scan_fits(D, F):
        raise ValueError(f"ssm_proj_scan_fwd needs D % {PS_CHANNELS} == 0 and F <= {PS_MAX_FEATURES} (D={D}, F={F})")
    return rt.plan(SSM_PROJ_SCAN_FWD, proj_scan_grid(B, D), PS_THREADS, (z, states, y, x, W, bias, K, B, D, F))


def plan_scan_bwd(rt, dz, z, states, dy, K: int, B: int, D: int):
    return rt.plan(SSM_SCAN_BWD, scan_grid(B, D), BLOCK, (dz, z, states, dy, K, B, D))
