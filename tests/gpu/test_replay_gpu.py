"""Replay kernels on a real GPU: each against its reference with poisoned outputs, chi-square, graph vs eager."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from foxc.isv import IsvBus  # noqa: E402
from foxc.replay import STATE_NAMES, ReplayBuffer  # noqa: E402
from foxc.replay.layout import (CTR_LENGTH, CTR_WRITE_HEAD, ROW_BLOCK, ROW_WARPS, RING_COLS,  # noqa: E402
                                SUBTREE_BLOCK, TR_COLS, warp_grid)
from foxc.replay.nstep import FLUSH_WRITE, NEXT_STATE, RING_PUSH  # noqa: E402
from foxc.replay.priority import UPDATE_TREE, grid as tree_grid  # noqa: E402
from foxc.replay.sampling import SAMPLE, is_weights  # noqa: E402
from kernel_check import assert_close, poisoned, run_kernel  # noqa: E402
from replay_helpers import WIDTH, chi_square_sf, random_step, upload_step  # noqa: E402


def isv_host(rt, **slots):
    bus = IsvBus(rt)
    for k, v in slots.items():
        bus[k] = v
    return bus.values.copy()


def both(cuda_rt, ref_rt, spec, grid, block, args):
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    return run_kernel(cuda_rt, spec, grid, block, copy()), run_kernel(ref_rt, spec, grid, block, copy())


def same(got, want, what, rtol=0.0):
    for i, (g, w) in enumerate(zip(got, want)):
        exact = np.array_equal(g, w, equal_nan=g.dtype.kind == "f")
        if rtol and g.dtype.kind == "f" and not exact:
            assert_close(g, w, rtol, f"{what} arg {i}")
        else:
            assert exact, f"{what} arg {i}"


def ring_state(rng, n_backtests, n_max):
    count = rng.integers(0, n_max, n_backtests)  # at most n_max - 1 held between steps
    start = rng.integers(0, n_max, n_backtests)
    pos = np.stack([start, count], 1).astype(np.uint32)
    ring_h = rng.standard_normal((n_backtests, n_max, WIDTH)).astype(np.float32)
    rows = rng.standard_normal((n_backtests, n_max, RING_COLS)).astype(np.float32)
    rows[..., 3] = 0.0  # entries held between steps are never done
    return ring_h, rows, pos


@pytest.mark.parametrize("n_backtests,n_max,n,cap", [(1, 1, 1, 1 << 12), (1000, 8, 3, 1 << 12),
                                                   (4099, 8, 8, 1 << 12), (333, 5, 2, 1 << 12), (500, 8, 4, 256)])
def test_push_write_next_state_match_reference(cuda_rt, ref_rt, rng, n_backtests, n_max, n, cap):
    """The three kernels of a flush, each against its reference from the same inputs; after the last one
    every written slot has its next state, and nothing is pending."""
    isv = isv_host(ref_rt, n_step=n, gamma=0.97)
    ring_h, rows, pos = ring_state(rng, n_backtests, n_max)
    s = random_step(rng, n_backtests, 1, done_rate=0.2)
    counters = np.array([rng.integers(0, cap), rng.integers(0, cap + 1), 7, 7], np.uint32)
    counters[CTR_WRITE_HEAD] = counters[CTR_WRITE_HEAD] % cap
    got, want = both(cuda_rt, ref_rt, RING_PUSH, warp_grid(n_backtests), ROW_BLOCK, [
        ring_h, rows, pos, poisoned((n_backtests, 2), np.int32), poisoned(n_backtests, np.uint32), counters,
        np.zeros(1, np.uint32), s["h_t"], s["action"], s["reward"], s["reward_raw"], s["done"], s["log_pi"], isv,
        n_backtests, n_max, WIDTH, cap])
    same(got, want, "replay_ring_push")
    assert got[6][0] == 0, "the last block resets the ticket"
    ring_h, rows, pos, flush, offsets, counters = want[:6]

    store_h = poisoned((cap, WIDTH))
    got, want = both(cuda_rt, ref_rt, FLUSH_WRITE, warp_grid(n_backtests), ROW_BLOCK, [
        ring_h, rows, pos, flush, offsets, counters, isv, np.array([2.5], np.float32), store_h, store_h.copy(),
        poisoned((cap, TR_COLS)), poisoned(2 * cap, np.float64), np.zeros(cap, np.int32), n_backtests, n_max, cap,
        WIDTH])
    same(got, want, "replay_flush_write", rtol=1e-6)
    pos, store_h_tp1, tree, pending = want[2], want[9], want[11], want[12]
    written = tree[cap:] == 2.5
    assert (pending > 0).any() and np.all(written[pending > 0])

    batch = 300  # draws of pending transitions (their backtest) and of stored ones (-1)
    drew = np.where(rng.random(batch) < 0.5, rng.integers(0, n_backtests, batch), -1).astype(np.int32)
    prob = 10.0 ** rng.uniform(-6, -1, batch)
    got, want = both(cuda_rt, ref_rt, NEXT_STATE, warp_grid(n_backtests) + warp_grid(batch), ROW_BLOCK, [
        pos, flush, offsets, counters, s["h_tp1"], pending, store_h_tp1, drew, prob, block_minima(prob),
        isv_host(ref_rt, per_beta=0.4), poisoned((batch, WIDTH)), poisoned(batch), n_backtests, batch, cap, WIDTH])
    weight = 12  # powf is not numpy's power
    same(got[:weight] + got[weight + 1:], want[:weight] + want[weight + 1:], "replay_next_state")
    assert_close(got[weight], want[weight], 1e-6, "replay_next_state weights")
    assert not got[5].any(), "a next state is still pending"
    assert not np.isnan(got[6][written]).any(), "a written slot lacks its next state"
    assert np.array_equal(got[11][drew >= 0], s["h_tp1"][drew[drew >= 0]])
    assert np.isnan(got[11][drew < 0]).all(), "a stored draw's row was written"


def level_sums(leaves):
    """The tree summed one level at a time, the plain way."""
    cap = leaves.size
    tree = np.zeros(2 * cap)
    tree[cap:] = leaves
    first = cap // 2
    while first >= 1:
        tree[first:2 * first] = tree[2 * first:4 * first:2] + tree[2 * first + 1:4 * first:2]
        first //= 2
    return tree


def filled_store(rng, cap, length, leaves):
    tree = level_sums(leaves)
    counters = np.array([length % cap, length, 0, 0], np.uint32)
    return (tree, counters, rng.standard_normal((cap, WIDTH)).astype(np.float32),
            rng.standard_normal((cap, WIDTH)).astype(np.float32),
            rng.standard_normal((cap, TR_COLS)).astype(np.float32))


def block_minima(prob):
    """The smallest positive prob of each ROW_WARPS samples (infinity when none), as replay_sample leaves them."""
    padded = np.full(warp_grid(prob.size) * ROW_WARPS, np.inf)
    padded[:prob.size] = np.where(prob > 0, prob, np.inf)
    return padded.reshape(-1, ROW_WARPS).min(axis=1)


@pytest.mark.parametrize("cap,length,batch", [(2, 1, 1), (1 << 10, 700, 1024), (1 << 16, 1 << 16, 4096),
                                              (1 << 12, 0, 64), (1 << 17, 100_000, 1000), (32, 20, 5000)])
def test_sample_with_weights_matches_reference(cuda_rt, ref_rt, rng, cap, length, batch):
    leaves = np.zeros(cap)
    leaves[:length] = 10.0 ** rng.uniform(-3, 3, length)
    leaves[:length][rng.random(length) < 0.2] = 0.0
    if length:
        leaves[0] = 1.0
    # two slots of the heaviest weight, one of a pending transition and one not, so that the draws surely take both
    # branches (a few heavy slots all without one, 0.7^k, made the check below fail at random: seed 2518720804)
    if length >= 2:
        leaves[:2] = leaves[:length].max()
    tree, counters, h_t, h_tp1, rows = filled_store(rng, cap, length, leaves)
    state = rng.integers(1, 2**32, batch, dtype=np.uint64).astype(np.uint32)
    outs = [poisoned((batch, WIDTH)), poisoned((batch, WIDTH)), poisoned(batch, np.int32),
            *[poisoned(batch) for _ in range(5)], poisoned(batch, np.int32), poisoned(batch, np.float64)]
    pending = np.where(rng.random(cap) < 0.3, rng.integers(1, 1000, cap), 0).astype(np.int32)  # backtest + 1
    if length >= 2:
        pending[:2] = (7, 0)
    got, want = both(cuda_rt, ref_rt, SAMPLE, warp_grid(batch), ROW_BLOCK,
                     [tree, counters, h_t, h_tp1, rows, pending, state, *outs, poisoned(batch, np.int32),
                      poisoned(warp_grid(batch), np.float64), batch, cap, WIDTH])
    same(got, want, "replay_sample")  # the walk is exact IEEE float64 on both, the minima exact
    index, prob, drew, minima = got[15], got[16], got[17], got[18]
    assert np.array_equal(drew, np.where(index >= 0, pending[index] - 1, -1))
    assert np.array_equal(minima, block_minima(prob))
    if length and batch >= 64:
        assert (drew >= 0).any() and (drew < 0).any()
    # the weights, by replay_next_state's sample warps (no rows to copy: the backtest part has nothing flushed)
    g, w = both(cuda_rt, ref_rt, NEXT_STATE, warp_grid(1) + warp_grid(batch), ROW_BLOCK, [
        np.zeros(2, np.uint32), np.zeros(2, np.int32), np.zeros(1, np.uint32), counters, poisoned((1, WIDTH)),
        np.zeros(cap, np.int32), poisoned((cap, WIDTH)), np.full(batch, -1, np.int32), prob, minima,
        isv_host(ref_rt, per_beta=0.55), poisoned((batch, WIDTH)), poisoned(batch), 1, batch, cap, WIDTH])
    assert_close(g[12], w[12], 1e-6, "weights")
    assert_close(g[12], is_weights(prob, np.float32(0.55)), 1e-6, "weights from the batch's smallest prob")
    if length:
        assert g[12].max() == 1.0 and g[12].min() > 0.0
    else:
        assert not g[12].any()


def test_sample_weights_every_launch_of_a_buffer(cuda_rt, ref_rt):
    """Weights are written again on every sample() + next_state()."""
    cap, length, batch = 1 << 12, 3000, 1024
    r = np.random.default_rng(31)
    leaves = np.zeros(cap)
    leaves[:length] = r.uniform(0.01, 5.0, length)
    bufs = []
    for rt in (cuda_rt, ref_rt):
        bus = IsvBus(rt)
        bus["per_beta"] = 0.4
        rb = ReplayBuffer(rt, bus, capacity=cap, width=WIDTH, n_backtests=1, batch=batch, seed=17)
        rb.state["tree"].upload(np.concatenate([np.zeros(cap), leaves]))
        rb.state["counters"].upload(np.array([length, length, 0, 0], np.uint32))
        rb.rebuild()
        bufs.append(rb)
    for _ in range(4):
        for rb in bufs:
            rb.sampled["weight"].upload(poisoned(batch))
            rb.sample()
            rb.next_state()
        g, w = (rb.sampled for rb in bufs)
        assert np.array_equal(g["index"].download(), w["index"].download())
        assert np.array_equal(g["prob"].download(), w["prob"].download())
        weight = g["weight"].download()
        assert_close(weight, w["weight"].download(), 1e-6, "weight")
        assert_close(weight, is_weights(g["prob"].download(), 0.4), 1e-6, "weight from prob")
    for rb in bufs:
        rb.close()


def leaves_and_batch(rng, cap, batch):
    """A tree with NaN internal nodes and leaves over 40 orders of magnitude (a tenth 0), and a sorted batch
    with duplicates, -1 and non-finite td; the last sample sets the last leaf, above the running max 0.75."""
    tree = np.full(2 * cap, np.nan)
    tree[cap:] = rng.random(cap) * 10.0 ** rng.uniform(-20, 20, cap)
    tree[cap:][rng.random(cap) < 0.1] = 0.0
    index = np.sort(rng.integers(-1, cap, batch)).astype(np.int32)
    td = (rng.standard_normal(batch) * 10.0 ** rng.uniform(-4, 2, batch)).astype(np.float32)
    td[rng.random(batch) < 0.01] = np.inf
    td[rng.random(batch) < 0.01] = np.nan
    index[-1], td[-1] = cap - 1, 50.0
    return tree, index, td


@pytest.mark.parametrize("cap,batch", [(2, 3), (1 << 8, 3000), (1 << 10, 1024), (1 << 11, 3000),
                                       (1 << 16, 65_536), (1 << 20, 65_536)])
def test_update_tree_matches_reference(cuda_rt, ref_rt, rng, cap, batch):
    """The batch's leaves and the running max against the reference (powf is not numpy's power: a tolerance);
    every internal node is the level sum of the kernel's own leaves, bit for bit (the subtrees, then the last
    block's top); tree[0] untouched, the ticket back at 0, the inputs unchanged."""
    tree, index, td = leaves_and_batch(rng, cap, batch)
    isv = isv_host(ref_rt, per_alpha=0.6)
    got, want = both(cuda_rt, ref_rt, UPDATE_TREE, tree_grid(cap), SUBTREE_BLOCK,
                     [tree, np.array([0.75], np.float32), np.zeros(1, np.uint32), index, td, isv, batch, cap])
    written = np.zeros(cap, bool)
    last = np.append(index[1:] != index[:-1], True)
    written[index[(index >= 0) & np.isfinite(td) & last]] = True
    assert written.any()
    leaves = got[0][cap:]
    assert np.array_equal(leaves[~written], tree[cap:][~written]), "a leaf outside the batch changed"
    np.testing.assert_allclose(leaves[written], want[0][cap:][written], rtol=1e-6, atol=0)
    assert np.isclose(got[1][0], want[1][0], rtol=1e-6, atol=0) and want[1][0] > 0.75
    assert np.isnan(got[0][0]) and np.array_equal(got[0][1:cap], level_sums(leaves)[1:cap])
    assert got[2][0] == 0, "the ticket is not back at 0"  # the buffer's steps reuse it
    assert np.array_equal(got[3], index) and np.array_equal(got[4], td, equal_nan=True)


