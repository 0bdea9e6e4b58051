"""One BLAS thread for the reference backend unless the user chose a count.

The reference kernels multiply small matrices (a few hundred rows) thousands of times a
second; OpenBLAS's default of one thread per core spends more on waking threads than on
arithmetic (runs were up to 9x slower on two cores). A count the user set through
OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or MKL_NUM_THREADS is left alone.
"""
from __future__ import annotations

import os

from threadpoolctl import threadpool_info, threadpool_limits

USER_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")
_limits = None  # the process-wide pin, kept so it is not released


def pin_blas_threads() -> str:
    """Pin BLAS to one thread (once per process) unless an environment variable chose; say which."""
    global _limits
    chosen = next((k for k in USER_SETTINGS if os.environ.get(k)), None)
    if chosen:
        return f"{chosen}={os.environ[chosen]}"
    if _limits is None:
        _limits = threadpool_limits(limits=1, user_api="blas")
    return "1 (pinned; set OPENBLAS_NUM_THREADS to choose)"


def blas_threads() -> list[int]:
    """The thread count of each BLAS library numpy loaded."""
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
