"""What every benchmark shares: its command line (--backend, --json, the one error path) and its timers."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..cli import ArgumentParser, PathArg, UserError, open_runtime, output_dir, output_file, run as run_cli
from ..driver import BACKENDS


def parser(name: str, doc: str) -> ArgumentParser:
    """`python -m foxc.bench NAME`'s parser, described by `doc`'s first line, with --backend."""
    ap = ArgumentParser(prog=f"python -m foxc.bench {name}", description=doc.splitlines()[0])
    ap.add_argument("--backend", choices=BACKENDS, default=None)
    return ap


def run(ap: ArgumentParser, argv, body, *, check=None) -> int:
    """Add --json and parse `argv`; then, through foxc.cli.run, `check(args)` (raising UserError), --json
    writable, the runtime of --backend opened and `body(args, rt)`'s exit status: flags are refused before
    any work."""
    ap.add_argument("--json", type=PathArg("a file name"), help="also write the results here")
    args = ap.parse_args(argv)

    def main() -> int:
        if check is not None:
            check(args)
        if args.json is not None:
            output_file("--json", args.json)
        return body(args, open_runtime(args.backend))
    return run_cli(ap.prog, main)


def empty_dir(flag: str, path) -> None:
    """A directory the benchmark writes and removes files in: new or empty, never among a user's files."""
    output_dir(flag, path)
    if Path(path).is_dir() and any(Path(path).iterdir()):
        raise UserError(f"{flag} {path}: the directory holds files (give a new or empty directory)")


@dataclass(frozen=True)
class Timing:
    host_s: float  # enqueueing the launches
    wall_s: float  # until the stream drained
    gpu_ms: float  # between events recorded before and after them


def time_launches(rt, launch, n: int) -> Timing:
    """`launch()` called `n` times on an idle stream."""
    rt.stream.synchronize()
    start, end = rt.event("start"), rt.event("end")
    t0 = time.perf_counter()
    start.record(rt.stream)
    for _ in range(n):
        launch()
    end.record(rt.stream)
    host = time.perf_counter() - t0
    rt.stream.synchronize()
    return Timing(host, time.perf_counter() - t0, start.elapsed_ms(end))


def time_graph(rt, plans, replays: int, *, warmup: int = 1) -> tuple[Timing, int]:
    """(the timing of `replays` replays, kernels in the graph) of `plans` captured into one graph, after one
    eager run (on the capturing stream) and `warmup` untimed replays; the graph is closed afterwards."""
    for p in plans:
        p.launch(rt.stream)
    with rt.capture(name="bench") as cap:
        for p in plans:
            p.launch(rt.stream)
    with cap.graph as graph:
        for _ in range(warmup):
            graph.launch(rt.stream)
        return time_launches(rt, lambda: graph.launch(rt.stream), replays), graph.kernel_count
