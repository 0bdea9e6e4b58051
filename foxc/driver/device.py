"""The one device probe: whether foxc can run its cubins on a CUDA device, and what that device is."""
from __future__ import annotations

from dataclasses import dataclass

from .cubins import pick_arch, required_driver_version
from .errors import CudaError, check


@dataclass(frozen=True)
class Device:
    ordinal: int
    handle: object  # the CUdevice
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    driver_version: int  # the CUDA version the driver supports, e.g. 13000
    arch: str  # the shipped cubin folder it loads, e.g. "sm_90"

    def describe(self) -> str:
        major, minor = self.compute_capability
        return (f"{self.name} (sm_{major}{minor}, {self.multiprocessors} SMs, "
                f"driver CUDA {_version(self.driver_version)}, cubins {self.arch})")


def device_attribute(handle, name: str) -> int:
    """CU_DEVICE_ATTRIBUTE_<name> of the CUdevice `handle`."""
    from cuda.bindings import driver
    return check(driver.cuDeviceGetAttribute(getattr(driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}"), handle),
                 "cuDeviceGetAttribute", f"reading {name}")


def _version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def device_count() -> int:
    """The CUDA devices the driver sees (CUDA_VISIBLE_DEVICES applied), else a CudaError saying why none can be."""
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise CudaError(f"cuda-python is not installed ({e})") from e
    try:
        initialised = driver.cuInit(0)
    except RuntimeError as e:  # cuda.bindings raises this when libcuda cannot be loaded
        raise CudaError("no NVIDIA driver library (libcuda.so) found") from e
    check(initialised, "cuInit", "initialising the CUDA driver")
    return check(driver.cuDeviceGetCount(), "cuDeviceGetCount", "counting CUDA devices")


def probe_device(ordinal: int = 0) -> Device:
    """Device `ordinal` when foxc can run its cubins on it, else a CudaError saying why. Creates no context."""
    count = device_count()
    from cuda.bindings import driver  # device_count has checked that it imports
    if count == 0:
        raise CudaError("the CUDA driver found no device", result="CUDA_ERROR_NO_DEVICE")
    if not 0 <= ordinal < count:
        raise CudaError(f"device {ordinal} requested but only {count} present")
    version = check(driver.cuDriverGetVersion(), "cuDriverGetVersion", "reading the driver version")
    needed = required_driver_version()
    if version < needed:
        raise CudaError(f"foxc's cubins were built with nvcc {_version(needed)} and need a driver that supports "
                        f"CUDA {_version(needed)} (NVIDIA driver >= 580 for CUDA 13); this driver supports CUDA "
                        f"{_version(version)}. Upgrade the driver, or use --backend reference")
    handle = check(driver.cuDeviceGet(ordinal), "cuDeviceGet", f"opening device {ordinal}")
    major = device_attribute(handle, "COMPUTE_CAPABILITY_MAJOR")
    minor = device_attribute(handle, "COMPUTE_CAPABILITY_MINOR")
    raw = check(driver.cuDeviceGetName(256, handle), "cuDeviceGetName", "reading the device name")
    return Device(ordinal, handle, raw.split(b"\0", 1)[0].decode(), (major, minor),
                  device_attribute(handle, "MULTIPROCESSOR_COUNT"), version, pick_arch(major, minor))
