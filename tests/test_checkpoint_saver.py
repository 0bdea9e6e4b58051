"""Atomic saving: the newest checkpoints kept, failed saves leave nothing behind, kill -9 loses nothing saved."""
import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from checkpoint_helpers import sample_state
from foxc.checkpoint import CheckpointSaveError, CheckpointSaver, list_checkpoints, read_checkpoint, write_checkpoint
from foxc.checkpoint import atomic

ROOT = Path(__file__).resolve().parent.parent


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_saver_keeps_the_newest_two(tmp_path, rng):
    saver = CheckpointSaver(tmp_path / "run")
    state = sample_state(rng)
    for step in (5, 10, 15, 20):
        path = saver.save(step, state, {"config": {"step": step}})
        assert path.name == f"checkpoint-{step}.foxc"
    assert names(tmp_path / "run") == ["checkpoint-15.foxc", "checkpoint-20.foxc"]
    assert read_checkpoint(tmp_path / "run" / "checkpoint-20.foxc").config == {"step": 20}
    assert [step for step, _ in list_checkpoints(tmp_path / "run")] == [15, 20]


def test_saver_orders_by_step_number_and_keeps_what_it_just_wrote(tmp_path, rng):
    state = {"w": np.zeros(2, np.float32)}
    saver = CheckpointSaver(tmp_path, keep=3)
    for step in (9, 10, 100, 2000):
        saver.save(step, state)
    assert names(tmp_path) == ["checkpoint-10.foxc", "checkpoint-100.foxc", "checkpoint-2000.foxc"]
    saver.save(50, state)  # e.g. a run resumed from an earlier step into the same directory
    assert "checkpoint-50.foxc" in names(tmp_path) and len(names(tmp_path)) == 3
    with pytest.raises(AssertionError):
        CheckpointSaver(tmp_path, keep=0)


@pytest.mark.parametrize("keep", [1.5, "2", None, True])
def test_saver_refuses_a_keep_that_is_no_count(tmp_path, keep):
    """keep=1.5 was taken and failed at the first save's pruning with 'slice indices must be integers' (after the
    file was written), "2" with a TypeError comparing it: foxc's misuse, an assertion naming keep, before any save."""
    with pytest.raises(AssertionError, match=f"keep: a whole number >= 1, got {keep!r}"):
        CheckpointSaver(tmp_path, keep=keep)
    assert CheckpointSaver(tmp_path, keep=np.int64(2)).keep == 2


def test_listing_ignores_other_files(tmp_path):
    for name in ("checkpoint-7.foxc", "checkpoint-x.foxc", "checkpoint-7.foxc.bak", "notes.txt",
                 ".checkpoint-8.foxc.tmp-1-ab"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "checkpoint-9.foxc").mkdir()
    assert list_checkpoints(tmp_path) == [(7, tmp_path / "checkpoint-7.foxc")]
    assert list_checkpoints(tmp_path / "absent") == []


def test_overwriting_a_checkpoint_is_atomic(tmp_path, rng):
    path = tmp_path / "c.foxc"
    write_checkpoint(path, 1, {"w": np.zeros(3, np.float32)})
    write_checkpoint(path, 1, {"w": np.ones(3, np.float32)})
    assert np.array_equal(read_checkpoint(path)["w"], np.ones(3, np.float32))
    assert names(tmp_path) == ["c.foxc"]


def fill_disk_after(monkeypatch, budget: int):
    """Make writes fail with ENOSPC once `budget` bytes went through (a partial write first)."""
    written = {"bytes": 0}

    def write_all(f, chunk):
        chunk = memoryview(chunk).cast("B")
        room = budget - written["bytes"]
        if room < len(chunk):
            f.write(chunk[:max(room, 0)])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        f.write(chunk)
        written["bytes"] += len(chunk)

    monkeypatch.setattr(atomic, "write_all", write_all)


