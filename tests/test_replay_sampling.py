"""Sum-tree sampling, importance weights, priority updates and rebuild on the reference backend."""
import numpy as np
import pytest

from foxc.isv import IsvBus
from foxc.replay import ReplayBuffer
from foxc.replay.layout import CTR_LENGTH, CTR_WRITE_HEAD, PRIORITY_EPS, SUBTREE_SPAN, WALK_DEPTH
from foxc.replay.sampling import tree_walk
from replay_helpers import WIDTH, chi_square_sf, random_step, upload_step


def build_tree(leaves: np.ndarray, dtype=np.float64) -> np.ndarray:
    """Internal sums level by level: tree[k] = tree[2k] + tree[2k+1], the adds replay_update_tree does."""
    cap = leaves.size
    tree = np.zeros(2 * cap, dtype)
    tree[cap:] = leaves
    first = cap // 2
    while first >= 1:
        tree[first:2 * first] = tree[2 * first:4 * first:2] + tree[2 * first + 1:4 * first:2]
        first //= 2
    return tree


def buffer_with_leaves(rt, leaves, length, batch, seed=3, isv=None):
    """A buffer whose first `length` slots are filled (random rows) with the given leaf priorities."""
    cap = leaves.size
    rb = ReplayBuffer(rt, isv or IsvBus(rt), capacity=cap, width=WIDTH, n_backtests=1, batch=batch, seed=seed)
    st = rb.export_state()
    r = np.random.default_rng(0)
    st["store_h_t"][:] = r.standard_normal(st["store_h_t"].shape)
    st["store_h_tp1"][:] = r.standard_normal(st["store_h_tp1"].shape)
    st["store_rows"][:] = r.standard_normal(st["store_rows"].shape)
    st["store_rows"][:, 0] = r.integers(0, 5, cap)
    st["tree"][cap:] = leaves
    st["counters"][CTR_LENGTH] = length
    st["counters"][CTR_WRITE_HEAD] = length % cap
    rb.import_state(st)
    rb.rebuild()
    return rb


def test_tree_walk_matches_cumulative_search(rng):
    cap = 256
    leaves = rng.integers(0, 50, cap).astype(np.float64)  # integers: every sum is exact
    leaves[rng.random(cap) < 0.3] = 0.0
    tree = build_tree(leaves)
    u = np.arange(int(leaves.sum())) + 0.5
    want = np.searchsorted(np.cumsum(leaves), u, side="right")
    assert np.array_equal(tree_walk(tree, u, cap), want)


def test_rebuild_kernel_matches_naive_sums(ref_rt, rng):
    cap = 512
    leaves = rng.random(cap) * 10.0 ** rng.uniform(-6, 6, cap)
    rb = buffer_with_leaves(ref_rt, leaves, cap, batch=4)
    tree = rb.export_state()["tree"]
    assert np.array_equal(tree, np.concatenate([[0.0], build_tree(leaves)[1:]]))
    assert abs(tree[1] - leaves.sum()) <= 1e-12 * leaves.sum()
    assert len(rb.rebuild_plans) == 1


@pytest.mark.parametrize("cap", [2048, 1 << 14, 1 << 20])
def test_subtree_rebuild_has_the_level_by_level_bits(ref_rt, rng, cap):
    """Subtrees of SUBTREE_SPAN leaves, then (the last block) their top: every node bit-identical to the
    one-level-per-launch sums, in one launch."""
    leaves = rng.random(cap) * 10.0 ** rng.uniform(-20, 20, cap)
    leaves[rng.random(cap) < 0.1] = 0.0
    rb = ReplayBuffer(ref_rt, IsvBus(ref_rt), capacity=cap, width=WIDTH, n_backtests=1, batch=1)
    rb.state["tree"].upload(np.concatenate([np.full(cap, np.nan), leaves]))
    rb.rebuild()
    got = rb.state["tree"].download()
    assert len(rb.rebuild_plans) == 1
    assert np.isnan(got[0]) and np.array_equal(got[1:], build_tree(leaves)[1:])
    rb.close()


def lookahead_walk(tree, u, cap):
    """replay_sample's walk written out per u: WALK_DEPTH levels staged at a time in heap order, then walked."""
    out = []
    for v in u:
        node, levels = 1, cap.bit_length() - 1
        while levels > 0:
            r = min(levels, WALK_DEPTH)
            below = np.full(2 << r, np.nan)
            for j in range(2, 2 << r):  # what lane j - 2 loads
                d = j.bit_length() - 1
                below[j] = tree[(node << d) + (j - (1 << d))]
            j = 1
            for _ in range(r):
                left, right = below[2 * j], below[2 * j + 1]
                if (v < left and left > 0.0) or not right > 0.0:
                    j = 2 * j
                else:
                    v -= left
                    j = 2 * j + 1
            node = (node << r) + (j - (1 << r))
            levels -= r
        out.append(node - cap)
    return np.array(out)


