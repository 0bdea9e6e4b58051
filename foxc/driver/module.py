"""Cubins loaded as modules, and kernels checked against their declarations (CUDA backend)."""
from __future__ import annotations

from cuda.bindings import driver

from .cubins import check_spec, cubin_path, shipped_archs, verify_params
from .errors import CudaError, check
from .kernel_spec import KernelSpec
from .lifecycle import Owned
from .stream import Stream, release


class Module(Owned):
    """The cubin `cubins/<arch>/<name>.cubin`, loaded with `cuModuleLoadData`; its kernels keep it loaded."""

    def __init__(self, arch: str, name: str, stream: Stream):
        path = cubin_path(arch, name)
        if not path.is_file():
            raise CudaError(f"{path} is missing (shipped: {', '.join(shipped_archs())}); run tools/build_cubins.py")
        self.label = f"{arch}/{name}.cubin"
        self._handle = check(driver.cuModuleLoadData(path.read_bytes()), "cuModuleLoadData",
                             f"loading cubin {self.label}")
        self._own(release, "cuModuleUnload", self._handle, f"unloading {self.label}", stream)

    def kernel(self, spec: KernelSpec) -> Kernel:
        check_spec(spec)  # by name and type; the cubin's layout then checks offsets and sizes
        return Kernel(self, spec, check(driver.cuModuleGetFunction(self._handle, spec.name.encode()),
                                        "cuModuleGetFunction", f"looking up kernel {spec.name} in {self.label}"))


class Kernel:
    """A function whose parameter layout `cuFuncGetParamInfo` confirmed."""

    def __init__(self, module: Module, spec: KernelSpec, handle):
        self.name, self.spec = spec.name, spec
        self._module, self._handle = module, handle  # the module stays loaded while the kernel lives
        verify_params(spec, self._param_info, self._param_count())

    def _param_count(self) -> int | None:
        """The kernel's parameter count where the driver has cuFuncGetParamCount, else None."""
        try:
            err, n = driver.cuFuncGetParamCount(self._handle)
        except (AttributeError, RuntimeError):  # bindings without it, or a driver without it (580 has none)
            return None
        return int(n) if err == driver.CUresult.CUDA_SUCCESS else None

    def _param_info(self, index: int):
        err, offset, size = driver.cuFuncGetParamInfo(self._handle, index)
        if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
            return None
        check((err,), "cuFuncGetParamInfo", f"reading parameter {index} of kernel {self.name}")
        return int(offset), int(size)