@pytest.mark.parametrize("cap", [2, 1 << 10, 1 << 11, 1 << 16, 1 << 20])
def test_tree_sums_match_reference(cuda_rt, ref_rt, rng, cap):
    """batch = 0 (ReplayBuffer.rebuild): the sums alone, bit-identical to the reference and to level sums;
    no leaf and not the running max changes."""
    tree, _, _ = leaves_and_batch(rng, cap, 1)
    isv = isv_host(ref_rt, per_alpha=0.6)
    got, want = both(cuda_rt, ref_rt, UPDATE_TREE, tree_grid(cap), SUBTREE_BLOCK, [
        tree, np.array([0.75], np.float32), np.zeros(1, np.uint32), np.zeros(1, np.int32), np.ones(1, np.float32),
        isv, 0, cap])
    same(got, want, "replay_update_tree, batch 0")  # float64 adds: bit-identical
    assert got[2][0] == 0, "the ticket is not back at 0"
    assert np.isnan(got[0][0]) and np.array_equal(got[0][1:], level_sums(tree[cap:])[1:])
    assert got[1][0] == np.float32(0.75)


@pytest.mark.parametrize("cap,grid", [(64, 2), (1 << 12, 3), (1 << 12, 5)])
def test_update_tree_other_grids_do_nothing(cuda_rt, ref_rt, rng, cap, grid):
    tree, index, td = leaves_and_batch(rng, cap, 100)
    isv = isv_host(ref_rt, per_alpha=0.6)
    args = [tree, np.array([0.75], np.float32), np.zeros(1, np.uint32), index, td, isv, 100, cap]
    got, want = both(cuda_rt, ref_rt, UPDATE_TREE, grid, SUBTREE_BLOCK, args)
    for g, w, a in zip(got, want, args):
        assert np.array_equal(g, a, equal_nan=True) and np.array_equal(w, a, equal_nan=True)


