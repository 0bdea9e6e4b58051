"""Launch plans: one kernel with its grid, block, shared memory and arguments checked once, at creation.

On CUDA the arguments are packed once into a persistent buffer, so a launch is one `cuLaunchKernel`
with a prebuilt `void**`.
"""
from __future__ import annotations

import ctypes

from .errors import raise_for
from .kernel_spec import convert_args, pack_slot
from .runtime import PlanBase


class PackedArgs:
    """The argument values in one persistent buffer, an 8-byte slot each, and the `void**` pointing into it."""

    def __init__(self, spec, args):
        self.values = convert_args(spec, args)  # DevPtrs keep their buffers alive
        n = max(len(self.values), 1)
        self.slots = ctypes.create_string_buffer(8 * n)
        packed = b"".join(pack_slot(p.kind, v) for p, v in zip(spec.params, self.values))
        ctypes.memmove(self.slots, packed, len(packed))
        base = ctypes.addressof(self.slots)
        self.pointers = (ctypes.c_void_p * n)(*(base + 8 * i for i in range(n)))
        self.address = ctypes.addressof(self.pointers)


class LaunchPlan(PlanBase):
    """The CUDA backend's plan."""

    def __init__(self, rt, kernel, grid, block, args, shared_bytes: int = 0):
        super().__init__(kernel, grid, block, shared_bytes)
        self._args = PackedArgs(kernel.spec, args)
        self.values = self._args.values
        from cuda.bindings import driver
        self._launch = driver.cuLaunchKernel
        self._func = kernel._handle
        self._dims = (*self._grid, *self._block, self._shared_bytes)

    def launch(self, stream):
        log = stream.capture_log
        if log is not None:
            log.append(self)
        gx, gy, gz, bx, by, bz, shm = self._dims
        (err,) = self._launch(self._func, gx, gy, gz, bx, by, bz, shm, stream._handle, self._args.address, 0)
        if err:
            raise_for(err, "cuLaunchKernel", f"launching {self.name} with grid {self._grid}, block {self._block}, "
                                             f"{shm} B shared on stream '{stream.name}'")
