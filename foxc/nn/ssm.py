"""The encoder's selective scan (cuda/nn/ssm.cu): forward and reverse-scan backward.

z[K, B, 4D] (time-major, from the input projection) -> states[K, B, D] and y[B, D];
see `functional.ssm_scan` for the recurrence.
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


def scan_grid(B: int, D: int) -> int:
    return -(-B * D // BLOCK)


@reference(SSM_SCAN_FWD)
def _ssm_scan_fwd(launch, states, y, z, K, B, D):
    K, B, D = int(K), int(B), int(D)
    s, out = F.ssm_scan(z.f32(K * B * PARTS * D).reshape(K, B, PARTS * D), D)
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


def plan_scan_bwd(rt, dz, z, states, dy, K: int, B: int, D: int):
    return rt.plan(SSM_SCAN_BWD, scan_grid(B, D), BLOCK, (dz, z, states, dy, K, B, D))
