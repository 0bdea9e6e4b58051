"""Elementwise device utilities (cuda/vec/elementwise.cu) and their numpy references."""
from __future__ import annotations

import numpy as np

from .driver import KernelSpec, Runtime, f32, i64, ptr, reference, u32

MODULE = "vec/elementwise"
BLOCK = 256
MAX_BLOCKS = 4096  # grid-stride loops cover the rest; a few waves on any current GPU

FILL_F32 = KernelSpec("fill_f32", MODULE, (ptr("out"), f32("value"), i64("n")), doc="out[i] = value")
FILL_U32 = KernelSpec("fill_u32", MODULE, (ptr("out"), u32("value"), i64("n")), doc="out[i] = value")
COPY_F32 = KernelSpec("copy_f32", MODULE, (ptr("dst"), ptr("src"), i64("n")), doc="dst[i] = src[i]")
SCALE_F32 = KernelSpec("scale_f32", MODULE, (ptr("x"), f32("alpha"), i64("n")), doc="x[i] *= alpha")
AXPY_F32 = KernelSpec("axpy_f32", MODULE, (ptr("y"), f32("alpha"), ptr("x"), i64("n")),
                      doc="y[i] = fma(alpha, x[i], y[i])")


def grid_for(n: int) -> int:
    return max(1, min((int(n) + BLOCK - 1) // BLOCK, MAX_BLOCKS))


def plan_elementwise(rt: Runtime, spec: KernelSpec, *args):
    """A launch plan for one of the kernels above; the element count is the last argument."""
    return rt.plan(spec, grid_for(args[-1]), BLOCK, args)


@reference(FILL_F32)
def _fill_f32(launch, out, value, n):
    out.f32(int(n))[:] = value


@reference(FILL_U32)
def _fill_u32(launch, out, value, n):
    out.u32(int(n))[:] = value


@reference(COPY_F32)
def _copy_f32(launch, dst, src, n):
    dst.f32(int(n))[:] = src.f32(int(n))


@reference(SCALE_F32)
def _scale_f32(launch, x, alpha, n):
    v = x.f32(int(n))
    v *= alpha


@reference(AXPY_F32)
def _axpy_f32(launch, y, alpha, x, n):
    yv = y.f32(int(n))
    # float64 holds alpha * x exactly, so this is fma's single rounding up to rare double-rounding ties
    yv[:] = (np.float64(alpha) * x.f32(int(n)).astype(np.float64) + yv.astype(np.float64)).astype(np.float32)
