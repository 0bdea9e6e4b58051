"""The LOB simulator's kernels on a GPU: each against its numpy reference, whole runs, graph against eager."""
import sys
from pathlib import Path

import numpy as np
import pytest

from foxc.lobsim import LobEnv
from foxc.lobsim.books import random_books
from foxc.lobsim.kernels import LOBSIM_STEP
from foxc.lobsim.sim import BLOCK
from kernel_check import poisoned, run_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lobsim_cases import FEE, HostDrivenSim, mid_run_state, run_random, step_args  # noqa: E402


def both(cuda_rt, ref_rt, spec, n, args):
    grid = (n + BLOCK - 1) // BLOCK
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    return run_kernel(cuda_rt, spec, grid, BLOCK, copy()), run_kernel(ref_rt, spec, grid, BLOCK, copy())


def assert_identical(got, want, spec):
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.tobytes() == w.tobytes(), f"{spec.name}: argument {i} differs from the reference"


@pytest.mark.parametrize("poison_log", [False, True])
@pytest.mark.parametrize("n", [1, 127, 129, 3000])
def test_lobsim_step_matches_reference(cuda_rt, ref_rt, rng, n, poison_log):
    """One step from a mid-run simulator (some cursors jump, some episodes end, invalid actions and stops):
    the book, positions, trade log, rewards and dones (poisoned) bit for bit."""
    st = mid_run_state(ref_rt, rng, n)
    args = step_args(rng, st, poisoned, poison_log)
    got, want = both(cuda_rt, ref_rt, LOBSIM_STEP, n, args)
    assert_identical(got, want, LOBSIM_STEP)
    pos = got[16]
    if n > 1:  # one backtest may draw HOLD; with many, some order always fills
        assert not np.array_equal(pos, st["pos"]), "no order filled: the test exercised nothing"
    if n > 100:
        assert (pos["trades"] > st["pos"]["trades"]).any() and (got[19] == 1).any(), "no trade closed, no episode end"


@pytest.mark.parametrize("episode_len", [0, 1, 17])
def test_env_matches_reference_with_its_episodes(cuda_rt, ref_rt, rng, episode_len):
    """Whole LobEnv steps, the cursors' draws included, on both backends from one seed: the same bits."""
    snaps = random_books(3000, rng, segments=4, bad_frac=0.02)
    n, seed = 700, int(rng.integers(1 << 30))
    envs = [LobEnv(snaps, n, episode_len=episode_len, rt=rt, fee_per_lot=FEE, lots_per_entry=2)
            for rt in (cuda_rt, ref_rt)]
    for e in envs:
        e.reset(seed)
    for t in range(60):
        acts = rng.integers(0, 5, n)
        (r_gpu, d_gpu, i_gpu), (r_ref, d_ref, i_ref) = (e.step(acts) for e in envs)
        assert np.array_equal(r_gpu, r_ref) and np.array_equal(d_gpu, d_ref), f"step {t}"
        for name in ("cursor", "lots", "equity", "trades"):
            assert np.array_equal(i_gpu[name], i_ref[name]), f"step {t}: {name}"
        ends = [e.cursors.episode_end.download() for e in envs]
        assert np.array_equal(*ends), f"step {t}: episode_end"
    assert envs[0].sim.positions()["episodes"].sum() > 0
    for e in envs:
        e.close()


def test_whole_run_matches_reference_bit_for_bit(cuda_rt, ref_rt, rng):
    snaps = random_books(3000, rng, bad_frac=0.03, empty_level_frac=0.3, max_size=4)
    seed = int(rng.integers(1 << 30))
    _, on_gpu = run_random(cuda_rt, snaps, 300, 80, rng, seed, fee_per_lot=FEE, lots_per_entry=6)
    _, on_cpu = run_random(ref_rt, snaps, 300, 80, rng, seed, fee_per_lot=FEE, lots_per_entry=6)
    for t, (g, c) in enumerate(zip(on_gpu, on_cpu)):
        assert g["after"].tobytes() == c["after"].tobytes(), f"positions differ at step {t}"
        assert np.array_equal(g["rewards"], c["rewards"]) and np.array_equal(g["dones"], c["dones"])


def test_results_do_not_depend_on_neighbours_gpu(cuda_rt, rng):
    snaps = random_books(3000, rng)
    small = HostDrivenSim(cuda_rt, snaps, 3, fee_per_lot=FEE, lots_per_entry=4)
    big = HostDrivenSim(cuda_rt, snaps, 70_000, fee_per_lot=FEE, lots_per_entry=4)
    cur_small = rng.integers(0, 2000, 3)
    cur_big = np.r_[cur_small, rng.integers(0, 2000, 70_000 - 3)]
    end_big = cur_big + 500
    small.set_cursor(cur_small, end_big[:3])
    big.set_cursor(cur_big, end_big)
    for t in range(30):
        acts = rng.integers(0, 5, 70_000)
        _, _, p_small = small.step(acts[:3])
        _, _, p_big = big.step(acts)
        assert p_small.tobytes() == p_big[:3].tobytes(), f"step {t}"
        small.set_cursor(cur_small + t + 1)
        big.set_cursor(cur_big + t + 1)


