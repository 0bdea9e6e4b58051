"""Training on more data than the device budget: the rotating resident set on the reference backend.

The data here is 12 segments, about 4x the budget (3 slots); one slot is refilled every 4 steps."""
import json
import subprocess
import sys

import numpy as np
import pytest

from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.resident import ROW_BYTES, ResidencyError, resident_slots
from foxc.data.synthetic import synthetic_data
from trainer_cases import assert_same_state, config, state, trainer

SEGMENTS, SLOTS, EVERY = 12, 3, 4


def rotating_market():
    m = synthetic_data(12_000, seed=3, n_segments=SEGMENTS)
    return m, compute_labels(m.records, m.tick, LabelConfig())


DATA = rotating_market()
_first, _end = DATA[0].segment_bounds()
LARGEST = int((_end - _first).max())
BUDGET_GB = (SLOTS + 0.5) * LARGEST * ROW_BYTES / 1e9  # room for 3 slots of the largest segment, not 4


def rotating_config(**over):
    return config(device_data_gb=BUDGET_GB, rotate_every=EVERY, **over)


def check_cursors_in_drawable_slots(t):
    """Every cursor in a slot that is resident, complete and not being refilled, inside its shard's rows."""
    rot = t.ts.rotation
    cursor = t.ts.cursors.cursor.download()
    rows = rot.drawable_rows()
    inside = np.zeros(cursor.shape, bool)
    for lo, hi in rows:
        inside |= (cursor >= lo) & (cursor <= hi)
    assert inside.all(), (f"step {t.steps_done}: cursors {cursor[~inside].tolist()} outside the drawable slots {rows}"
                          f" (refilling slot {rot.pending})")


def walk(t, steps):
    for _ in range(steps):
        t.step()
        check_cursors_in_drawable_slots(t)


def test_slots_from_the_budget_and_the_error_naming_the_sizes():
    assert resident_slots([100, 50], 150 * ROW_BYTES) == 0  # fits: the plain layout
    assert resident_slots([100, 50, 80], 229 * ROW_BYTES) == 2
    with pytest.raises(ResidencyError, match=r"at least 2 slots of the largest shard \(100 snapshots"):
        resident_slots([100, 50, 80], 199 * ROW_BYTES)


def test_a_rotating_run_visits_every_shard_and_draws_only_in_resident_slots(ref_rt):
    t = trainer(ref_rt, rotating_config(), DATA)
    rot = t.ts.rotation
    assert rot is not None and (rot.S, rot.n) == (SLOTS, SEGMENTS)
    seen = set(rot.slot_shard.tolist())
    check_cursors_in_drawable_slots(t)
    for _ in range(12 * EVERY):
        walk(t, 1)
        seen |= set(rot.slot_shard.tolist())
    assert seen == set(range(SEGMENTS)), "a shard was never resident"
    assert rot.rotations == (12 * EVERY - 1) // EVERY == rot.rotations_by(t.steps_done)
    assert sorted(rot.order.tolist()) == list(range(SEGMENTS))
    # what a slot holds on the device is its shard's rows, segment set to the slot
    records = t.ts.data.records.download()
    for slot, shard in enumerate(rot.slot_shard):
        if slot == rot.pending:
            continue
        a, n = int(rot.first[shard]), int(rot.rows[shard])
        got = records[slot * rot.P:slot * rot.P + n]
        assert (got["segment"] == slot).all()
        assert got["bid_px"].tobytes() == DATA[0].records["bid_px"][a:a + n].tobytes()
    assert np.isfinite(t.ts.losses.host).all()


def test_without_the_eviction_a_refilling_slot_would_be_read(ref_rt, monkeypatch):
    """The invariant check above fails when a slot being refilled keeps its backtests."""
    t = trainer(ref_rt, rotating_config(episode_steps=0), DATA)
    monkeypatch.setattr(t.ts.cursors, "evict", lambda lo, hi, stream=None: None)
    with pytest.raises(AssertionError, match="outside the drawable slots"):
        walk(t, 3 * EVERY)


def test_a_late_refill_changes_nothing(ref_rt, monkeypatch):
    """Emulate a side-stream copy still in flight until its fence: the slot holds garbage until the next
    boundary. A step that read the slot meanwhile would change the run's bits."""
    straight = trainer(ref_rt, rotating_config(), DATA)
    walk(straight, 5 * EVERY + 2)
    late = trainer(ref_rt, rotating_config(), DATA)
    rot, rt, deferred = late.ts.rotation, ref_rt, []
    real_copy = rot._copy

    def copy_later(slot, buffer, stream):
        if stream is not rot.side:
            return real_copy(slot, buffer, stream)
        poison = rot.records.download()
        poison.view(np.uint8).reshape(len(poison), -1)[slot * rot.P:(slot + 1) * rot.P] = 0xFF
        rot.records.upload(poison)
        deferred.append(lambda: real_copy(slot, buffer, rt.stream))

    def fence(event):
        while deferred:
            deferred.pop()()
    monkeypatch.setattr(rot, "_copy", copy_later)
    monkeypatch.setattr(rt.stream, "wait", fence)
    walk(late, 5 * EVERY + 2)
    assert deferred, "the last refill should still be pending"
    assert_same_state(state(straight), state(late))


