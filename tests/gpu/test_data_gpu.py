"""The data kernels on a real GPU against their numpy references: gather, advances, whole episodes, graphs."""
import numpy as np
import pytest

from foxc.data import cursors, gather
from foxc.data.cursors import valid_starts
from foxc.data.device import DeviceDataset, valid_cursors
from foxc.rng import seed_states
from foxc.data.features import FEATURES, GATHER_BLOCK, HORIZONS, LABEL_PLANES
from foxc.data.labels import compute_labels
from foxc.data.record import PRICE_UNDEF
from foxc.data.synthetic import synthetic_data
from foxc.testing import assert_close, poisoned, run_kernel


def dataset(n, segments, seed):
    data = synthetic_data(n, seed=seed, n_segments=segments)
    data.records["ask_px"][::11, 6:] = PRICE_UNDEF  # thin books exercise the empty-level branches
    data.records["ask_sz"][::11, 6:] = 0
    return data, compute_labels(data.records, data.tick)


def gather_args(data, labels, B, K, rng, cursors, done, max_steps=0):
    starts, ends = data.segment_bounds()
    valid = valid_cursors(data, K)
    return [data.records, labels, ends.astype(np.int32), valid,
            cursors.astype(np.int32), rng.integers(0, 7, B).astype(np.int32), done.astype(np.int32),
            poisoned(B, np.int32), seed_states(int(rng.integers(1 << 30)), B, "data"),
            poisoned((K, B, FEATURES)), poisoned((LABEL_PLANES, B, HORIZONS)),
            len(data.records), len(valid), B, K, data.tick, max_steps]


@pytest.mark.parametrize("B, K", [(1, 1), (37, 5), (1024, 32), (300, 128)])
def test_gather_matches_reference(cuda_rt, ref_rt, rng, B, K):
    data, labels = dataset(60_000, 5, int(rng.integers(1 << 30)))
    valid = valid_cursors(data, K)
    cursors = np.where(rng.random(B) < 0.5, -1, valid[rng.integers(0, len(valid), B)])
    done = rng.random(B) < 0.3
    args = gather_args(data, labels, B, K, rng, cursors, done, max_steps=int(rng.integers(0, 4)))
    shared = gather.shared_bytes(K)
    got = run_kernel(cuda_rt, gather.SAMPLE_AND_GATHER, B, GATHER_BLOCK, [a.copy() if isinstance(a, np.ndarray)
                     else a for a in args], shared_bytes=shared)
    want = run_kernel(ref_rt, gather.SAMPLE_AND_GATHER, B, GATHER_BLOCK, [a.copy() if isinstance(a, np.ndarray)
                      else a for a in args], shared_bytes=shared)
    names = ["records", "labels", "segment_end", "valid_cursors", "cursors", "episode_steps", "done", "last", "rng",
             "features", "labels_out"]
    for name, g, w in zip(names, got, want):
        if name == "features":
            assert not np.isnan(g).any(), "features left unwritten"
            assert_close(g, w, 1e-6, name)
        else:
            assert g.tobytes() == w.tobytes(), name


def test_advance_matches_reference(cuda_rt, ref_rt, rng):
    B = 5000
    args = [rng.integers(0, 10**6, B).astype(np.int32), rng.integers(0, 100, B).astype(np.int32),
            (rng.random(B) < 0.2).astype(np.int32), poisoned(B, np.int32), B]
    got = run_kernel(cuda_rt, gather.ADVANCE_CURSORS, gather.advance_grid(B), gather.ADVANCE_BLOCK,
                     [a.copy() if isinstance(a, np.ndarray) else a for a in args])
    want = run_kernel(ref_rt, gather.ADVANCE_CURSORS, gather.advance_grid(B), gather.ADVANCE_BLOCK,
                      [a.copy() if isinstance(a, np.ndarray) else a for a in args])
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.parametrize("rows, B, episode_len", [(50_000, 1, 0), (50_000, 257, 1), (50_000, 5000, 17),
                                                  (3_000_000, 70_000, 0), (3_000_000, 4096, 2000)])
def test_cursor_advance_matches_reference(cuda_rt, ref_rt, rng, rows, B, episode_len):
    segment = (np.arange(rows, dtype=np.int64) * 7 // rows).astype(np.uint32)
    starts, seg_last = valid_starts(segment, int(rng.integers(0, 40)))
    cursor = rng.integers(0, rows, B).astype(np.int64)
    end = np.minimum(cursor + rng.integers(0, 100, B), rows - 1)
    end = np.where(rng.random(B) < 0.3, cursor, end)             # at the episode's end: a new draw
    end = np.where(rng.random(B) < 0.1, cursor - 1, end)         # past it (a placed cursor): a new draw
    unset = rng.random(B) < 0.2
    cursor[unset] = -1
    end[unset] = poisoned(int(unset.sum()), np.int64)            # never read where the cursor is unset
    state = rng.integers(1, 2**32, B, dtype=np.uint32)
    args = [cursor, end, state, starts, seg_last, episode_len, len(starts), B]
    grid = cursors.grid(B)
    got = run_kernel(cuda_rt, cursors.CURSOR_ADVANCE, grid, cursors.BLOCK, copies(args))
    want = run_kernel(ref_rt, cursors.CURSOR_ADVANCE, grid, cursors.BLOCK, copies(args))
    for name, g, w in zip(["cursor", "episode_end", "rng", "starts", "segment_last"], got, want):
        assert g.tobytes() == w.tobytes(), f"cursor_advance: {name} differs from the reference"
    drew = (cursor < 0) | (cursor >= end)
    assert np.all(got[2][drew] != state[drew]) and np.array_equal(got[2][~drew], state[~drew])


def run_steps(rt, data, labels, steps, graph: bool):
    ds = DeviceDataset(rt, data, labels, 256, 16, seed=9, max_episode_steps=40)
    if graph:
        ds.gather(); ds.advance()  # warm up on the stream, then capture one step
        ds.reset(9)
        rt.stream.synchronize()
        with rt.capture(name="data") as cap:
            ds.gather(); ds.advance()
        for _ in range(steps):
            cap.graph.launch(rt.stream)
    else:
        for _ in range(steps):
            ds.gather(); ds.advance()
    rt.stream.synchronize()
    out = {a.name: a.download() for a in ds.buffers()}
    ds.close()
    return out


def test_episodes_match_reference_and_graph_equals_eager(cuda_rt, ref_rt):
    data, labels = dataset(20_000, 3, 4)
    eager = run_steps(cuda_rt, data, labels, 120, graph=False)
    graphed = run_steps(cuda_rt, data, labels, 120, graph=True)
    reference = run_steps(ref_rt, data, labels, 120, graph=False)
    for name in eager:
        assert eager[name].tobytes() == graphed[name].tobytes(), f"{name}: graph differs from eager"
        if name == "features":
            assert_close(eager[name], reference[name], 1e-6, name)
        else:
            assert eager[name].tobytes() == reference[name].tobytes(), f"{name}: differs from the reference"
