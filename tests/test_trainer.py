"""The integrated trainer on the reference backend: the step, graph identity, resume identity, the CLI."""
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from foxc.nn import matmul
from foxc.trainer.config import ConfigError, TrainConfig
from foxc.trainer.run import ResumeError, Trainer
from trainer_cases import assert_same_state, config, market, state, trainer

DATA = market()


def run(rt, cfg, steps, out=None):
    t = trainer(rt, cfg, DATA, out)
    t.train(steps)
    return t


def test_steps_run_and_fill_the_replay(ref_rt):
    cfg = config()
    t = run(ref_rt, cfg, 8)
    assert t.ts.step == 8 and t.steps_done == 8
    counters = t.ts.replay.state["counters"].download()
    assert counters[1] > 0, "nothing reached the replay buffer"
    frames = t.ts.diagnostics.poll()  # the loop polled them already: nothing new
    assert frames == []
    assert np.isfinite(t.ts.losses.host).all()


def test_graph_replay_equals_eager(ref_rt):
    """Same seed: N eager steps and N steps of which the last are graph replays end bit-identical."""
    eager = run(ref_rt, config(graph="off"), 9)
    graphed = run(ref_rt, config(graph="on"), 9)
    assert graphed.graph is not None and graphed.graph_step == graphed.capture_after == 64 // 16 + 3
    assert eager.graph is None
    assert_same_state(state(eager), state(graphed))


def test_resume_matches_uninterrupted_run(ref_rt, tmp_path):
    cfg = config(graph="on")
    straight = run(ref_rt, cfg, 12)
    first = run(ref_rt, cfg, 5, tmp_path)
    path = first.save()
    resumed = trainer(ref_rt, cfg, DATA, tmp_path / "b")
    assert resumed.resume(path) == 5
    resumed.train(7)
    assert resumed.steps_done == 12
    assert_same_state(state(straight), state(resumed))


def test_resume_with_another_configuration_names_the_setting(ref_rt, tmp_path):
    first = run(ref_rt, config(), 2, tmp_path)
    path = first.save()
    other = trainer(ref_rt, config(n_step=2), DATA, tmp_path / "b")
    with pytest.raises(ResumeError, match="n_step: 3 in the checkpoint, 2 now"):
        other.resume(path)


def test_same_seed_same_bits_other_seed_differs(ref_rt):
    a, b = run(ref_rt, config(), 4), run(ref_rt, config(), 4)
    assert_same_state(state(a), state(b))
    c = trainer(ref_rt, config(seed=1), market(seed=1))
    c.train(4)
    assert state(c)["dqn_w"].tobytes() != state(a)["dqn_w"].tobytes()