@pytest.mark.parametrize("cap", [2, 4, 16, 32, 1 << 9, 1 << 16, 1 << 17])
def test_lookahead_walk_reaches_the_same_leaf(rng, cap):
    """The kernel's staged walk makes the same float64 compares and subtractions as the one-level walk."""
    leaves = rng.random(cap) * 10.0 ** rng.uniform(-8, 8, cap)
    leaves[rng.random(cap) < 0.3] = 0.0
    leaves[: cap // 4] = 0.0 if cap >= 8 else leaves[: cap // 4]
    tree = build_tree(leaves)
    root = tree[1]
    u = np.concatenate([rng.random(300) * root, np.cumsum(leaves)[rng.integers(0, cap, 100)],
                        [0.0, root, np.nextafter(root, 0)]])
    assert np.array_equal(lookahead_walk(tree, u, cap), tree_walk(tree, u, cap))


def test_sampling_frequencies_match_priorities_chi_square(ref_rt):
    cap, length, batch, rounds = 64, 50, 1000, 100  # 10^5 draws
    r = np.random.default_rng(12345)
    leaves = np.zeros(cap)
    leaves[:length] = r.uniform(0.05, 3.0, length) ** 2
    leaves[[3, 17]] = 0.0  # filled but zero priority: never drawn
    rb = buffer_with_leaves(ref_rt, leaves, length, batch, seed=99)
    counts = np.zeros(cap, np.int64)
    for _ in range(rounds):
        rb.sample()
        counts += np.bincount(rb.sampled["index"].download(), minlength=cap)
    assert counts.sum() == batch * rounds
    assert counts[length:].sum() == 0 and counts[3] == 0 and counts[17] == 0
    positive = leaves > 0
    expected = leaves[positive] / leaves.sum() * counts.sum()
    stat = float(((counts[positive] - expected) ** 2 / expected).sum())
    p = chi_square_sf(stat, int(positive.sum()) - 1)
    assert p > 1e-3, f"chi-square {stat:.1f} on {positive.sum() - 1} dof, p = {p:.2e}"


def test_sample_outputs_and_weights_match_naive(ref_rt):
    cap, length, batch = 128, 100, 64
    r = np.random.default_rng(5)
    leaves = np.zeros(cap)
    leaves[:length] = r.uniform(0.01, 2.0, length)
    isv = IsvBus(ref_rt)
    isv["per_beta"] = 0.7
    rb = buffer_with_leaves(ref_rt, leaves, length, batch, isv=isv)
    rng0 = rb.export_state()["rng"]
    rb.sample()
    st = rb.export_state()
    idx = rb.sampled["index"].download()
    # the generator, strata and walk, written out plainly
    x = rng0.astype(np.uint64)
    for sh in (13, -17, 5):
        x = (x ^ ((x << sh) if sh > 0 else (x >> -sh))) & 0xFFFFFFFF
    assert np.array_equal(st["rng"], x.astype(np.uint32))
    u = (np.arange(batch) + (x >> 8).astype(np.float64) / 2**24) * leaves.sum() / batch
    want = np.minimum(np.searchsorted(np.cumsum(leaves), u, side="right"), length - 1)
    assert np.sum(idx != want) <= 1  # a boundary may round either way
    assert np.all(np.diff(idx) >= 0)
    assert np.array_equal(rb.sampled["h_t"].download(), st["store_h_t"][idx])
    assert np.array_equal(rb.sampled["h_tp1"].download(), st["store_h_tp1"][idx])
    assert np.array_equal(rb.sampled["action"].download(), st["store_rows"][idx, 0].astype(np.int32))
    assert np.array_equal(rb.sampled["return"].download(), st["store_rows"][idx, 1])
    assert np.array_equal(rb.sampled["gamma_n"].download(), st["store_rows"][idx, 5])
    prob = leaves[idx] / st["tree"][1]
    assert np.allclose(rb.sampled["prob"].download(), prob, rtol=1e-12)
    w = (length * prob) ** -0.7
    rb.next_state()  # the weights, from the batch's smallest prob that sample() left
    assert np.allclose(rb.sampled["weight"].download(), w / w.max(), rtol=1e-5)


def test_empty_buffer_samples_nothing(ref_rt):
    rb = ReplayBuffer(ref_rt, IsvBus(ref_rt), capacity=16, width=WIDTH, n_backtests=2, batch=8)
    rb.sample()
    rb.next_state()
    assert np.all(rb.sampled["index"].download() == -1)
    assert np.all(rb.sampled["weight"].download() == 0.0)
    assert np.all(rb.sampled["h_t"].download() == 0.0)
    rb.inputs["td"].upload(np.ones(8, np.float32))
    rb.update_priorities()  # index -1 writes nothing
    assert np.all(rb.export_state()["tree"] == 0.0)


@pytest.mark.parametrize("cap,batch", [(64, 40), (4 * SUBTREE_SPAN, 3000)])
def test_priority_update_matches_naive(ref_rt, rng, cap, batch):
    """The batch's leaves and the running max, then every internal node summed over the new leaves (one launch)."""
    isv = IsvBus(ref_rt)
    isv["per_alpha"] = 0.6
    rb = ReplayBuffer(ref_rt, isv, capacity=cap, width=WIDTH, n_backtests=1, batch=batch)
    index = np.sort(rng.integers(-1, cap, batch)).astype(np.int32)  # sorted, with duplicates and -1
    td = (rng.standard_normal(batch) * 3).astype(np.float32)
    td[5] = np.nan
    rb.sampled["index"].upload(index)
    rb.inputs["td"].upload(td)
    rb.update_priorities()
    st = rb.export_state()
    want = np.zeros(cap)
    largest = 1.0
    for i, t in zip(index, td):  # in order: the last write of a leaf wins
        if i < 0 or not np.isfinite(t):
            continue
        p = (abs(float(t)) + PRIORITY_EPS) ** 0.6
        want[i] = p
        largest = max(largest, p)
    # a NaN td leaves its leaf alone, even where an earlier duplicate was valid
    nan_leaf = index[5]
    if nan_leaf >= 0 and (5 == batch - 1 or index[6] != nan_leaf):
        want[nan_leaf] = 0.0
    assert np.allclose(st["tree"][cap:], want, rtol=1e-6)
    assert np.isclose(st["max_priority"][0], largest, rtol=1e-6)
    assert st["tree"][0] == 0.0 and np.array_equal(st["tree"][1:cap], build_tree(st["tree"][cap:])[1:cap])
    assert len(rb.update_plans) == 1


def test_same_seed_same_samples(ref_rt, rng):
    def run(seed):
        isv = IsvBus(ref_rt)
        rb = ReplayBuffer(ref_rt, isv, capacity=64, width=WIDTH, n_backtests=5, batch=16, seed=seed)
        r = np.random.default_rng(2)
        out = []
        for _ in range(20):
            upload_step(rb, random_step(r, 5, 16))
            rb.step()
            out.append(rb.sampled["index"].download())
        return np.concatenate(out)
    a, b, c = run(7), run(7), run(8)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_tree_never_yields_unfilled_or_zero_leaves(seed):
    """2^20 leaves spanning 60 orders of magnitude, a quarter zero, the tail unfilled; adversarial u."""
    cap = 1 << 20
    r = np.random.default_rng(seed)
    length = cap - 12_345
    leaves = np.zeros(cap)
    leaves[:length] = 10.0 ** r.uniform(-30, 30, length)
    leaves[:length][r.random(length) < 0.25] = 0.0
    leaves[length - 1] = 0.0  # the clamp target itself has priority 0
    tree = build_tree(leaves)
    root = tree[1]
    cum = np.cumsum(leaves)
    u = np.concatenate([
        r.random(200_000) * root,                              # proportional draws
        (np.arange(65_536) + r.random(65_536)) * (root / 65_536),  # one stratified batch
        cum[r.integers(0, length, 50_000)],                    # exactly on a prefix boundary
        [0.0, root, np.nextafter(root, np.inf), root * 2, np.nextafter(root, 0)],
    ])
    leaf = tree_walk(tree, u, cap)
    assert leaf.max() < length
    assert np.all(leaves[leaf] > 0)


def naive_walk(tree, u, cap):
    """The textbook walk (go left when u <= left), without the zero-subtree guard."""
    node = np.ones(u.shape, np.int64)
    while node[0] < cap:
        left = tree[2 * node]
        go_left = u <= left
        u = np.where(go_left, u, (u - left).astype(tree.dtype))
        node = 2 * node + (~go_left).astype(np.int64)
    return node - cap


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_textbook_walk_breaks_where_ours_does_not(rng, dtype):
    """The guard is what makes the result exact: the textbook walk lands on empty leaves at the edges."""
    cap = 1 << 12
    length = cap - 100
    leaves = np.zeros(cap)
    leaves[:length] = np.exp(rng.normal(0, 3, length))
    leaves[:8] = 0.0  # a zero-sum left subtree at the very start
    tree = build_tree(leaves.astype(dtype), dtype)
    root = tree[1]
    u = np.array([0.0, root, root * (1 + 1e-6)], dtype)
    bad = lambda leaf: (leaf >= length) | (leaves[np.minimum(leaf, cap - 1)] == 0)
    assert bad(naive_walk(tree, u, cap)).sum() >= 2
    assert not bad(tree_walk(tree, u, cap)).any()