def test_refilled_slots_forget_the_held_windows(ref_rt):
    """A reload of the slots and each boundary that ends a refill leave no window held (the gather forms them
    whole), so no window is ever moved from rows that changed under it."""
    t = trainer(ref_rt, rotating_config(), DATA)
    data = t.ts.data
    walk(t, 2)
    assert (data.held.download() >= 0).all()
    t.ts.rotation._load_all()
    assert (data.held.download() == -1).all()
    walk(t, 2 * EVERY - 2)  # up to the second boundary: the first one's refill ends there
    assert t.ts.rotation.pending >= 0 and (data.held.download() >= 0).all()
    t.ts.rotation.before_step(t.steps_done)
    assert (data.held.download() == -1).all()


def test_graph_replay_equals_eager_while_rotating(ref_rt):
    eager = trainer(ref_rt, rotating_config(), DATA)
    eager.train(4 * EVERY + 1)
    graphed = trainer(ref_rt, rotating_config(graph="on"), DATA)
    graphed.train(4 * EVERY + 1)
    assert graphed.graph is not None and graphed.graph_step < 2 * EVERY
    assert_same_state(state(eager), state(graphed))


@pytest.mark.parametrize("at", [2 * EVERY, 2 * EVERY + 1, 2 * EVERY + 3])
def test_resume_of_a_rotating_run_is_bit_identical(ref_rt, tmp_path, at):
    """Checkpoints just before a boundary, just after it (a refill pending), and in between."""
    total = 4 * EVERY + 2
    cfg = rotating_config(graph="on")
    straight = trainer(ref_rt, cfg, DATA)
    straight.train(total)
    first = trainer(ref_rt, cfg, DATA, tmp_path)
    first.train(at)
    path = first.save()
    resumed = trainer(ref_rt, cfg, DATA, tmp_path / "b")
    assert resumed.resume(path) == at
    assert resumed.ts.rotation.describe() == first.ts.rotation.describe()
    resumed.train(total - at)
    assert resumed.ts.rotation.describe() == straight.ts.rotation.describe()
    assert_same_state(state(straight), state(resumed))


def test_resume_with_another_budget_is_refused(ref_rt, tmp_path):
    first = trainer(ref_rt, rotating_config(), DATA, tmp_path)
    first.train(EVERY + 1)
    path = first.save()
    other = trainer(ref_rt, config(device_data_gb=BUDGET_GB * 1.4, rotate_every=EVERY), DATA, tmp_path / "b")
    with pytest.raises(Exception, match="resident.slots"):
        other.resume(path)


def test_data_that_fits_is_all_resident(ref_rt):
    t = trainer(ref_rt, config(), DATA)
    assert t.ts.rotation is None and t.cfg.device_data_gb == 1.0  # the reference backend's default
    assert t.residency() == {"rotating": False, "device_data_gb": 1.0}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "foxc.train", "--backend", "reference", *args],
                          capture_output=True, text=True, timeout=600)


def test_cli_refuses_a_budget_below_two_slots(tmp_path):
    done = cli("--synthetic-rows", "12000", "--n-steps", "12", "--n-backtests", "8", "--seq-len", "4",
               "--per-capacity", "64", "--device-data-gb", "0.0003", "--out", str(tmp_path / "run"))
    # synthetic data is one segment: 12,000 snapshots do not fit 0.3 MB and cannot rotate
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--device-data-gb 0.0003" in done.stderr and "at least 2 slots" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,message", [
    (["--device-data-gb", "0"], "--device-data-gb must be > 0 (got 0.0)"),
    (["--rotate-every", "0"], "--rotate-every must be >= 1 (got 0)"),
])
def test_cli_flag_errors(tmp_path, args, message):
    done = cli(*args, "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_summary_and_metrics_say_what_is_resident(ref_rt, tmp_path):
    from foxc.trainer.metrics import MetricsLog
    t = trainer(ref_rt, rotating_config(log_every=EVERY), DATA, tmp_path)
    metrics = MetricsLog(tmp_path / "metrics.jsonl", 3 * EVERY, start_step=0)
    summary = t.train(3 * EVERY, metrics)
    metrics.close()
    r = summary["data_residency"]
    assert r["rotating"] and r["slots"] == SLOTS and r["shards"] == SEGMENTS and r["rotations"] == 2
    assert len(r["resident"]) == SLOTS and r["refilling"] == r["resident"][1]
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [rec["data_rotations"] for rec in records] == [0, 1, 2]