def test_config_errors_name_the_flag():
    with pytest.raises(ConfigError, match=r"--per-capacity must be a power of two.*\(got 1000\)"):
        config(per_capacity=1000)
    with pytest.raises(ConfigError, match=r"--n-step must be 1 to 8 \(got 9\)"):
        config(n_step=9)
    with pytest.raises(ConfigError) as err:  # as the flag spells it, not a Python tuple "(10, 50)"
        config(horizons=(10, 50))
    assert str(err.value) == "--horizons needs three positive values (got 10,50)"
    assert TrainConfig.for_backend("reference", n_steps=None).n_steps == 3000


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "foxc.train", "--backend", "reference", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cli_writes_the_run_directory(tmp_path):
    out = tmp_path / "run"
    done = cli("--n-steps", "12", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
               "--synthetic-rows", "20000", "--log-every", "4", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "backend reference" in done.stdout and "done: 12 steps" in done.stdout
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [4, 8, 12]
    for key in ("step", "sps", "l_q", "l_pi", "l_v", "l_bce", "wr", "pnl", "hold_frac", "entropy", "lr_q"):
        assert key in records[-1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 12 and (out / "checkpoint-12.foxc").is_file()
    assert json.loads((out / "config.json").read_text())["config"]["n_backtests"] == 8
    assert (out / "data_validation.json").is_file()


def test_a_run_too_short_to_time_says_so_rather_than_none(tmp_path):
    done = cli("--n-steps", "1", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
               "--synthetic-rows", "20000", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["sps"] is None  # one frame: no interval
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("done: 1 steps")]
    assert "None" not in line and "(- steps/s, eager)" in line, line


@pytest.mark.parametrize("args,message", [
    (["--per-capacity", "1000"], "--per-capacity must be a power of two"),
    (["--data", "/nonexistent/file.parquet"], "/nonexistent/file.parquet"),
    (["--data", "book.parquet", "--synthetic-rows", "5000"], "--synthetic-rows 5000 is a setting of synthetic data: "
                                                             "beside --data book.parquet it would be ignored"),
    (["--data", "book.parquet", "--synthetic", "easy"], "--synthetic easy is a setting of synthetic data"),
    (["--resume-from", "/nonexistent.foxc", "--n-steps", "1"], "/nonexistent.foxc"),
])
def test_cli_errors_are_one_line(tmp_path, args, message):
    done = cli(*args, "--out", str(tmp_path / "r"))
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_expected_sections_describe_the_export(ref_rt):
    from foxc.checkpoint import expected_from
    from foxc.trainer.state import expected_sections, export_state
    t = trainer(ref_rt, config(), DATA)
    t.train(2)
    assert expected_sections(t.ts) == expected_from(export_state(t.ts))


def test_cli_profile_table_and_window(tmp_path):
    out = tmp_path / "prof"
    done = cli("--n-steps", "10", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
               "--synthetic-rows", "20000", "--profile", "--profile-steps", "3:6", "--out", str(out))
    assert done.returncode == 0, done.stderr
    profile = json.loads((out / "profile.json").read_text())
    names = {row["kernel"] for row in profile["kernels"]}
    assert {"gather_windows", "cursor_advance", "agent_state", "agent_act", "backtest_step", "replay_sample",
            "agent_step_end"} <= names
    assert all(row["launches"] % 4 == 0 for row in profile["kernels"])  # four profiled steps


def test_cli_notes_a_profile_window_outside_the_run(tmp_path):
    done = cli("--n-steps", "4", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
               "--synthetic-rows", "20000", "--profile-steps", "2:9", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("foxc.train: note: --profile-steps 2:9 lies partly outside the run (this run's steps are "
                           "0..3): only steps 2..3 are profiled\n")
    done = cli("--n-steps", "4", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
               "--synthetic-rows", "20000", "--profile", "--out", str(tmp_path / "profiled"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("foxc.train: note: --profile's window 10:29 lies outside the run (this run's steps are "
                           "0..3): no step is profiled\n") and "--profile:" not in done.stdout, "said twice"


def test_profiler_window_brackets_the_steps(ref_rt):
    calls = []
    ref_rt.profiler_start = lambda: calls.append(("start", t.steps_done))
    ref_rt.profiler_stop = lambda: calls.append(("stop", t.steps_done))
    t = trainer(ref_rt, config(), DATA)
    t.set_profiling("2:4")
    t.train(7)
    assert calls == [("start", 2), ("stop", 5)]  # before step 2 runs, after step 4 ran


def test_a_failed_periodic_save_is_reported_and_training_goes_on(ref_rt, tmp_path, monkeypatch, capsys):
    from foxc.checkpoint import CheckpointSaveError
    t = trainer(ref_rt, config(), DATA, tmp_path)
    t.train(2, checkpoint_every=2)
    kept = sorted(p.name for p in tmp_path.glob("*.foxc"))
    def disk_full(*a, **k):
        raise CheckpointSaveError("no space left on device", 28)
    monkeypatch.setattr(t.saver, "save", disk_full)
    summary = t.train(4, checkpoint_every=2)
    assert t.steps_done == 6 and len(summary["checkpoint_errors"]) == 2
    assert "not saved: no space left" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.glob("*.foxc")) == kept == ["checkpoint-2.foxc"]


class SlowLog:
    """A metrics reader that keeps every record and takes its time over each (a slow terminal)."""

    def __init__(self, delay: float = 0.0):
        self.records, self.delay = [], delay

    def write(self, record):
        import time
        time.sleep(self.delay)
        self.records.append(record)


def check_every_frame_once(summary, records, first_step, n_steps, every):
    assert summary["frames_dropped"] == 0 and summary["frames"] == n_steps
    ends = [r["step"] for r in records]
    want = list(range(first_step + every, first_step + n_steps + 1, every))
    assert ends == want + ([first_step + n_steps] if n_steps % every else [])
    assert all(r["steps"] == every for r in records[:n_steps // every])
    assert sum(r["steps"] for r in records) == n_steps


def test_back_pressure_never_drops_a_frame(ref_rt):
    """A ring of 8 frames read only every 20 steps: the trainer reads ahead of the writer so that
    no frame is lost, and every record covers exactly log_every steps of completed frames."""
    m, labels = market(20_000)
    t = Trainer(ref_rt, config(log_every=20), m, labels, ring_len=8)
    log = SlowLog()
    summary = t.train(50, log)
    check_every_frame_once(summary, log.records, 0, 50, 20)
    assert all(r["sps"] is not None and r["sps"] > 0 for r in log.records)


def test_each_checkpoints_steps_are_logged_before_it_is_saved(ref_rt, tmp_path):
    """A record ends at each checkpoint and is written before it (a process killed after the save has logged
    every step the checkpoint holds, so its resume loses none)."""
    t = trainer(ref_rt, config(log_every=4), DATA, tmp_path)
    log, logged = SlowLog(), {}
    t.save = lambda save=t.save: (logged.setdefault(t.steps_done, [r["step"] for r in log.records]), save())[1]
    t.train(8, log, checkpoint_every=3)
    assert logged == {3: [3], 6: [3, 4, 6]} and [r["steps"] for r in log.records] == [3, 1, 2, 2]


@pytest.mark.parametrize("capacity,B,n_step", [(64, 16, 3), (64, 12, 1), (1024, 32, 3), (128, 16, 8)])
def test_the_replay_buffer_is_full_when_the_graph_is_captured(ref_rt, capacity, B, n_step):
    """Capture waits until the buffer holds `capacity` transitions (the seed's lesson: a graph
    captured on a filling buffer bakes in its empty-buffer behaviour)."""
    cfg = config(per_capacity=capacity, n_backtests=B, n_step=n_step, graph="on", episode_steps=10_000)
    t = trainer(ref_rt, cfg, DATA)
    held = []
    t.capture = lambda orig=t.capture: (held.append(t.ts.replay.length()), orig())[1]
    t.train(t.capture_after + 1)
    assert held == [capacity] and t.graph_step == t.capture_after


@pytest.mark.parametrize("B,precision,kernels,group", [(1024, "f32", 37, "linear_fwd_f32_t32_group"),
                                                      (1024, "tf32", 37, "linear_fwd_tf32_t32_group"),
                                                      (4096, "tf32", 39, "linear_fwd_tf32_group")])
def test_kernels_per_step(ref_rt, B, precision, kernels, group):
    """The step's launch count (issue 18's budget: 40 at B = 1,024): the RL trunks and the Q heads take
    one group launch each, every split pass is reduced by one launch, the learner's two C51 distributions,
    the value and policy losses, and the priorities with the tree's sums take one launch each. A change
    that adds launches has to say so here."""
    cfg = config(n_backtests=B, seq_len=32, per_capacity=8192, precision=precision)
    t = Trainer(ref_rt, cfg, *market(cfg.synthetic_rows, cfg.seed), None)
    try:
        names = [p.kernel.spec.name for e in t.ts.launches() for p in (e.plans if hasattr(e, "plans") else [e])]
        assert t.ts.kernel_count() == len(names) == kernels, names
        narrow = "linear_fwd_f32_t16_tall_group" if B >= matmul.TALL_ROWS else "linear_fwd_f32_t16_group"
        assert names.count(group) == 2 and names.count(narrow) == 1
        assert names.count("matmul_tn_ones_f32_t32_group") == 1 and names.count("reduce_grad_splits") == 1
        assert names.count("c51_distribution") == 2  # acting, and the learner's target and online heads
        assert names.count("value_policy_loss") == 1 and names.count("replay_update_tree") == 1
    finally:
        t.close()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("given", [True, False])
def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(tmp_path, monkeypatch, given):
    """On a terminal (the stream given, or stdout when none is) the progress redraws one bar; in a file, lines."""
    from foxc.trainer.metrics import MetricsLog
    record = dict(step=5, sps=10.0, wr=0.5, l_q=0.1, l_pi=0.2, l_v=0.3, l_bce=0.4, in_market=0.25)
    for stream, bar in ((_Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stdout", stream)
        log = MetricsLog(tmp_path / "metrics.jsonl", 10, stream=stream if given else None)
        log.write(record)
        log.close()
        assert stream.getvalue().startswith("\r[") == bar and "step 5/10" in stream.getvalue()


def test_training_rows_too_short_for_a_window_name_the_flags_and_the_remedy(ref_rt, tmp_path):
    """A training row starts an episode after a --seq-len window and before a step in its segment. Too few rows
    (--holdout took most) stopped the run in the dataset's cursors: `no segment holds 9 snapshots: …`, naming no
    flag or remedy. Exactly --seq-len + 1 rows train: --n-step and --horizons need no more."""
    from foxc.data.parquet import write_parquet
    from foxc.data.record import PRICE_UNDEF
    from foxc.data.synthetic import generate
    from foxc.trainer.session import run_data
    path = tmp_path / "x.parquet"
    settings = dict(data=str(path), horizons=(1, 2, 3), seq_len=8, n_steps=2, n_backtests=8, per_capacity=64)

    def refused(rows, **given):
        write_parquet(path, rows)
        with pytest.raises(ConfigError) as err:
            run_data(TrainConfig.for_backend("reference", **settings, **given))
        return str(err.value)

    assert refused(generate(50, seed=1), eval_every=1, holdout_frac=0.9) == (
        f"--data {path}: an episode needs a segment of 9 snapshots (a --seq-len 8 window and a step after it), and "
        "the longest segment of the 4 training snapshots (--holdout 0.9 held out 46 of the 50) holds 4 (give a "
        "smaller --holdout, a shorter --seq-len or more data)")
    assert refused(generate(8, seed=1), holdout_frac=0.0) == (  # no evaluation: nothing held out
        f"--data {path}: an episode needs a segment of 9 snapshots (a --seq-len 8 window and a step after it), and "
        "the longest segment of the 8 training snapshots holds 8 (give a shorter --seq-len or more data)")
    crossed = generate(3000, seed=1)  # validation skipped most rows: that is named as the cause
    crossed["bid_px"][:2980, 0] = crossed["ask_px"][:2980, 0] + 10**9
    crossed["ask_px"][2990:] = PRICE_UNDEF
    assert refused(crossed, eval_every=1, holdout_frac=0.5) == (
        f"--data {path}: validation skipped 2,990 of its 3,000 snapshots (10 one_sided, 2,980 crossed): an episode "
        "needs a segment of 9 snapshots (a --seq-len 8 window and a step after it), and the longest segment of the "
        "5 training snapshots (--holdout 0.5 held out 5 of the 10) holds 5 (give a smaller --holdout, a shorter "
        f"--seq-len or more data; python -m foxc.data inspect {path} shows the skips per file)")
    write_parquet(path, generate(9, seed=1))
    cfg = TrainConfig.for_backend("reference", **settings, n_step=8, holdout_frac=0.0)
    data = run_data(cfg)
    t = Trainer(ref_rt, cfg, data.market, data.labels)
    t.train(2)
    assert t.steps_done == 2
