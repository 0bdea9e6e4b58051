"""One exception type for everything the driver layer reports.

Every `cuda.bindings.driver` call returns a tuple whose first element is a
CUresult; `check` unwraps it and raises `CudaError` carrying the result's name,
the API call and what foxc was doing, so a failure reads like
`cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE while launching fill_f32 ...`.
"""
from __future__ import annotations


class CudaError(RuntimeError):
    """A driver call failed, or the driver layer refused a request."""

    def __init__(self, message: str, *, result: str | None = None, call: str | None = None,
                 doing: str | None = None):
        super().__init__(message)
        self.result = result
        self.call = call
        self.doing = doing


def result_name(code) -> str:
    """The CUresult's symbolic name, e.g. CUDA_ERROR_INVALID_VALUE (no driver needed)."""
    try:
        from cuda.bindings import driver
        return driver.CUresult(int(code)).name
    except Exception:  # an unknown code, or bindings missing
        return f"CUresult({int(code)})"


def _describe(code) -> str:
    """cuGetErrorString's text where the driver can give it, else empty."""
    try:
        from cuda.bindings import driver
        err, text = driver.cuGetErrorString(driver.CUresult(int(code)))
        if not err and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:
        pass
    return ""


def raise_for(code, call: str, doing: str):
    name = result_name(code)
    text = _describe(code)
    message = f"{call} failed with {name} while {doing}" + (f" ({text})" if text else "")
    raise CudaError(message, result=name, call=call, doing=doing)


def check(ret, call: str, doing: str):
    """Unwrap a driver call's `(CUresult, *values)` tuple.

    Returns None, the single value, or a tuple of values. Raises CudaError
    naming the result, the call and `doing` when the result is not CUDA_SUCCESS.
    """
    if isinstance(ret, tuple):
        code, values = ret[0], ret[1:]
    else:
        code, values = ret, ()
    if code:  # CUresult is an int enum; CUDA_SUCCESS is 0
        raise_for(code, call, doing)
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return values