def test_env_graph_equals_eager(cuda_rt, rng):
    snaps = random_books(20_000, rng, segments=3, bad_frac=0.01)
    n = 20_000
    envs = [LobEnv(snaps, n, episode_len=300, rt=cuda_rt, fee_per_lot=FEE, lots_per_entry=3) for _ in range(2)]
    pool = cuda_rt.device_array((4, n), np.int32, "actions")
    pool.upload(rng.integers(0, 5, (4, n)).astype(np.int32))

    def steps(env):
        for k in range(4):
            cuda_rt.copy_dtod(env.sim.actions.ptr, pool.at(k * n), n * 4)
            env.launch_step(cuda_rt.stream)

    for e in envs:
        e.reset(9)
    steps(envs[1])  # warm up on the capturing stream, mirrored eagerly on the other env
    steps(envs[0])
    with cuda_rt.capture(name="lobsim") as cap:
        steps(envs[1])
    for _ in range(100):
        steps(envs[0])
        cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    a, b = envs[0].sim.positions(), envs[1].sim.positions()
    assert a.tobytes() == b.tobytes()
    assert a["trades"].sum() > 0 and a["episodes"].sum() > 0
    assert envs[0].sim.trade_log.download().tobytes() == envs[1].sim.trade_log.download().tobytes()
    cap.graph.close()
    for e in envs:
        e.close()


def test_env_flat_at_episode_end_gpu(cuda_rt, rng):
    snaps = random_books(5000, rng, segments=2)
    env = LobEnv(snaps, 4096, episode_len=40, rt=cuda_rt, fee_per_lot=FEE, lots_per_entry=5)
    env.reset(4)
    total = np.zeros(4096)
    for _ in range(100):
        r, d, info = env.step(rng.integers(0, 5, 4096))
        total += r
        assert np.all(info["lots"][d != 0] == 0)
        assert np.all(info["fees_paid"] >= 0)
    assert np.allclose(total, env.sim.positions()["equity"] / 1e9, rtol=1e-4, atol=1e-4)
    env.close()


@pytest.mark.parametrize("queue, power, latency_ns, fee, partial", [
    ("risk_averse", 2, 0, 0, True), ("power", 2, 300_000, -2_000_000, True), ("power", 3, 1_500_000, 1_000_000, False),
    ("power", 1, 0, 0, True), ("power", 4, 700_000, -1, True)])
@pytest.mark.parametrize("episode_len", [0, 17])
def test_passive_env_matches_reference(cuda_rt, ref_rt, rng, queue, power, latency_ns, fee, partial, episode_len):
    """lobsim_step_passive against its reference: whole LobEnv steps with random market actions and random quotes
    (keep, cancel, join at or behind the touch) on books with trades, feed delays and unusable snapshots: rewards,
    positions, trade logs and every resting order's state (the queue fronts' float64 bits included)."""
    from foxc.lobsim.books import TICK
    from foxc.lobsim.passive import PassiveConfig
    snaps = random_books(3000, rng, segments=3, bad_frac=0.02, trades=True)
    cfg = PassiveConfig(queue=queue, power=power, entry_latency_ns=latency_ns, cancel_latency_ns=latency_ns // 2,
                        maker_fee=fee, max_position=3, partial=partial, tick=TICK)
    n, seed = 700, int(rng.integers(1 << 30))
    envs = [LobEnv(snaps, n, episode_len=episode_len, rt=rt, fee_per_lot=FEE, lots_per_entry=2, passive=cfg)
            for rt in (cuda_rt, ref_rt)]
    for e in envs:
        e.reset(seed)
    codes = np.array([0] * 6 + [1, 2, 2, 2, 3, 4, 11])
    for t in range(80):
        acts = np.where(rng.random(n) < 0.9, 0, rng.integers(0, 5, n))
        quotes = rng.choice(codes, (2, n)).astype(np.int32)
        (r_gpu, d_gpu, _), (r_ref, d_ref, _) = (e.step(acts, quotes=quotes) for e in envs)
        assert r_gpu.tobytes() == r_ref.tobytes() and d_gpu.tobytes() == d_ref.tobytes(), f"step {t}"
        got, want = (e.sim.orders() for e in envs)
        for name in want:
            assert got[name].tobytes() == want[name].tobytes(), f"step {t}: {name}"
        assert envs[0].sim.positions().tobytes() == envs[1].sim.positions().tobytes(), f"step {t}"
    assert envs[0].sim.trade_log.download().tobytes() == envs[1].sim.trade_log.download().tobytes()
    stats = envs[1].sim.stats()
    assert min(stats["q_fill_lots"]) > 100 and min(stats["q_posts"]) > 100, stats
    if latency_ns > 1_000_000:  # arriving a snapshot (1 ms) or more after the book it was priced on
        assert sum(stats["q_rejects"]) > 0, "no post-only refusal: the latency case exercised little"
