"""LOB simulator throughput: environment steps per second (book + fill + PnL + cursors), eager and as a graph.

Every backtest gets a fresh random action each step (copied on the device from a pool of ACTION_POOL), so
fills happen often: a stress case, not a steady state. A graph holds ACTION_POOL whole steps. With `--orders
passive` each step also gets random quotes (keep, cancel, join at or behind the touch: resting orders under the
risk-averse queue model) on books with trades.
"""
from __future__ import annotations

import numpy as np

from ..cli import int_at_least, positive_int, text_table as table
from ..lobsim.books import TICK, random_books
from ..lobsim.env import LobEnv
from ..lobsim.layout import QUOTE_CANCEL, QUOTE_JOIN, QUOTE_KEEP
from ..lobsim.passive import PassiveConfig
from . import harness
from .report import write_json

SIZES, ACTION_POOL, SNAPSHOTS, EPISODE_LEN = (1024, 16384, 65536), 8, 50_000, 2_000
QUOTE_CODES = np.array([QUOTE_KEEP] * 5 + [QUOTE_CANCEL, QUOTE_JOIN, QUOTE_JOIN, QUOTE_JOIN + 1])  # a tick behind


def bench_size(rt, snaps, n: int, steps: int, rng, passive: bool) -> list[dict]:
    config = PassiveConfig(tick=TICK, max_position=5) if passive else None
    env = LobEnv(snaps, n, episode_len=EPISODE_LEN, rt=rt, fee_per_lot=5_000_000, lots_per_entry=5, passive=config)
    env.reset(1)
    pool = rt.device_array((ACTION_POOL, n), np.int32, "bench.actions")
    pool.upload(rng.integers(0, 5, (ACTION_POOL, n)).astype(np.int32))
    quotes = rt.device_array((ACTION_POOL, 2, n), np.int32, "bench.quotes")
    quotes.upload(rng.choice(QUOTE_CODES, (ACTION_POOL, 2, n)).astype(np.int32))

    def one_round():
        for k in range(ACTION_POOL):
            rt.copy_dtod(env.sim.actions.ptr, pool.at(k * n), n * 4)
            if passive:
                rt.copy_dtod(env.sim.quotes.ptr, quotes.at(k * 2 * n), 2 * n * 4)
            env.launch_step(rt.stream)

    rounds = max(1, steps // ACTION_POOL)
    one_round()  # warm up on the stream that captures
    with rt.capture(name=f"lobsim B={n}") as cap:
        one_round()
    graph = cap.graph
    graph.launch(rt.stream)
    rows = []
    for mode, launch in (("eager", one_round), ("graph", lambda: graph.launch(rt.stream))):
        t = harness.time_launches(rt, launch, rounds)
        done = rounds * ACTION_POOL
        rows.append({"B": n, "mode": mode, "steps": done,
                     "us_per_step": round(t.wall_s / done * 1e6, 2),
                     "gpu_us_per_step": round(t.gpu_ms / done * 1e3, 2) if rt.backend == "cuda" else "",
                     "env_steps_per_s": f"{n * done / t.wall_s:.3e}"})
    stats = env.sim.stats()
    rows[-1]["trades"] = stats["trades"]
    if passive:
        rows[-1]["passive_lots"] = sum(stats["q_fill_lots"])
    graph.close()
    pool.close()
    quotes.close()
    env.close()
    return rows


def main(argv=None) -> int:
    ap = harness.parser("lobsim", __doc__)
    ap.add_argument("--n-backtests", type=int_at_least(1, 2**31 - 1), action="append",
                    help=f"backtests per run (repeatable; default {', '.join(map(str, SIZES))})")
    ap.add_argument("--steps", type=positive_int, default=800, help="steps timed per size and mode (default 800)")
    ap.add_argument("--orders", choices=("market", "passive"), default="market",
                    help="market orders only (lobsim_step), or resting orders beside them (lobsim_step_passive)")
    return harness.run(ap, argv, _main)


def _main(args, rt) -> int:
    sizes, steps, n_snaps = args.n_backtests or list(SIZES), args.steps, SNAPSHOTS
    if rt.backend != "cuda":  # numpy runs every backtest on the CPU: keep the smoke test small
        sizes = [min(s, 256) for s in sizes]
        steps = min(steps, 2 * ACTION_POOL)
        n_snaps = 5_000
    rng = np.random.default_rng(0)
    passive = args.orders == "passive"
    snaps = random_books(n_snaps, rng, segments=4, bad_frac=0.001, trades=passive)
    print(f"backend {rt.backend}: {rt.device_name}")
    rows = []
    for n in sizes:
        rows += bench_size(rt, snaps, n, steps, rng, passive)
    print(table(rows, ["B", "mode", "steps", "us_per_step", "gpu_us_per_step", "env_steps_per_s", "trades",
                       *(["passive_lots"] if passive else [])]))
    write_json(args.json, "lobsim", rt, rows, {"snapshots": n_snaps, "episode_len": EPISODE_LEN,
                                               "orders": args.orders})
    best = max(rows, key=lambda r: float(r["env_steps_per_s"]))
    kernel = "lobsim_step_passive" if passive else "lobsim_step"
    print(f"summary: best {best['env_steps_per_s']} env steps/s at B={best['B']} ({best['mode']}, {rt.backend}, "
          f"{args.orders} orders); 2 kernels per step ({kernel}, cursor_advance), random actions every step")
    return 0
