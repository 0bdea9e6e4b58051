"""The LOB simulator's kernels on a GPU: each against its numpy reference, whole runs, graph against eager."""
import sys
from pathlib import Path

import numpy as np
import pytest

from foxc.lobsim import LobEnv
from foxc.lobsim.books import random_books
from foxc.lobsim.kernels import BOOK_UPDATE, PNL_TRACK, SUBMIT_MARKET
from foxc.lobsim.sim import BLOCK
from foxc.testing import poisoned, run_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lobsim_cases import HostDrivenSim  # noqa: E402
from test_lobsim import FEE, run_random  # noqa: E402


def both(cuda_rt, ref_rt, spec, n, args):
    grid = (n + BLOCK - 1) // BLOCK
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    return run_kernel(cuda_rt, spec, grid, BLOCK, copy()), run_kernel(ref_rt, spec, grid, BLOCK, copy())


def assert_identical(got, want, spec):
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.tobytes() == w.tobytes(), f"{spec.name}: argument {i} differs from the reference"


def mid_run_state(ref_rt, rng, n, steps=30):
    """A simulator n backtests into random trading (reference backend): its arrays as host copies."""
    snaps = random_books(4000, rng, bad_frac=0.05, empty_level_frac=0.3, max_size=6)
    h, history = run_random(ref_rt, snaps, n, steps, rng, int(rng.integers(1 << 30)), fee_per_lot=FEE, lots_per_entry=7)
    s = h.sim
    state = {name: getattr(s, name).download() for name in
             ("bid_px", "ask_px", "bid_sz", "ask_sz", "book_ts", "book_idx", "mid_x2", "atr_ema", "skip_range",
              "skip_crossed", "fee_per_lot", "pos", "trade_log")}
    state["snaps"] = snaps
    state["cursor"] = h.cursor.download()
    state["end"] = h.end.download()
    return state


@pytest.mark.parametrize("n", [1, 127, 129, 3000])
def test_book_update_matches_reference(cuda_rt, ref_rt, rng, n):
    st = mid_run_state(ref_rt, rng, n)
    cursor = rng.integers(0, st["snaps"].size, n).astype(np.int64)
    cursor[: n // 3] = st["book_idx"][: n // 3] + 1  # some follow their previous cursor: the ATR moves
    cursor = np.clip(cursor, 0, st["snaps"].size - 1)
    args = [st["snaps"], cursor, poisoned(st["bid_px"].shape, np.int64), poisoned(st["ask_px"].shape, np.int64),
            poisoned(st["bid_sz"].shape, np.uint32), poisoned(st["ask_sz"].shape, np.uint32),
            poisoned(n, np.int64), st["book_idx"], st["mid_x2"], st["atr_ema"], st["skip_range"], st["skip_crossed"],
            1, 10**7 * 10**9, np.float32(0.05).item(), n]
    got, want = both(cuda_rt, ref_rt, BOOK_UPDATE, n, args)
    assert_identical(got, want, BOOK_UPDATE)


@pytest.mark.parametrize("n", [1, 129, 3000])
def test_submit_market_matches_reference(cuda_rt, ref_rt, rng, n):
    st = mid_run_state(ref_rt, rng, n)
    actions = rng.integers(-1, 6, n).astype(np.int32)
    stop = (rng.random(n) < 0.1).astype(np.uint32)
    end = np.where(rng.random(n) < 0.1, st["cursor"], st["end"])  # some episodes end now
    trade_log = poisoned(st["trade_log"].shape, st["trade_log"].dtype)
    pos = st["pos"].copy()
    args = [actions, stop, st["cursor"], end, st["bid_px"], st["ask_px"], st["bid_sz"], st["ask_sz"], st["book_ts"],
            st["mid_x2"], st["fee_per_lot"], pos, trade_log, st["trade_log"].shape[1], 7, n]
    got, want = both(cuda_rt, ref_rt, SUBMIT_MARKET, n, args)
    assert_identical(got, want, SUBMIT_MARKET)
    if n > 1:  # one backtest may draw HOLD; with many, some order always fills
        assert not np.array_equal(got[11], st["pos"]), "no order filled: the test exercised nothing"


@pytest.mark.parametrize("n", [1, 129, 3000])
def test_pnl_track_matches_reference(cuda_rt, ref_rt, rng, n):
    st = mid_run_state(ref_rt, rng, n)
    pos = st["pos"].copy()
    pos["closed_pending"] = (rng.random(n) < 0.3).astype(np.uint32)
    end = np.where(rng.random(n) < 0.2, st["cursor"], st["end"])
    args = [st["snaps"], st["cursor"], end, st["mid_x2"], pos, st["trade_log"], poisoned(n), poisoned(n),
            1, 10**7 * 10**9, 1e-9, st["trade_log"].shape[1], n]
    got, want = both(cuda_rt, ref_rt, PNL_TRACK, n, args)
    assert_identical(got, want, PNL_TRACK)


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
