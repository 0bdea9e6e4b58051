"""`CudaError`, what the driver layer raises when the device fails it, and `check`, which unwraps every driver
call: `cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE while launching fill_f32 ... (invalid argument)`."""
from __future__ import annotations


class CudaError(RuntimeError):
    """A driver call failed (`result`, `call` and `doing` say how), or no usable device or cubin."""

    def __init__(self, message: str, *, result: str | None = None, call: str | None = None,
                 doing: str | None = None):
        super().__init__(message)
        self.result, self.call, self.doing = result, call, doing


class DeviceOutOfMemory(CudaError, MemoryError):
    """CUDA_ERROR_OUT_OF_MEMORY, a MemoryError too: foxc.cli.run reports it as the host's, in one line."""



def raise_for(code, call: str, doing: str):
    name, text = f"CUresult({int(code)})", ""
    try:  # the result's name and cuGetErrorString's explanation, where the bindings know the code
        from cuda.bindings import driver
        result = driver.CUresult(int(code))
        name = result.name
        err, raw = driver.cuGetErrorString(result)
        if not err and raw:
            text = f" ({raw.decode() if isinstance(raw, bytes) else raw})"
    except Exception:
        pass
    cls = DeviceOutOfMemory if name == "CUDA_ERROR_OUT_OF_MEMORY" else CudaError
    raise cls(f"{call} failed with {name} while {doing}{text}", result=name, call=call, doing=doing)


def check(ret, call: str, doing: str):
    """Unwrap `(CUresult, *values)`: None, the one value, or the values as a tuple; CudaError on failure."""
    code, values = (ret[0], ret[1:]) if isinstance(ret, tuple) else (ret, ())
    if code:  # CUDA_SUCCESS is 0
        raise_for(code, call, doing)
    return values[0] if len(values) == 1 else values or None
