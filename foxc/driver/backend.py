"""Picking a backend: `auto` takes CUDA when a usable device is there, else the numpy reference."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .cubins import pick_arch, required_driver_version
from .errors import CudaError, result_name

BACKENDS = ("auto", "cuda", "reference")


@dataclass(frozen=True)
class BackendChoice:
    name: str  # "cuda" or "reference"
    reason: str


def probe_cuda(ordinal: int = 0) -> tuple[bool, str]:
    """(usable, why): can foxc run its cubins on device `ordinal`? Touches no context."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        return False, f"cuda-python is not installed ({e})"
    try:
        (err,) = driver.cuInit(0)
    except RuntimeError:  # cuda.bindings raises this when libcuda cannot be loaded
        return False, "no NVIDIA driver library (libcuda.so) found"
    if err:
        return False, f"cuInit returned {result_name(err)}"
    err, count = driver.cuDeviceGetCount()
    if err or count == 0:
        return False, "the CUDA driver found no device"
    if ordinal >= count:
        return False, f"device {ordinal} requested but only {count} present"
    err, version = driver.cuDriverGetVersion()
    needed = required_driver_version()
    if err or version < needed:
        return False, (f"the driver supports CUDA {version // 1000}.{version % 1000 // 10}, the cubins need "
                       f"{needed // 1000}.{needed % 1000 // 10} (NVIDIA driver >= 580)")
    err, dev = driver.cuDeviceGet(ordinal)
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    try:
        arch = pick_arch(major, minor)
    except CudaError as e:
        return False, str(e)
    _, raw = driver.cuDeviceGetName(256, dev)
    name = raw.split(b"\0", 1)[0].decode()
    return True, f"found {name} (compute capability {major}.{minor}, cubins {arch})"


def select_backend(mode: str | None = None, ordinal: int = 0) -> BackendChoice:
    """Resolve `auto|cuda|reference` (default: $FOXC_BACKEND, else auto) to a backend and the reason for it."""
    mode = mode or os.environ.get("FOXC_BACKEND") or "auto"
    if mode not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got '{mode}'")
    if mode == "reference":
        return BackendChoice("reference", "the reference backend was asked for")
    ok, why = probe_cuda(ordinal)
    if ok:
        return BackendChoice("cuda", why)
    if mode == "cuda":
        raise CudaError(f"--backend cuda: no usable CUDA device: {why}")
    return BackendChoice("reference", f"no usable CUDA device ({why}); kernels run as their numpy references")


def open_runtime(mode: str | None = None, ordinal: int = 0):
    """A runtime on the chosen backend; `rt.backend` and `rt.reason` say which and why."""
    choice = select_backend(mode, ordinal)
    if choice.name == "cuda":
        from .cuda_runtime import CudaRuntime
        return CudaRuntime(ordinal, choice.reason)
    from .reference.runtime import ReferenceRuntime
    return ReferenceRuntime(choice.reason)
