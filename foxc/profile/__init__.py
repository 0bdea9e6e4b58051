"""Profiling a run: NVTX ranges, the `--profile-steps` capture window for nsys/ncu, `--profile`'s kernel table
(the benchmarks' CUPTI kernel records are `foxc.bench.cupti`)."""
from .kernel_table import KernelProfiler
from .nvtx import nvtx_range
from .window import ProfilerWindow, StepWindow, WindowError, parse_window, window_arg

DEFAULT_PROFILE_STEPS = "10:29"  # --profile without --profile-steps: 20 steps after a warm-up


def add_profile_args(ap):
    """`--profile-steps A:B` and `--profile` on an argparse parser (the trainer's and the learn benchmark's)."""
    ap.add_argument("--profile-steps", type=window_arg, default=None, metavar="A:B",
                    help="call cuProfilerStart before step A and cuProfilerStop after step B (inclusive), so "
                         "`nsys profile --capture-range=cudaProfilerApi` or `ncu --profile-from-start off` "
                         "record only those steps (tools/profile.sh, tools/ncu_kernel.sh)")
    ap.add_argument("--profile", action="store_true",
                    help="launch the steps of the window eagerly with CUDA events around every launch; print a "
                         f"per-kernel table and write OUT/profile.json (window: --profile-steps, else "
                         f"{DEFAULT_PROFILE_STEPS})")


def profile_window(args) -> StepWindow | None:
    """The steps `--profile` times: --profile-steps when given, else the default; None without --profile."""
    if not args.profile:
        return None
    return args.profile_steps or parse_window(DEFAULT_PROFILE_STEPS)


__all__ = ["DEFAULT_PROFILE_STEPS", "KernelProfiler", "ProfilerWindow", "StepWindow", "WindowError",
           "add_profile_args", "nvtx_range", "parse_window", "profile_window", "window_arg"]
