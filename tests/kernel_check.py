"""Helpers for checking a CUDA kernel against its numpy reference (used by the kernel tests).

    outs = run_kernel(rt, SPEC, grid, block, [x_host, 2.0, out_poisoned, n])
    # every numpy array in the argument list is uploaded to a fresh device array,
    # the kernel runs once, and the arrays come back in order (outputs included)
"""
from __future__ import annotations

import numpy as np

from foxc.driver import KernelSpec, Runtime


def poisoned(shape, dtype=np.float32) -> np.ndarray:
    """An output buffer full of values no kernel should leave behind: NaN for floats, all-ones bits otherwise."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dt)
    if dt.kind in "iu":
        return np.full(shape, -1, np.int64).astype(dt)
    out = np.empty(shape, dt)
    out.view(np.uint8)[...] = 0xFF
    return out


def upload_args(rt: Runtime, args, stream=None):
    """Device copies of the numpy arrays in `args` (scalars pass through); returns (launch args, arrays)."""
    launch_args, arrays = [], []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            dev = rt.device_array(a.shape, a.dtype, f"arg{i}")
            dev.upload(a, stream)
            launch_args.append(dev)
            arrays.append(dev)
        else:
            launch_args.append(a)
    return launch_args, arrays


def run_kernel(rt: Runtime, spec: KernelSpec, grid, block, args, shared_bytes: int = 0,
               repeat: int = 1) -> list[np.ndarray]:
    """Launch `spec` once (or `repeat` times) on fresh device copies of the array arguments; download them all."""
    launch_args, arrays = upload_args(rt, args)
    plan = rt.plan(spec, grid, block, launch_args, shared_bytes)
    for _ in range(repeat):
        plan.launch(rt.stream)
    rt.stream.synchronize()
    out = [a.download() for a in arrays]
    for a in arrays:
        a.close()
    return out


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """‖got − want‖ / ‖want‖ in float64; inf when shapes differ or got has NaN/Inf where want is finite."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if got.shape != want.shape or not np.array_equal(np.isfinite(got), np.isfinite(want)):
        return float("inf")
    mask = np.isfinite(want)
    num = np.linalg.norm((got - want)[mask])
    den = np.linalg.norm(want[mask])
    return float(num / den) if den > 0 else float(num)


def assert_close(got, want, rtol: float, what: str = "output"):
    err = rel_error(got, want)
    assert err <= rtol, f"{what}: relative error {err:.3e} exceeds {rtol:.1e}"
    return err
