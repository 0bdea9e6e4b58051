"""Modules loaded from prebuilt cubin bytes, and kernels verified against their declarations."""
from __future__ import annotations

import weakref

from .errors import CudaError, check
from .kernel_spec import KernelSpec
from .release import release
from .signatures import check_spec


def _driver():
    from cuda.bindings import driver
    return driver


class Module:
    """One cubin loaded with `cuModuleLoadData`; kernels taken from it keep it loaded."""

    def __init__(self, image: bytes, label: str):
        self.label = label
        self.handle = check(_driver().cuModuleLoadData(image), "cuModuleLoadData", f"loading cubin {label}")
        self._closed = False
        self._finalizer = weakref.finalize(self, release, "cuModuleUnload", self.handle)

    def kernel(self, spec: KernelSpec) -> "Kernel":
        check_spec(spec)  # by name and type; cuFuncGetParamInfo below checks offsets and sizes
        handle = check(_driver().cuModuleGetFunction(self.handle, spec.name.encode()), "cuModuleGetFunction",
                       f"looking up kernel {spec.name} in {self.label}")
        return Kernel(self, spec, handle)

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        drv = _driver()
        check(drv.cuCtxSynchronize(), "cuCtxSynchronize", f"waiting for the device before unloading {self.label}")
        check(drv.cuModuleUnload(self.handle), "cuModuleUnload", f"unloading {self.label}")


def verify_params(spec: KernelSpec, param_info) -> None:
    """Compare the declaration with what the cubin says; `param_info(i)` returns (offset, size) or None past the end."""
    for index in range(len(spec.params)):
        found = param_info(index)
        if found is None:
            raise CudaError(f"kernel {spec.name} ({spec.module}): {spec.describe_param(index)}, "
                            f"but the cubin's kernel has only {index} parameters")
        if tuple(found) != spec.layout[index]:
            raise CudaError(f"kernel {spec.name} ({spec.module}): {spec.describe_param(index)}, "
                            f"but the cubin has it at offset {found[0]}, size {found[1]}")
    extra = param_info(len(spec.params))
    if extra is not None:
        raise CudaError(f"kernel {spec.name} ({spec.module}): declared with {len(spec.params)} parameters, "
                        f"but the cubin's kernel has more (parameter {len(spec.params)} at offset {extra[0]})")


class Kernel:
    """A function handle whose parameter layout has been checked with `cuFuncGetParamInfo`."""

    def __init__(self, module: Module, spec: KernelSpec, handle):
        self.module = module  # keeps the cubin loaded
        self.spec = spec
        self.name = spec.name
        self.handle = handle
        verify_params(spec, self._param_info)

    def _param_info(self, index: int):
        drv = _driver()
        err, offset, size = drv.cuFuncGetParamInfo(self.handle, index)
        if err == drv.CUresult.CUDA_ERROR_INVALID_VALUE:
            return None
        check((err,), "cuFuncGetParamInfo", f"reading parameter {index} of kernel {self.name}")
        return int(offset), int(size)
