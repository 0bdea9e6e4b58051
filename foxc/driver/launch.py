"""Launch plans: arguments packed once, so a launch is one `cuLaunchKernel` with a prebuilt `void**`."""
from __future__ import annotations

import ctypes

from .errors import CudaError, raise_for
from .kernel_spec import convert_args, pack_slot

MAX_THREADS_PER_BLOCK = 1024


def launch_dims(dims, what: str, kernel_name: str) -> tuple[int, int, int]:
    if isinstance(dims, int):
        dims = (dims,)
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if len(dims) != 3 or any(d < 1 for d in dims):
        raise CudaError(f"kernel {kernel_name}: {what} {dims} must be 1 to 3 positive sizes")
    return dims


class PackedArgs:
    """Argument values in one persistent buffer (an 8-byte slot each) and the `void**` pointing into it."""

    def __init__(self, spec, args):
        self.spec = spec
        self.values = convert_args(spec, args)  # DevPtrs keep their buffers alive
        n = max(len(self.values), 1)
        self.slots = ctypes.create_string_buffer(8 * n)
        base = ctypes.addressof(self.slots)
        self.pointers = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.address = ctypes.addressof(self.pointers)
        for i in range(len(self.values)):
            self._write(i)

    def _write(self, index: int):
        kind = self.spec.params[index].kind
        ctypes.memmove(ctypes.addressof(self.slots) + 8 * index, pack_slot(kind, self.values[index]), 8)

    def set(self, index: int, value):
        """Change one argument in place: later eager launches see it; already captured graphs do not."""
        patched = list(self.values)
        patched[index] = value
        self.values[index] = convert_args(self.spec, patched)[index]
        self._write(index)


class LaunchPlan:
    """One kernel with fixed grid, block, shared memory and arguments (CUDA backend)."""

    def __init__(self, kernel, grid, block, args, shared_bytes: int = 0):
        self.kernel = kernel
        self.name = kernel.name
        self.grid = launch_dims(grid, "grid", kernel.name)
        self.block = launch_dims(block, "block", kernel.name)
        if self.block[0] * self.block[1] * self.block[2] > MAX_THREADS_PER_BLOCK:
            raise CudaError(f"kernel {kernel.name}: block {self.block} has more than {MAX_THREADS_PER_BLOCK} threads")
        self.shared_bytes = int(shared_bytes)
        self.args = PackedArgs(kernel.spec, args)
        from cuda.bindings import driver
        self._launch = driver.cuLaunchKernel
        self._func = kernel.handle
        self._dims = (*self.grid, *self.block, self.shared_bytes)

    def set_arg(self, index: int, value):
        self.args.set(index, value)

    def launch(self, stream):
        log = stream.capture_log
        if log is not None:
            log.append(self)
        gx, gy, gz, bx, by, bz, shm = self._dims
        (err,) = self._launch(self._func, gx, gy, gz, bx, by, bz, shm, stream.handle, self.args.address, 0)
        if err:
            raise_for(err, "cuLaunchKernel",
                      f"launching {self.name} with grid {self.grid}, block {self.block}, "
                      f"{self.shared_bytes} B shared on stream '{stream.name}'")

    def __repr__(self):
        return f"<LaunchPlan {self.name} grid={self.grid} block={self.block}>"
