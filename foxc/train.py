"""`python -m foxc.train`: the training entry point.

The integrated trainer is not built yet; until it is, this entry point picks
the backend, says which and why, and proves the launch path end to end: it
captures the device step counter into a graph and replays it --n-steps times.
"""
from __future__ import annotations

import argparse
import sys

from . import __version__
from .driver import BACKENDS, CudaError, open_runtime


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m foxc.train", description="Train foxc's trading agent.")
    ap.add_argument("--backend", choices=BACKENDS, default=None,
                    help="auto (default; $FOXC_BACKEND overrides): CUDA when a usable GPU is present, "
                         "else the numpy reference")
    ap.add_argument("--n-steps", type=int, default=1000, help="steps to run (default 1000)")
    args = ap.parse_args(argv)
    if args.n_steps < 0:
        ap.error(f"--n-steps must be >= 0, got {args.n_steps}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from .isv import IsvBus
    from .isv.kernels import plan_step_increment
    try:
        rt = open_runtime(args.backend)
    except (CudaError, ValueError) as e:
        print(f"foxc.train: {e}", file=sys.stderr)
        return 2
    print(f"foxc {__version__}: backend {rt.backend} — {rt.reason}")
    print("The integrated trainer is not built yet. Running the launch-path check instead: "
          f"the ISV step counter, captured as a graph, replayed {args.n_steps} times.")
    with rt:
        bus = IsvBus(rt)
        step = plan_step_increment(rt, bus)
        step.launch(rt.stream)  # warm up on the capture stream
        with rt.capture(name="step_counter") as cap:
            step.launch(rt.stream)
        for _ in range(args.n_steps):
            cap.graph.launch(rt.stream)
        rt.stream.synchronize()
        print(f"device step counter: {bus.step} (expected {args.n_steps + 1})")
        ok = bus.step == args.n_steps + 1
        cap.graph.close()
        bus.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
