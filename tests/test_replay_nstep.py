"""The n-step ring and flush on the reference backend against a naive model."""
import numpy as np
import pytest

from foxc.isv import IsvBus
from foxc.replay import ReplayBuffer
from foxc.replay.layout import (CTR_LENGTH, CTR_WRITE_HEAD, TR_ACTION, TR_DONE, TR_GAMMA_N, TR_LOG_PI, TR_RETURN,
                                TR_RETURN_RAW, TR_STEPS)
from foxc.replay.nstep import n_step_of
from replay_helpers import WIDTH, NaiveNStep, random_step, upload_step


def check_storage(rb, naive):
    st = rb.export_state()
    assert int(st["counters"][CTR_WRITE_HEAD]) == naive.head
    assert int(st["counters"][CTR_LENGTH]) == naive.length
    assert len(naive.slots) == naive.length
    for slot, tr in naive.slots.items():
        row = st["store_rows"][slot]
        assert np.array_equal(st["store_h_t"][slot], tr["h_t"]), slot
        assert np.array_equal(st["store_h_tp1"][slot], tr["h_tp1"]), slot
        assert row[TR_ACTION] == tr["action"] and row[TR_STEPS] == tr["steps"] and row[TR_DONE] == tr["done"]
        assert row[TR_LOG_PI] == np.float32(tr["log_pi"])
        for col, key in ((TR_RETURN, "return"), (TR_RETURN_RAW, "return_raw"), (TR_GAMMA_N, "gamma_n")):
            assert abs(row[col] - tr[key]) <= 1e-5 * (1 + abs(tr[key])), (slot, key, row[col], tr[key])
        assert st["tree"][rb.capacity + slot] == 1.0  # inserted at the running max priority


@pytest.mark.parametrize("n_max,n_seq,done_rate", [
    (8, [3], 0.15), (1, [1], 0.1), (8, [8], 0.05), (4, [4, 2, 1, 3], 0.2), (8, [6, 2], 0.0), (3, [3], 1.0)])
def test_nstep_returns_match_naive_across_dones(ref_rt, rng, n_max, n_seq, done_rate):
    n_backtests, capacity = 7, 1024
    isv = IsvBus(ref_rt)
    isv["gamma"] = 0.9
    rb = ReplayBuffer(ref_rt, isv, capacity=capacity, width=WIDTH, n_backtests=n_backtests, batch=4, n_max=n_max, seed=1)
    naive = NaiveNStep(n_backtests, capacity)
    for phase, n in enumerate(n_seq):
        isv["n_step"] = n
        for _ in range(12):
            s = random_step(rng, n_backtests, 4, done_rate)
            upload_step(rb, s)
            rb.push()
            rb.flush()
            rb.next_state()
            naive.step(s, min(n, n_max), float(np.float32(0.9)))
            check_storage(rb, naive)


def test_write_head_wraps_and_oversized_flush_keeps_the_last(ref_rt, rng):
    n_backtests, capacity = 9, 8  # a done-everywhere step emits more than the capacity at once
    isv = IsvBus(ref_rt)
    isv["n_step"] = 2
    rb = ReplayBuffer(ref_rt, isv, capacity=capacity, width=WIDTH, n_backtests=n_backtests, batch=4, n_max=4, seed=1)
    naive = NaiveNStep(n_backtests, capacity)
    heads = []
    for t in range(25):
        s = random_step(rng, n_backtests, 4, done_rate=1.0 if t % 5 == 4 else 0.1)
        upload_step(rb, s)
        rb.push()
        rb.flush()
        rb.next_state()
        naive.step(s, 2, float(np.float32(isv["gamma"])))
        check_storage(rb, naive)
        heads.append(naive.head)
    assert naive.length == capacity and len(set(heads)) > 1


def test_draws_of_pending_next_states_get_this_steps_h_tp1(ref_rt, rng):
    """flush leaves the next states that are this step's h_tp1 pending and sample draws some of them (once the
    write head wraps onto leaves the tree's sums hold) before h_tp1 exists; next_state then writes them: the
    batch equals its stored rows, stored next states equal the naive model's, nothing stays pending."""
    n_backtests, capacity, batch = 24, 64, 64
    isv = IsvBus(ref_rt)
    isv["n_step"] = 2
    rb = ReplayBuffer(ref_rt, isv, capacity=capacity, width=WIDTH, n_backtests=n_backtests, batch=batch, n_max=4,
                      seed=2)
    naive = NaiveNStep(n_backtests, capacity)
    drawn_pending = 0
    for _ in range(8):
        s = random_step(rng, n_backtests, batch, done_rate=0.1)
        upload_step(rb, s)
        rb.push()
        rb.flush()
        pending = rb.scratch["pending"].download()
        rb.sample()
        drew = rb.scratch["drew_pending"].download()
        index = rb.sampled["index"].download()
        assert np.array_equal(drew, np.where(index >= 0, pending[np.maximum(index, 0)] - 1, -1))
        drawn_pending += int((drew >= 0).sum())
        rb.next_state()
        naive.step(s, 2, float(np.float32(isv["gamma"])))
        st = rb.export_state()
        for slot, tr in naive.slots.items():
            assert np.array_equal(st["store_h_tp1"][slot], tr["h_tp1"]), slot
        filled = index >= 0
        assert np.array_equal(rb.sampled["h_tp1"].download()[filled], st["store_h_tp1"][index[filled]])
        assert np.array_equal(rb.sampled["h_tp1"].download()[drew >= 0], s["h_tp1"][drew[drew >= 0]])
        assert not rb.scratch["pending"].download().any()
        rb.update_priorities()  # the tree's sums take in the flushed leaves: later draws reach them
    assert drawn_pending > 0


def test_import_state_leaves_nothing_pending(ref_rt, rng):
    """A flush leaves next states pending; importing a saved state clears the marks, so a later next_state
    cannot write this step's h_tp1 into the imported storage."""
    kw = dict(capacity=64, width=WIDTH, n_backtests=6, batch=8, n_max=4, seed=1)
    isv = IsvBus(ref_rt)
    isv["n_step"] = 1
    rb = ReplayBuffer(ref_rt, isv, **kw)
    upload_step(rb, random_step(rng, 6, 8))
    rb.push()
    rb.flush()
    rb.next_state()
    saved = rb.export_state()
    upload_step(rb, random_step(rng, 6, 8))
    rb.push()
    rb.flush()
    assert rb.scratch["pending"].download().any()
    rb.import_state(saved)
    assert not rb.scratch["pending"].download().any() and np.all(rb.scratch["drew_pending"].download() == -1)
    rb.next_state()
    st = rb.export_state()
    assert all(np.array_equal(st[k], saved[k]) for k in saved), "next_state wrote into the imported state"


def test_n_step_slot_is_clamped_to_ring():
    v = np.zeros(64, np.float32)
    from foxc.isv.registry import slot_index
    for value, want in [(0.0, 1), (-3.0, 1), (3.7, 3), (12.0, 5), (np.nan, 1)]:
        v[slot_index("n_step")] = value
        assert n_step_of(v, 5) == want
