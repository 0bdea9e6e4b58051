"""The driver layer: CUDA through `cuda.bindings.driver`, or its numpy reference, behind one contract
(runtime.py; docs/internals/driver.md shows it in use)."""
from .backend import BACKENDS, BackendChoice, open_runtime, select_backend
from .errors import CudaError, DeviceOutOfMemory, check
from .kernel_spec import DevPtr, KernelSpec, f32, i32, i64, ptr, u32, u64
from .reference.registry import LaunchInfo, RefMem, reference
from .runtime import Runtime

__all__ = [
    "BACKENDS", "BackendChoice", "CudaError", "DeviceOutOfMemory", "DevPtr", "KernelSpec", "LaunchInfo", "RefMem", "Runtime",
    "check", "f32", "i32", "i64", "open_runtime", "ptr", "reference", "select_backend",
    "u32", "u64",
]
