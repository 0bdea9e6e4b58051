"""Runs a user can trust: run directories are never mixed, resume needs one flag, signals stop cleanly."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from foxc.checkpoint import read_checkpoint
from test_jsonfile import ABSURD

SIZES = ["--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--log-every", "4", "--eval-rows", "2000"]
SMALL = [*SIZES, "--synthetic-rows", "20000"]  # on synthetic data; SIZES with --data (its rows are the file's)


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "foxc.train", "--backend", "reference", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def one_line_error(done, *words):
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for w in words:
        assert w in done.stderr, (w, done.stderr)


def test_out_holding_another_run_is_refused_and_untouched(tmp_path):
    out = tmp_path / "run"
    assert cli("--n-steps", "8", *SMALL, "--out", str(out)).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    one_line_error(cli("--n-steps", "4", *SMALL, "--out", str(out)), str(out), "--overwrite")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before, "a refused run changed the directory"
    (out / "notes.txt").write_text("mine")
    assert cli("--n-steps", "4", *SMALL, "--out", str(out), "--overwrite").returncode == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == [4], "the old run's records were kept beside the new run's"
    assert not (out / "checkpoint-8.foxc").exists() and (out / "checkpoint-4.foxc").is_file()
    assert (out / "notes.txt").read_text() == "mine", "--overwrite removed a file no run writes"


def test_default_run_directories_are_unique_and_a_failed_run_leaves_none(tmp_path):
    runs = [subprocess.Popen([sys.executable, "-m", "foxc.train", "--backend", "reference", "--n-steps", "2",
                              *SMALL], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)]
    assert all(p.wait(timeout=300) == 0 for p in runs)
    made = sorted((tmp_path / "runs").iterdir())
    assert len(made) == 2 and all((d / "checkpoint-2.foxc").is_file() for d in made)
    done = cli("--n-steps", "2", *SMALL, "--resume-from", str(tmp_path / "nope.foxc"), "--out", str(tmp_path / "x"))
    one_line_error(done, "nope.foxc")
    done = cli("--n-steps", "2", *SIZES, "--data", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "y"))
    one_line_error(done, "missing.parquet")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists(), "a failed run left its directory"


def test_resume_needs_one_flag_and_matches_an_uninterrupted_run(tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert cli("--n-steps", "12", *SMALL, "--checkpoint-every", "0", "--out", str(straight)).returncode == 0
    assert cli("--n-steps", "5", *SMALL, "--checkpoint-every", "0", "--out", str(split)).returncode == 0
    done = cli("--resume-from", str(split / "checkpoint-5.foxc"), "--n-steps", "7")
    assert done.returncode == 0, done.stderr
    assert "resumed from" in done.stdout and (split / "checkpoint-12.foxc").is_file()
    a, b = read_checkpoint(straight / "checkpoint-12.foxc"), read_checkpoint(split / "checkpoint-12.foxc")
    for name in a.sections:
        if name != "isv":  # the ISV holds no wall-clock figures: it must match too
            assert _bytes(a[name]) == _bytes(b[name]), name
    assert _bytes(a["isv"]) == _bytes(b["isv"])
    steps = [json.loads(line)["step"] for line in (split / "metrics.jsonl").read_text().splitlines()]
    assert steps == [4, 5, 8, 12], "the resumed run's records continue the first's, on the same step grid"


def _bytes(value):
    return value.tobytes() if hasattr(value, "tobytes") else repr(value).encode()


def test_flags_beside_resume_must_agree_and_data_is_checked_by_content(tmp_path):
    run = tmp_path / "run"
    assert cli("--n-steps", "4", *SMALL, "--out", str(run)).returncode == 0
    ckpt = str(run / "checkpoint-4.foxc")
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "2", "--seq-len", "8"), "seq_len", "4", "8")
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "2", "--synthetic-rows", "30000"), "synthetic_rows")
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "2", "--out", str(tmp_path / "other"), "--seed", "5"),
                   "seed")
    assert not (tmp_path / "other").exists()
    agreeing = cli("--resume-from", ckpt, "--n-steps", "2", "--seq-len", "4", "--log-every", "1")
    assert agreeing.returncode == 0, agreeing.stderr


def test_resuming_an_earlier_checkpoint_never_overwrites_the_later_ones(tmp_path):
    run = tmp_path / "run"
    assert cli("--n-steps", "8", *SMALL, "--checkpoint-every", "4", "--out", str(run)).returncode == 0
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    assert {"checkpoint-4.foxc", "checkpoint-8.foxc"} <= set(before)
    for out in ([], ["--out", str(run)]):  # its own directory, by default or named
        done = cli("--resume-from", str(run / "checkpoint-4.foxc"), "--n-steps", "2", "--set", "lr_q=0.001", *out)
        one_line_error(done, "checkpoint-4.foxc", "checkpoint-8.foxc", "--out")
        assert {p.name: p.read_bytes() for p in run.iterdir()} == before, "a refused resume changed the run"
    branch = tmp_path / "branch"
    done = cli("--resume-from", str(run / "checkpoint-4.foxc"), "--n-steps", "2", "--out", str(branch))
    assert done.returncode == 0, done.stderr
    assert (branch / "checkpoint-6.foxc").is_file() and {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_a_torn_last_record_of_a_killed_run_does_not_swallow_the_resumed_runs_first(tmp_path):
    run = tmp_path / "run"
    assert cli("--n-steps", "4", *SMALL, "--out", str(run)).returncode == 0
    with (run / "metrics.jsonl").open("a") as f:  # killed while writing a record (kill -9, a full disk)
        f.write('{"step": 8, "steps": 4, "sps": 1')
    done = cli("--resume-from", str(run / "checkpoint-4.foxc"), "--n-steps", "4")
    assert done.returncode == 0, done.stderr
    records = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            assert line == '{"step": 8, "steps": 4, "sps": 1', line  # the torn record alone, on its own line
    assert [r["step"] for r in records] == [4, 8], "the resumed run's first record was lost"


@pytest.mark.slow  # 5-8 s on two cores: in CI's slow pass
def test_a_resume_logs_each_step_once_and_moves_the_records_it_logs_again_aside(tmp_path):
    run = tmp_path / "run"
    assert cli("--n-steps", "8", *SMALL, "--checkpoint-every", "4", "--out", str(run)).returncode == 0
    log, side = run / "metrics.jsonl", run / "metrics.superseded.jsonl"
    first = log.read_bytes().splitlines(keepends=True)
    torn = b'{"step": 12, "steps": 4, "sp'  # killed while writing it
    superseded = []
    for attempt in (1, 2):  # stopped after step 8 (SIGTERM: no checkpoint there), then resumed from step 4: twice
        (run / "checkpoint-8.foxc").unlink()
        log.write_bytes(first[0] + first[1] + torn)
        done = cli("--resume-from", str(run / "checkpoint-4.foxc"), "--n-steps", "4")
        assert done.returncode == 0, done.stderr
        assert "metrics.jsonl: 2 line(s) logged past step 4" in done.stdout, done.stdout
        assert "metrics.superseded.jsonl" in done.stdout
        records = [json.loads(line) for line in log.read_text().splitlines()]
        assert [r["step"] for r in records] == [4, 8], "a step was logged twice (or lost)"
        assert log.read_bytes().startswith(first[0]) and records[1]["l_q"] == json.loads(first[1])["l_q"]
        superseded += [first[1], torn + b"\n"]
        assert side.read_bytes().splitlines(keepends=True) == superseded, "the side file lost or overwrote a line"
    assert cli("--n-steps", "4", *SMALL, "--out", str(run), "--overwrite").returncode == 0
    assert not side.exists(), "--overwrite kept the old run's superseded records"


def test_a_resume_from_a_checkpoint_between_log_steps_logs_each_step_once(tmp_path):
    """A record also ends at each checkpoint (--checkpoint-every 3, --log-every 4): a resume from checkpoint-6
    moves aside only the record it logs again, and metrics.jsonl ends as the uninterrupted run's did."""
    run = tmp_path / "run"
    assert cli("--n-steps", "8", *SMALL, "--checkpoint-every", "3", "--out", str(run)).returncode == 0
    log, side = run / "metrics.jsonl", run / "metrics.superseded.jsonl"
    timeless = lambda text: [{k: v for k, v in json.loads(line).items()  # noqa: E731 (the records, times left out)
                              if k not in ("sps", "eval_seconds", "val_seconds")} for line in text.splitlines()]
    straight = timeless(log.read_text())
    assert [(r["step"], r["steps"]) for r in straight] == [(3, 3), (4, 1), (6, 2), (8, 2)]
    (run / "checkpoint-8.foxc").unlink()
    done = cli("--resume-from", str(run / "checkpoint-6.foxc"), "--n-steps", "2")
    assert done.returncode == 0, done.stderr
    assert timeless(log.read_text()) == straight, "a step lost or logged twice"
    assert timeless(side.read_text()) == straight[-1:]


