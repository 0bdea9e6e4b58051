from types import SimpleNamespace

from foxc.bench import train
from foxc.bench import cupti
from foxc.bench.cupti import KernelRecord


def test_train_benchmark_runs_small_on_reference(capsys, tmp_path):
    assert train.main(["--backend", "reference", "--n-backtests", "8", "--steps", "2", "--seq-len", "4",
                       "--per-capacity", "32", "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "summary:" in out.strip().splitlines()[-1] and "checkpoint at B=8" in out
    assert (tmp_path / "t.json").is_file()


def test_bench_train_says_busy_is_not_measured_on_the_reference_backend(capsys):
    assert train.main(["--backend", "reference", "--n-backtests", "8", "--steps", "2", "--seq-len", "4",
                       "--per-capacity", "32", "--timeline"]) == 0  # --timeline asks for --busy
    out = capsys.readouterr().out
    assert "busy B=8: not measured (reference backend" in out and "busy B=8: gpu_busy" not in out
    assert "timeline B=8" not in out  # nothing traced, nothing to show


class Timeline:
    """A stand-in GPU for traced_busy: each replay runs kernels of 10, 20 and 30 µs with 5 µs gaps;
    a synchronize returns 100 µs after the last kernel; the trace sees every kernel."""

    def __init__(self, claimed_kernels=3, lose_one=False):
        self.now, self.kernels, self.steps_done, self.lose_one = 0, [], 0, lose_one
        self.graph = SimpleNamespace(kernel_count=claimed_kernels, launch=self.replay,
                                     node_count=lambda: claimed_kernels + 1)
        self.stream = SimpleNamespace(synchronize=self.synchronize)
        self.trace = SimpleNamespace(kernels=self.kernels, dropped=0, untimed=0, timestamp=lambda: self.now,
                                     cupti=SimpleNamespace(path="fake"), __enter__=None)

    def replay(self, stream):
        for i, us in enumerate((10, 20, 30)):
            self.kernels.append(KernelRecord(f"k{i}", self.now, self.now + us * 1000, 0, 1))
            self.now += (us + 5) * 1000
        if self.lose_one:  # a record missing from the trace
            self.kernels.pop()
            self.lose_one = False

    def synchronize(self):
        self.now += 100_000


class Traced:
    def __init__(self, line):
        self.line = line

    def __call__(self):
        return self

    def __enter__(self):
        return self.line.trace

    def __exit__(self, *exc):
        return False


def test_traced_busy_takes_the_timed_replays_and_their_host_span(monkeypatch):
    line = Timeline()
    monkeypatch.setattr(cupti, "KernelActivity", Traced(line))
    row = train.traced_busy(SimpleNamespace(stream=line.stream), line, 4)
    # 4 replays of 60 µs of kernels in a span of 4 x 75 µs + the 100 µs synchronize: the warm-up is left out
    assert row["gpu_busy"] == 0.6 and row["kernel_ms"] == 0.06 and row["traced_ms"] == 0.1
    assert [(k["name"], k["per_step"], k["ms_per_step"], k["share"]) for k in row["top_kernels"]] == [
        ("k2", 1.0, 0.03, 0.5), ("k1", 1.0, 0.02, 0.333), ("k0", 1.0, 0.01, 0.167)]
    assert line.steps_done == train.BUSY_WARMUP + 4 and row["copy_nodes"] == 1
    assert row["timeline"] == [{"kernel": "k0#0", "start_us": 0.0, "end_us": 10.0, "us": 10.0},
                               {"kernel": "k1#0", "start_us": 15.0, "end_us": 35.0, "us": 20.0},
                               {"kernel": "k2#0", "start_us": 40.0, "end_us": 70.0, "us": 30.0}]


def test_traced_busy_refuses_records_that_do_not_match_the_replays(monkeypatch):
    line = Timeline(lose_one=True)
    monkeypatch.setattr(cupti, "KernelActivity", Traced(line))
    row = train.traced_busy(SimpleNamespace(stream=line.stream), line, 4)
    assert "gpu_busy" not in row and "41 kernel records for 14 replays" in row["busy_unmeasured"]
    assert "(3 kernel nodes a replay)" in row["busy_unmeasured"]


def test_traced_busy_counts_the_kernels_each_replay_runs(monkeypatch):
    """A node the driver runs as a kernel is one more record per replay than the graph's kernel nodes."""
    line = Timeline(claimed_kernels=2)
    monkeypatch.setattr(cupti, "KernelActivity", Traced(line))
    row = train.traced_busy(SimpleNamespace(stream=line.stream), line, 4)
    assert row["kernels_traced"] == 3 and row["kernel_ms"] == 0.06
