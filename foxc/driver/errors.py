"""One exception type for everything the driver layer reports, and `check`, which unwraps every driver call.

A `cuda.bindings.driver` call returns `(CUresult, *values)`; `check` raises CudaError naming the
result, the call and what foxc was doing, so a failure reads like
`cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE while launching fill_f32 ... (invalid argument)`.
"""
from __future__ import annotations


class CudaError(RuntimeError):
    """A driver call failed, or the driver layer refused a request."""

    def __init__(self, message: str, *, result: str | None = None, call: str | None = None,
                 doing: str | None = None):
        super().__init__(message)
        self.result, self.call, self.doing = result, call, doing


def result_name(code) -> str:
    """The CUresult's name, e.g. CUDA_ERROR_INVALID_VALUE (no driver needed)."""
    try:
        from cuda.bindings import driver
        return driver.CUresult(int(code)).name
    except Exception:  # an unknown code, or no bindings
        return f"CUresult({int(code)})"


def raise_for(code, call: str, doing: str):
    name, text = result_name(code), ""
    try:  # cuGetErrorString's explanation, where the driver can give one
        from cuda.bindings import driver
        err, raw = driver.cuGetErrorString(driver.CUresult(int(code)))
        if not err and raw:
            text = f" ({raw.decode() if isinstance(raw, bytes) else raw})"
    except Exception:
        pass
    raise CudaError(f"{call} failed with {name} while {doing}{text}", result=name, call=call, doing=doing)


def check(ret, call: str, doing: str):
    """Unwrap `(CUresult, *values)`: None, the one value, or the values as a tuple; CudaError on failure."""
    code, values = (ret[0], ret[1:]) if isinstance(ret, tuple) else (ret, ())
    if code:  # CUDA_SUCCESS is 0
        raise_for(code, call, doing)
    return values[0] if len(values) == 1 else values or None
