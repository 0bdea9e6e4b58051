"""Picking a backend: `auto` takes CUDA when a usable device is there (`device.probe_device`), else the numpy
reference."""
from __future__ import annotations

import os
from dataclasses import dataclass

from .device import Device, probe_device
from .errors import CudaError
from .runtime import Runtime

BACKENDS = ("auto", "cuda", "reference")


@dataclass(frozen=True)
class BackendChoice:
    name: str  # "cuda" or "reference"
    reason: str
    device: Device | None = None  # the probed device, for the CUDA backend


def select_backend(mode: str | None = None, ordinal: int = 0) -> BackendChoice:
    """Resolve `auto|cuda|reference` (default: $FOXC_BACKEND, else auto) to a backend and the reason for it."""
    mode = mode or os.environ.get("FOXC_BACKEND") or "auto"
    if mode not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got '{mode}'")
    if mode == "reference":
        return BackendChoice("reference", "the reference backend was asked for")
    try:
        device = probe_device(ordinal)
    except CudaError as e:
        if mode == "cuda":
            raise CudaError(f"--backend cuda: no usable CUDA device: {e}") from e
        return BackendChoice("reference", f"no usable CUDA device ({e}); kernels run as their numpy references")
    return BackendChoice("cuda", f"found {device.describe()}", device)


def open_runtime(mode: str | None = None, ordinal: int = 0) -> Runtime:
    """A runtime on the chosen backend; `rt.backend` and `rt.reason` say which and why."""
    choice = select_backend(mode, ordinal)
    if choice.name == "cuda":
        from .cuda_runtime import CudaRuntime
        return CudaRuntime(ordinal, choice.reason, choice.device)
    from .reference.runtime import ReferenceRuntime  # numpy's runtime, loaded when chosen, as CUDA's is
    return ReferenceRuntime(choice.reason)