def test_chi_square_on_gpu_and_same_draws_as_reference(cuda_rt, ref_rt):
    cap, length, batch, rounds = 64, 50, 1000, 100
    r = np.random.default_rng(12345)
    leaves = np.zeros(cap)
    leaves[:length] = r.uniform(0.05, 3.0, length) ** 2
    leaves[[3, 17]] = 0.0
    counts = np.zeros(cap, np.int64)
    draws = []
    for rt in (cuda_rt, ref_rt):
        rb = ReplayBuffer(rt, IsvBus(rt), capacity=cap, width=WIDTH, n_backtests=1, batch=batch, seed=99)
        rb.state["tree"].upload(np.concatenate([np.zeros(cap), leaves]))
        rb.state["counters"].upload(np.array([length, length, 0, 0], np.uint32))
        rb.rebuild()
        seen = []
        for _ in range(rounds if not draws else 3):
            rb.sample()
            seen.append(rb.sampled["index"].download())
        draws.append(seen)
        rb.close()
    for idx in draws[0]:
        counts += np.bincount(idx, minlength=cap)
    for a, b in zip(draws[0], draws[1]):
        assert np.array_equal(a, b)
    assert counts[length:].sum() == 0 and counts[3] == 0 and counts[17] == 0
    positive = leaves > 0
    expected = leaves[positive] / leaves.sum() * counts.sum()
    stat = float(((counts[positive] - expected) ** 2 / expected).sum())
    assert chi_square_sf(stat, int(positive.sum()) - 1) > 1e-3, stat


