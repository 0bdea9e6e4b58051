"""`cuProfilerStart/Stop`: brackets a window for nsys --capture-range=cudaProfilerApi and ncu --profile-from-start off."""
from __future__ import annotations

from .errors import check


def profiler_start():
    from cuda.bindings import driver
    check(driver.cuProfilerStart(), "cuProfilerStart", "opening the profiler capture window")


def profiler_stop():
    from cuda.bindings import driver
    check(driver.cuProfilerStop(), "cuProfilerStop", "closing the profiler capture window")
