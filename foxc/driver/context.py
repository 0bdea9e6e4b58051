"""The device and its primary context."""
from __future__ import annotations

from .cubins import required_driver_version
from .errors import CudaError, check


def _driver():
    from cuda.bindings import driver
    return driver


class CudaContext:
    """Initialises the driver, retains device `ordinal`'s primary context and makes it current."""

    def __init__(self, ordinal: int = 0):
        drv = _driver()
        self._drv = drv
        check(drv.cuInit(0), "cuInit", "initialising the CUDA driver")
        count = check(drv.cuDeviceGetCount(), "cuDeviceGetCount", "counting CUDA devices")
        if count == 0:
            raise CudaError("the CUDA driver found no device", result="CUDA_ERROR_NO_DEVICE",
                            call="cuDeviceGetCount", doing="counting CUDA devices")
        if not 0 <= ordinal < count:
            raise CudaError(f"device {ordinal} requested but only {count} present")
        self.driver_version = check(drv.cuDriverGetVersion(), "cuDriverGetVersion", "reading the driver version")
        needed = required_driver_version()
        if self.driver_version < needed:
            raise CudaError(
                f"foxc's cubins were built with nvcc {needed // 1000}.{needed % 1000 // 10} and need a driver that "
                f"supports CUDA {needed // 1000}.{needed % 1000 // 10} (NVIDIA driver >= 580 for CUDA 13); "
                f"this driver supports CUDA {self.driver_version // 1000}.{self.driver_version % 1000 // 10}. "
                f"Upgrade the driver, or use --backend reference")
        self.device = check(drv.cuDeviceGet(ordinal), "cuDeviceGet", f"opening device {ordinal}")
        raw = check(drv.cuDeviceGetName(256, self.device), "cuDeviceGetName", "reading the device name")
        self.name = raw.split(b"\0", 1)[0].decode()
        attr = drv.CUdevice_attribute
        self.compute_capability = (
            check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device),
                  "cuDeviceGetAttribute", "reading the compute capability"),
            check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device),
                  "cuDeviceGetAttribute", "reading the compute capability"))
        self.multiprocessors = check(
            drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, self.device),
            "cuDeviceGetAttribute", "reading the multiprocessor count")
        self.ordinal = ordinal
        self.handle = check(drv.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain",
                            f"retaining the primary context of device {ordinal}")
        self._closed = False
        self.make_current()

    def make_current(self):
        check(self._drv.cuCtxSetCurrent(self.handle), "cuCtxSetCurrent", "making foxc's context current")

    def synchronize(self, doing: str = "waiting for the device"):
        check(self._drv.cuCtxSynchronize(), "cuCtxSynchronize", doing)

    def describe(self) -> str:
        major, minor = self.compute_capability
        v = self.driver_version
        return f"{self.name} (sm_{major}{minor}, {self.multiprocessors} SMs, driver CUDA {v // 1000}.{v % 1000 // 10})"

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            self._drv.cuCtxSynchronize()
        finally:
            check(self._drv.cuDevicePrimaryCtxRelease(self.device), "cuDevicePrimaryCtxRelease",
                  "releasing the primary context")
