"""What every benchmark shares: its command line (--backend, --json, the CLI error path) and its timers.

    ap = parser("lobsim", __doc__)              # python -m foxc.bench lobsim, with --backend
    ap.add_argument(...)                        # the benchmark's own flags
    return run(ap, argv, body)                  # adds --json, parses; body(args, rt) -> exit status

`run` adds --json last (where every benchmark's usage line has it), parses, then through
foxc.cli.run (a user's mistake: one line on stderr, exit 2) runs the benchmark's own
`check(args)` when given, checks that --json can be written, opens the runtime of --backend
and calls `body(args, rt)`: every flag is refused before any data is made or device work is done;
sizes whose arrays do not fit in host memory (a MemoryError) are one line too.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ..cli import ArgumentParser, PathArg, UserError, one_line, open_runtime, output_file, run as run_cli
from ..driver import BACKENDS


def parser(name: str, doc: str) -> ArgumentParser:
    """The parser of `python -m foxc.bench NAME`, described by `doc`'s first line, with --backend."""
    ap = ArgumentParser(prog=f"python -m foxc.bench {name}", description=doc.splitlines()[0])
    ap.add_argument("--backend", choices=BACKENDS, default=None)
    return ap


def run(ap: ArgumentParser, argv, body, *, check=None) -> int:
    """Add --json to `ap` and parse `argv`; then `check(args)` (the benchmark's own checks of its
    flags, raising UserError), --json writable, the runtime opened, and `body(args, rt)`'s exit
    status, all through foxc.cli.run."""
    ap.add_argument("--json", type=PathArg("a file name"), help="also write the results here")
    args = ap.parse_args(argv)

    def main() -> int:
        if check is not None:
            check(args)
        if args.json is not None:
            output_file("--json", args.json)
        try:
            return body(args, open_runtime(args.backend))
        except MemoryError as e:  # sizes past this host's memory: numpy says how much it could not allocate
            raise UserError(f"out of host memory: {one_line(e) or 'MemoryError'} (give smaller sizes)") from None

    return run_cli(ap.prog, main)


@dataclass(frozen=True)
class Timing:
    """Launches timed: host seconds to enqueue them, wall seconds until the stream drained, and the
    device's event time (ms) between an event recorded before them and one after."""
    host_s: float
    wall_s: float
    gpu_ms: float


def time_launches(rt, launch, n: int) -> Timing:
    """`launch()` called `n` times on an idle stream, timed on the host and between two CUDA events."""
    rt.stream.synchronize()
    start, end = rt.event("start"), rt.event("end")
    t0 = time.perf_counter()
    start.record(rt.stream)
    for _ in range(n):
        launch()
    end.record(rt.stream)
    host = time.perf_counter() - t0
    rt.stream.synchronize()
    wall = time.perf_counter() - t0
    return Timing(host, wall, start.elapsed_ms(end))


def time_graph(rt, plans, replays: int, *, warmup: int = 1) -> tuple[Timing, int]:
    """(the timing of `replays` replays, kernels in the graph): `plans` run once eagerly (a warm-up
    on the capturing stream), captured into one graph, replayed `warmup` times untimed, then timed
    (time_launches); the graph is closed afterwards."""
    for p in plans:
        p.launch(rt.stream)
    with rt.capture(name="bench") as cap:
        for p in plans:
            p.launch(rt.stream)
    graph = cap.graph
    try:
        for _ in range(warmup):
            graph.launch(rt.stream)
        return time_launches(rt, lambda: graph.launch(rt.stream), replays), graph.kernel_count
    finally:
        graph.close()