def test_moving_superseded_records_loses_none_when_the_replace_fails(tmp_path, monkeypatch):
    from foxc.checkpoint import CheckpointSaveError
    from foxc.trainer.metrics import supersede_records
    log, side = tmp_path / "metrics.jsonl", tmp_path / "metrics.superseded.jsonl"
    lines = [json.dumps({"step": s, "steps": 4}) + "\n" for s in (4, 8, 12)]
    log.write_text("".join(lines))

    def full_disk(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(CheckpointSaveError, match="metrics.jsonl.*No space left.*metrics.superseded.jsonl"):
        supersede_records(log, 4)
    assert log.read_text() == "".join(lines) and side.read_text() == "".join(lines[1:])
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    monkeypatch.undo()
    assert supersede_records(log, 4) == 2 and log.read_text() == lines[0]
    assert side.read_text() == "".join(lines[1:] * 2), "a line in both files after the failure, none lost"
    assert supersede_records(log, 4) == 0 and supersede_records(tmp_path / "none.jsonl", 4) == 0


def test_absurd_lines_are_moved_aside_as_torn_ones_are(tmp_path):
    """Read by foxc.jsonfile's parser: a line nested deeper than it recurses, or of a number past int()'s digits,
    is no record of a step, moved aside with the torn ones."""
    from foxc.trainer.metrics import supersede_records
    log = tmp_path / "metrics.jsonl"
    absurd = [raw for raw, _ in ABSURD if b"\n" not in raw]
    log.write_bytes(b'{"step": 4}\n' + b"\n".join(absurd) + b"\n")
    assert supersede_records(log, 4) == len(absurd) and log.read_bytes() == b'{"step": 4}\n'


def test_the_directory_of_a_running_trainer_is_refused_even_with_overwrite(tmp_path):
    busy = tmp_path / "busy"
    proc = subprocess.Popen([sys.executable, "-m", "foxc.train", "--backend", "reference", "--n-steps", "100000",
                             *SMALL, "--checkpoint-every", "0", "--out", str(busy)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (busy / "metrics.jsonl").is_file() or not (busy / "metrics.jsonl").read_text().strip():
            assert time.time() < deadline and proc.poll() is None
            time.sleep(0.2)
        one_line_error(cli("--n-steps", "2", *SMALL, "--out", str(busy), "--overwrite"), str(busy),
                       f"pid {proc.pid}")
        assert proc.poll() is None and {"config.json", "metrics.jsonl"} <= {p.name for p in busy.iterdir()}
    finally:
        proc.terminate()
        proc.wait(timeout=120)


@pytest.mark.slow  # 5-8 s on two cores: in CI's slow pass
def test_a_synthetic_setting_beside_a_checkpoints_data_is_refused(tmp_path):
    """Resuming a run of --data without --data: a --synthetic-rows equal to the one its checkpoint records (the
    default, unused) was accepted and ignored, another refused as differing from it. On synthetic data the same
    --synthetic-rows resumes, another is refused."""
    from foxc.data.parquet import write_parquet
    from foxc.data.synthetic import generate
    from foxc.trainer.config import TrainConfig
    book, run = tmp_path / "book.parquet", tmp_path / "run"
    write_parquet(book, generate(20000, 1))
    assert cli("--n-steps", "2", *SIZES, "--data", str(book), "--out", str(run)).returncode == 0
    ckpt = run / "checkpoint-2.foxc"
    for flag, value in (("--synthetic-rows", str(TrainConfig.for_backend("reference").synthetic_rows)),
                        ("--synthetic-rows", "30000"), ("--synthetic", "default")):
        done = cli("--resume-from", str(ckpt), "--n-steps", "1", flag, value, "--out", str(tmp_path / "b"))
        one_line_error(done, f"{flag} {value} is a setting of synthetic data: beside --data {book} (from "
                             f"--resume-from {ckpt}) it would be ignored")
    assert cli("--n-steps", "2", *SMALL, "--out", str(tmp_path / "s")).returncode == 0
    ckpt = tmp_path / "s" / "checkpoint-2.foxc"
    assert cli("--resume-from", str(ckpt), "--n-steps", "1", "--synthetic-rows", "20000", "--out",
               str(tmp_path / "s2")).returncode == 0
    one_line_error(cli("--resume-from", str(ckpt), "--n-steps", "1", "--synthetic-rows", "30000", "--out",
                       str(tmp_path / "s3")), "synthetic_rows: 20000 in the checkpoint, 30000 now")


def test_a_checkpoints_data_that_moved_is_named_as_the_checkpoints(tmp_path):
    from foxc.data.parquet import write_parquet
    from foxc.data.synthetic import generate
    book, run = tmp_path / "book.parquet", tmp_path / "run"
    write_parquet(book, generate(20000, 1))
    assert cli("--n-steps", "2", *SIZES, "--data", str(book), "--out", str(run)).returncode == 0
    book.rename(tmp_path / "moved.parquet")
    done = cli("--resume-from", str(run / "checkpoint-2.foxc"), "--n-steps", "1")
    one_line_error(done, "checkpoint-2.foxc", str(book), "--data")
    assert "the checkpoint's data" in done.stderr, done.stderr
    moved = str(tmp_path / "moved.parquet")  # the same file at another path: recognised by its content
    done = cli("--resume-from", str(run / "checkpoint-2.foxc"), "--n-steps", "1", "--data", moved)
    assert done.returncode == 0, done.stderr
    write_parquet(tmp_path / "other.parquet", generate(20000, 2))  # another file: refused naming both hashes
    done = cli("--resume-from", str(run / "checkpoint-2.foxc"), "--n-steps", "1", "--data", str(tmp_path / "other.parquet"),
               "--out", str(tmp_path / "other-run"))
    one_line_error(done, "the data differs", "sha256")


def test_a_resume_whose_instrument_the_data_lacks_says_so_not_that_the_data_moved(tmp_path):
    """A resume with --instrument ESU4, which the checkpoint's (unmoved) file does not hold, was told to "give --data
    PATH where it is now": only data that is not where the checkpoint says gets that remedy."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from foxc.data.parquet import write_parquet
    from foxc.data.synthetic import generate
    rec = np.concatenate([generate(3000, seed) for seed in (1, 2)])
    rec["instrument_id"][3000:] = 22
    rec = rec[np.argsort(rec["ts_ns"], kind="stable")]
    book, run = tmp_path / "two.parquet", tmp_path / "run"
    write_parquet(book, rec)
    table = pq.read_table(book)
    symbols = pa.array(["NQM4" if i == 22 else "ESM4" for i in rec["instrument_id"].tolist()])
    pq.write_table(table.set_column(table.schema.get_field_index("symbol"), "symbol", symbols), book)
    assert cli("--n-steps", "2", *SIZES, "--data", str(book), "--instrument", "ESM4", "--out", str(run)).returncode == 0
    done = cli("--resume-from", str(run / "checkpoint-2.foxc"), "--n-steps", "1", "--instrument", "ESU4")
    one_line_error(done, f"--data {book}: --instrument ESU4: not an instrument_id, and the file's symbols do not name "
                         "it (they map ESM4 to 1, NQM4 to 22)")
    assert "where it is now" not in done.stderr, done.stderr


def test_sigterm_stops_cleanly_and_checkpoint_on_exit_saves_the_step(tmp_path):
    for extra, want_checkpoint in (([], False), (["--checkpoint-on-exit"], True)):
        out = tmp_path / ("kept" if want_checkpoint else "plain")
        proc = subprocess.Popen([sys.executable, "-m", "foxc.train", "--backend", "reference", "--n-steps", "100000",
                                 *SMALL, "--checkpoint-every", "0", "--out", str(out), *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while not (out / "metrics.jsonl").is_file() or not (out / "metrics.jsonl").read_text().strip():
            assert time.time() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "timeout"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130 and "stopped by SIGTERM" in err and "Traceback" not in err, err
        summary = json.loads((out / "summary.json").read_text())
        stopped = summary["stopped_at"]
        assert stopped and summary["frames_dropped"] == 0 and summary["frames"] == stopped
        ckpts = sorted(p.name for p in out.glob("checkpoint-*.foxc"))
        assert ckpts == ([f"checkpoint-{stopped}.foxc"] if want_checkpoint else [])
        assert not [p for p in os.listdir(out) if ".tmp-" in p], "a temporary file was left"


@pytest.mark.slow  # 5-8 s on two cores: in CI's slow pass
def test_a_run_of_one_instrument_resumes_and_reads_a_cache_only_with_that_instrument(tmp_path):
    """--instrument is part of the data: the same file read for another instrument is other data (its identity, the
    sha256 a resume checks, mixes the selection in), and a cache prepared for one is refused for another."""
    from foxc.data.prepare import prepare
    from foxc.trainer.session import files_digest
    from test_data_instrument import parent_parquet
    parent, run = parent_parquet(tmp_path / "parent.parquet", rows=(4000, 3000, 2000)), tmp_path / "run"
    done = cli("--n-steps", "2", *SIZES, "--data", str(parent), "--instrument", "22", "--out", str(run))
    assert done.returncode == 0, done.stderr
    assert "instrument_id 22 kept; rows of other instruments left out: instrument_id 11 (4000), 33 (2000)" \
        in done.stdout
    record = json.loads((run / "config.json").read_text())
    assert record["config"]["instrument"] == "22" and record["data"]["instrument_selection"] == "22"
    digests = {files_digest([parent], i) for i in (None, "11", "22")}
    assert record["data"]["sha256"] == files_digest([parent], "22") and len(digests) == 3
    validation = json.loads((run / "data_validation.json").read_text())
    assert validation["files"][str(parent)]["other_instruments"] == {"11": 4000, "33": 2000}
    ckpt = str(run / "checkpoint-2.foxc")
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "1", "--instrument", "11", "--out", str(tmp_path / "r1")),
                   "checkpoint-2.foxc", "instrument: '22' in the checkpoint, '11' now")
    done = cli("--resume-from", ckpt, "--n-steps", "1", "--out", str(tmp_path / "r2"))  # the checkpoint's: 22
    assert done.returncode == 0 and "instrument_id 22 kept" in done.stdout, done.stderr
    prepare(parent, tmp_path / "cache", instrument="22")
    for given, words in ((["--instrument", "11"], "prepared with --instrument 22, not this --instrument 11"),
                         ([], "prepared with --instrument 22, and no --instrument is given now")):
        done = cli("--n-steps", "1", *SIZES, "--data", str(tmp_path / "cache"), *given, "--out", str(tmp_path / "c"))
        one_line_error(done, f"--data {tmp_path / 'cache'}: {words}", "give --instrument 22")
    assert not (tmp_path / "c").exists()
    done = cli("--n-steps", "1", *SIZES, "--data", str(tmp_path / "cache"), "--instrument", "22", "--out",
               str(tmp_path / "c"))
    assert done.returncode == 0, done.stderr
    source = json.loads((tmp_path / "c" / "config.json").read_text())["data"]
    manifest = json.loads((tmp_path / "cache" / "manifest.json").read_text())
    assert source["instrument_selection"] == "22" and source["sha256"] == manifest["sha256"]


def test_resuming_from_a_fifo_is_refused_at_once(tmp_path):
    """--resume-from a FIFO nobody writes hung (reading the checkpoint's meta waits for a writer, as `cat` does); it
    is refused as the inspector refuses it (foxc.paths.file_kind)."""
    fifo = tmp_path / "checkpoint-8.foxc"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "foxc.train", "--backend", "reference", "--resume-from", str(fifo)],
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (2, f"foxc.train: error: --resume-from {fifo}: a FIFO, not a checkpoint "
                                                 "file (a checkpoint is a regular file)\n")