def test_disk_full_leaves_earlier_checkpoints_and_no_temp_file(tmp_path, rng, monkeypatch):
    saver = CheckpointSaver(tmp_path)
    state = sample_state(rng)
    saver.save(1, state)
    saver.save(2, state)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    fill_disk_after(monkeypatch, 300)
    with pytest.raises(CheckpointSaveError, match=r"checkpoint-3.foxc.*No space left on device \[ENOSPC\]") as info:
        saver.save(3, state)
    assert info.value.errno == errno.ENOSPC
    assert "earlier checkpoints are untouched" in str(info.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    monkeypatch.undo()
    saver.save(3, state)
    assert names(tmp_path) == ["checkpoint-2.foxc", "checkpoint-3.foxc"]


def test_permission_denied_is_reported(tmp_path, rng, monkeypatch):
    saver = CheckpointSaver(tmp_path)
    saver.save(1, {"w": np.zeros(1, np.float32)})
    real_open = os.open

    def deny(path, *args, **kwargs):
        if ".tmp-" in str(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "open", deny)
    with pytest.raises(CheckpointSaveError, match=r"create a temporary file failed: Permission denied \[EACCES\]"):
        saver.save(2, {"w": np.zeros(1, np.float32)})
    assert names(tmp_path) == ["checkpoint-1.foxc"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory(tmp_path, rng):
    saver = CheckpointSaver(tmp_path)
    saver.save(1, {"w": np.zeros(1, np.float32)})
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(CheckpointSaveError, match="Permission denied"):
            saver.save(2, {"w": np.zeros(1, np.float32)})
        assert names(tmp_path) == ["checkpoint-1.foxc"]
    finally:
        tmp_path.chmod(0o755)


def test_failed_rename_and_interrupt_remove_the_temp_file(tmp_path, rng, monkeypatch):
    state = {"w": np.zeros(1, np.float32)}

    def no_rename(src, dst):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    monkeypatch.setattr(atomic.os, "replace", no_rename)
    with pytest.raises(CheckpointSaveError, match="EXDEV"):
        write_checkpoint(tmp_path / "a.foxc", 1, state)
    monkeypatch.undo()

    def interrupted(f, chunk):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "write_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(tmp_path / "a.foxc", 1, state)
    assert names(tmp_path) == []


def test_unusable_directory_is_a_save_error(tmp_path):
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(CheckpointSaveError, match="cannot use checkpoint directory"):
        CheckpointSaver(tmp_path / "file" / "run")


def test_stale_temp_files_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".checkpoint-5.foxc.tmp-{dead_pid}-abcd1234"
    live = tmp_path / f".checkpoint-6.foxc.tmp-{os.getpid()}-abcd1234"
    other = tmp_path / f".notes.txt.tmp-{dead_pid}-abcd1234"
    for path in (stale, live, other):
        path.write_bytes(b"partial")
    CheckpointSaver(tmp_path)
    assert not stale.exists() and live.exists() and other.exists()


SAVER_LOOP = textwrap.dedent("""
    import sys, time
    import numpy as np
    from foxc.checkpoint import CheckpointSaver, atomic

    def slow_write(f, chunk):  # real writes, 1 MiB at a time, so a kill lands mid-file
        view = memoryview(chunk).cast("B")
        for start in range(0, len(view), 1 << 20):
            f.write(view[start:start + (1 << 20)])
            time.sleep(0.002)

    atomic.write_all = slow_write
    saver = CheckpointSaver(sys.argv[1])
    replay = np.random.default_rng(0).standard_normal(6 << 20).astype(np.float32)  # 24 MiB
    step = 0
    while True:
        step += 1
        replay[0] = step
        saver.save(step, {"replay": replay, "w": np.full(1000, step, np.float32)}, {"config": {"step": step}})
""")


def test_kill_9_during_a_save_leaves_the_last_good_checkpoint(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen([sys.executable, "-c", SAVER_LOOP, str(run)], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(list_checkpoints(run)) < 2:
            assert child.poll() is None, "the saving process died on its own"
            time.sleep(0.005)
        assert len(list_checkpoints(run)) >= 2, "no two checkpoints within 60 s"
        while time.monotonic() < deadline:  # wait for the next save to be under way, then kill it
            temps = [p for p in run.iterdir() if ".tmp-" in p.name]
            if temps and temps[0].stat().st_size > 4 << 20:
                break
            time.sleep(0.001)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    partial = [p for p in run.iterdir() if ".tmp-" in p.name]
    assert partial, "the kill did not land during a write"
    full_size = (run / list_checkpoints(run)[-1][1].name).stat().st_size
    assert partial[0].stat().st_size < full_size

    found = list_checkpoints(run)
    assert 1 <= len(found) <= 2 and all(path not in partial for _, path in found)
    for step, path in found:
        ckpt = read_checkpoint(path)
        assert ckpt.step == step and ckpt["replay"][0] == step and ckpt.config == {"step": step}
    CheckpointSaver(run)  # a restart clears what the killed process left
    assert not [p for p in run.iterdir() if ".tmp-" in p.name]
