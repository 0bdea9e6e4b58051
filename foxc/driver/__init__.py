"""The driver layer: CUDA through `cuda.bindings.driver`, or its numpy reference, behind one contract (api.py).

    rt = open_runtime("auto")          # rt.backend, rt.reason
    x = rt.device_array(n, np.float32, "x")
    plan = rt.plan(FILL_F32, grid, block, (x, 1.0, n))
    plan.launch(rt.stream)
    with rt.capture() as cap: plan.launch(rt.stream)
    cap.graph.launch(rt.stream)
"""
from .api import Runtime
from .backend import BACKENDS, BackendChoice, open_runtime, select_backend
from .errors import CudaError, DeviceOutOfMemory, check, out_of_memory
from .kernel_spec import DevPtr, KernelSpec, f32, i32, i64, ptr, u32, u64
from .reference.registry import LaunchInfo, RefMem, reference

__all__ = [
    "BACKENDS", "BackendChoice", "CudaError", "DeviceOutOfMemory", "DevPtr", "KernelSpec", "LaunchInfo", "RefMem", "Runtime",
    "check", "f32", "i32", "i64", "open_runtime", "out_of_memory", "ptr", "reference", "select_backend",
    "u32", "u64",
]
