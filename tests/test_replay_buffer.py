"""ReplayBuffer: layout vs header, validation, export/import resume, graph vs eager (reference backend)."""

import numpy as np
import pytest

from foxc.isv import IsvBus
from foxc.replay import STATE_NAMES, ReplayBuffer
from replay_helpers import WIDTH, random_step, upload_step

@pytest.mark.parametrize("kw", [dict(capacity=48), dict(capacity=1 << 21), dict(n_max=9), dict(n_max=0),
                                dict(batch=0), dict(n_backtests=70_000)])
def test_bad_sizes_rejected(ref_rt, kw):
    args = dict(capacity=64, n_backtests=4, batch=8, width=WIDTH) | kw
    with pytest.raises(ValueError):
        ReplayBuffer(ref_rt, IsvBus(ref_rt), **args)


def run_steps(rb, r, steps):
    out = []
    for _ in range(steps):
        upload_step(rb, random_step(r, rb.n_backtests, rb.batch))
        rb.step()
        out.append(rb.sampled["index"].download())
        out.append(rb.sampled["weight"].download())
    return out


def test_export_import_resumes_exactly(ref_rt):
    kw = dict(width=WIDTH, capacity=32, n_backtests=6, batch=8, n_max=4, seed=11)
    a = ReplayBuffer(ref_rt, IsvBus(ref_rt), **kw)
    run_steps(a, np.random.default_rng(1), 10)
    saved = a.export_state()
    assert set(saved) == set(STATE_NAMES) | {"config"}
    tail_a = run_steps(a, np.random.default_rng(2), 10)
    b = ReplayBuffer(ref_rt, IsvBus(ref_rt), **(kw | {"seed": 999}))
    b.import_state(saved)
    tail_b = run_steps(b, np.random.default_rng(2), 10)
    for x, y in zip(tail_a, tail_b):
        assert np.array_equal(x, y)
    other = ReplayBuffer(ref_rt, IsvBus(ref_rt), **(kw | {"capacity": 64}))
    with pytest.raises(ValueError, match="capacity"):
        other.import_state(saved)
    bad = dict(saved, tree=saved["tree"].astype(np.float32))
    with pytest.raises(ValueError, match="tree"):
        b.import_state(bad)


def test_graph_replay_equals_eager(ref_rt):
    kw = dict(width=WIDTH, capacity=64, n_backtests=5, batch=8, n_max=3, seed=4)
    eager = ReplayBuffer(ref_rt, IsvBus(ref_rt), **kw)
    graphed = ReplayBuffer(ref_rt, IsvBus(ref_rt), **kw)
    steps = [random_step(np.random.default_rng(t), 5, 8) for t in range(15)]
    upload_step(graphed, steps[0])
    with ref_rt.capture(name="replay step") as cap:
        graphed.step()
    # push; scan + write; sample (weights included); the priorities and the tree's sums
    assert cap.graph.kernel_count == graphed.launches_per_step == 1 + 2 + 1 + 1
    for s in steps:
        upload_step(eager, s)
        eager.step()
        upload_step(graphed, s)
        cap.graph.launch(ref_rt.stream)
    se, sg = eager.export_state(), graphed.export_state()
    for k in STATE_NAMES:
        assert np.array_equal(se[k], sg[k]), k
    for k in eager.sampled:
        assert np.array_equal(eager.sampled[k].download(), graphed.sampled[k].download()), k


@pytest.mark.parametrize("capacity", [2, 1024, 2048, 1 << 16, 1 << 20])
def test_launches_per_step(ref_rt, capacity):
    rb = ReplayBuffer(ref_rt, IsvBus(ref_rt), capacity=capacity, width=WIDTH, n_backtests=1, batch=1)
    assert len(rb.update_plans) == len(rb.rebuild_plans) == 1
    assert rb.launches_per_step == 1 + 2 + 1 + 1  # push; flush scan and write; sample; priorities and sums
    rb.close()


def test_external_inputs_are_used(ref_rt):
    h = ref_rt.device_array((3, WIDTH), np.float32, "agent.state")
    h.upload(np.full((3, WIDTH), 2.5, np.float32))
    isv = IsvBus(ref_rt)
    isv["n_step"] = 1
    rb = ReplayBuffer(ref_rt, isv, capacity=8, width=WIDTH, n_backtests=3, batch=2, inputs={"h_t": h})
    assert rb.inputs["h_t"] is h
    rb.push()
    rb.flush()
    assert np.all(rb.export_state()["store_h_t"][:3] == 2.5)
    with pytest.raises(ValueError, match="unknown"):
        ReplayBuffer(ref_rt, isv, capacity=8, width=WIDTH, n_backtests=3, batch=2, inputs={"hidden": h})


@pytest.mark.parametrize("kw, message", [
    (dict(capacity=64.5), "capacity must be"), (dict(capacity="64"), "capacity must be"),
    (dict(batch=2.5), "batch must be"), (dict(n_backtests=None), "n_backtests must be"),
    (dict(seed=-1), "seed must be"), (dict(seed=1.7), "seed must be"), (dict(width=True), "width"),
])
def test_sizes_and_seed_that_are_no_whole_numbers_are_refused(ref_rt, kw, message):
    """capacity 64.5 or "64" failed with a TypeError on '&' or '<', batch=2.5 was cut to 2 and seed=1.7 to 1 without
    a word, seed=-1 failed in numpy: a ValueError naming the argument and its value. Whole floats still work."""
    args = dict(capacity=64, n_backtests=4, batch=8, width=WIDTH) | kw
    with pytest.raises(ValueError, match=f"{message}.*got {kw[next(iter(kw))]!r}"):
        ReplayBuffer(ref_rt, IsvBus(ref_rt), **args)
    assert ReplayBuffer(ref_rt, IsvBus(ref_rt), capacity=64.0, n_backtests=4, batch=8, width=WIDTH).capacity == 64


@pytest.mark.parametrize("name, shape, dtype", [("h_t", (4, WIDTH // 2), np.float32), ("h_t", (4, WIDTH), np.int32),
                                                ("action", (4,), np.float32), ("td", (4,), np.float32)])
def test_given_inputs_of_another_shape_or_dtype_are_refused(ref_rt, name, shape, dtype):
    """An input handed in of the wrong shape or dtype was taken: the kernels read it by pointer (past its end on a
    GPU, or its int bits as floats). Refused naming the input, its expected and its actual layout."""
    given = ref_rt.device_array(shape, dtype, "given")
    with pytest.raises(ValueError, match=f"replay input '{name}' must be"):
        ReplayBuffer(ref_rt, IsvBus(ref_rt), capacity=64, n_backtests=4, batch=8, width=WIDTH, inputs={name: given})