def test_float64_tree_at_2_20_never_yields_unfilled_or_zero_leaves(cuda_rt):
    cap, batch = 1 << 20, 65_536
    r = np.random.default_rng(2)
    length = cap - 12_345
    leaves = np.zeros(cap)
    leaves[:length] = 10.0 ** r.uniform(-30, 30, length)
    leaves[:length][r.random(length) < 0.25] = 0.0
    leaves[length - 1] = 0.0
    rb = ReplayBuffer(cuda_rt, IsvBus(cuda_rt), capacity=cap, width=WIDTH, n_backtests=1, batch=batch, seed=5)
    rb.state["tree"].upload(np.concatenate([np.zeros(cap), leaves]))
    rb.state["counters"].upload(np.array([length, length, 0, 0], np.uint32))
    rb.rebuild()
    for _ in range(20):
        rb.sample()
        idx = rb.sampled["index"].download()
        assert idx.min() >= 0 and idx.max() < length
        assert np.all(leaves[idx] > 0)
        assert np.all(np.diff(idx) >= 0)
    rb.close()


def test_buffer_push_flush_matches_reference_over_steps(cuda_rt, ref_rt):
    kw = dict(width=WIDTH, capacity=256, n_backtests=100, batch=64, n_max=8, seed=3)
    bufs = []
    for rt in (cuda_rt, ref_rt):
        bus = IsvBus(rt)
        bus["n_step"] = 4
        bufs.append(ReplayBuffer(rt, bus, **kw))
    r = np.random.default_rng(8)
    for t in range(12):
        s = random_step(r, 100, 64, done_rate=0.1)
        for rb in bufs:
            upload_step(rb, s)
            rb.push()
            rb.flush()
            rb.next_state()
    a, b = (rb.export_state() for rb in bufs)
    for k in STATE_NAMES:
        if a[k].dtype.kind == "f":
            assert_close(a[k], b[k], 1e-6, k)
        else:
            assert np.array_equal(a[k], b[k]), k
    assert int(a["counters"][CTR_LENGTH]) == 256
    for rb in bufs:
        rb.close()


def test_graph_step_equals_eager_step(cuda_rt):
    kw = dict(width=WIDTH, capacity=1 << 12, n_backtests=1024, batch=1024, n_max=8, seed=21)
    eager = ReplayBuffer(cuda_rt, IsvBus(cuda_rt), **kw)
    graphed = ReplayBuffer(cuda_rt, IsvBus(cuda_rt), **kw)
    steps = [random_step(np.random.default_rng(t), 1024, 1024) for t in range(12)]
    upload_step(graphed, steps[0])
    graphed.step()  # warm up on the capture stream
    with cuda_rt.capture(name="replay step") as cap:
        graphed.step()
    assert cap.graph.kernel_count == graphed.launches_per_step
    graphed.reset()
    for s in steps:
        upload_step(eager, s)
        eager.step()
        upload_step(graphed, s)
        cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    se, sg = eager.export_state(), graphed.export_state()
    for k in STATE_NAMES:
        assert np.array_equal(se[k], sg[k]), k
    for k in eager.sampled:
        assert np.array_equal(eager.sampled[k].download(), graphed.sampled[k].download()), k
    assert eager.length() > 1024
    cap.graph.close()
    eager.close()
    graphed.close()
