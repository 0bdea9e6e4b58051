"""Profiling: the step window, the profiler start/stop calls, the kernel table on the reference backend, NVTX ranges."""
import json
import time

import numpy as np
import pytest

from foxc import vec
from foxc.bench import learn
import foxc.profile as foxc_nvtx
from foxc.profile import (COLUMNS, PROFILE_FORMAT, PROFILE_VERSION, KernelProfiler, ProfilerWindow, StepWindow,
                          add_profile_args, parse_window, profile_window)


# --- the window ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, want", [("200:210", (200, 210)), ("0:0", (0, 0)), (" 3 : 7 ", (3, 7)),
                                        ("5:5", (5, 5))])
def test_window_parses(spec, want):
    w = parse_window(spec)
    assert (w.first, w.last) == want
    assert str(parse_window(str(w))) == str(w)


@pytest.mark.parametrize("spec, words", [("210:200", "after"), ("-1:5", "non-negative"), ("3:-4", "non-negative"),
                                         ("7", "A:B"), ("1:2:3", "A:B"), ("a:5", "not an integer"),
                                         (":5", "not an integer"), ("1.5:3", "not an integer"), ("", "A:B")])
def test_window_rejects_bad_specs_with_a_reason(spec, words):
    import argparse
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        parse_window(spec)


def test_a_window_outside_the_runs_steps_says_what_is_profiled():
    assert StepWindow(2, 9).outside(0, 10) is None and StepWindow(100, 149).outside(100, 150) is None
    assert StepWindow(200, 210).outside(0, 150) == ("200:210 lies outside the run (this run's steps are 0..149): "
                                                    "no step is profiled")
    assert StepWindow(140, 160).outside(0, 150) == ("140:160 lies partly outside the run (this run's steps are "
                                                    "0..149): only steps 140..149 are profiled")
    assert StepWindow(0, 9).outside(5, 20).endswith("(this run's steps are 5..19): only steps 5..9 are profiled")
    assert StepWindow(0, 3).outside(0, 0) == "0:3 lies outside the run (this run takes no step): no step is profiled"


def test_argparse_reports_a_bad_window_as_a_usage_error(capsys):
    import argparse
    ap = argparse.ArgumentParser()
    add_profile_args(ap)
    assert ap.parse_args(["--profile-steps", "4:9"]).profile_steps == StepWindow(4, 9)
    with pytest.raises(SystemExit):
        ap.parse_args(["--profile-steps", "9:4"])
    assert "after the last step" in capsys.readouterr().err
    assert profile_window(ap.parse_args([])) is None
    assert profile_window(ap.parse_args(["--profile", "--profile-steps", "2:3"])) == StepWindow(2, 3)
    assert profile_window(ap.parse_args(["--profile"])) is not None


class FakeRuntime:
    """Records the profiler calls and the synchronizations around them, with the step they happened at."""

    def __init__(self):
        self.calls = []
        self.step = None

    def profiler_start(self):
        self.calls.append(("start", self.step))

    def profiler_stop(self):
        self.calls.append(("stop", self.step))

    def synchronize(self):
        self.calls.append(("sync", self.step))


def run_steps(window, steps):
    rt = window.rt
    for step in steps:
        rt.step = step
        window.before_step(step)
        rt.calls.append(("launch", step))
        window.after_step(step)
    rt.step = None
    window.close()
    return rt.calls


def test_window_starts_before_a_and_stops_after_b():
    calls = run_steps(ProfilerWindow(FakeRuntime(), "3:5"), range(10))
    profiled = [c for c in calls if c[0] in ("start", "stop", "sync")]
    assert profiled == [("sync", 3), ("start", 3), ("sync", 5), ("stop", 5)]
    start, stop = calls.index(("start", 3)), calls.index(("stop", 5))
    assert [c[1] for c in calls[start:stop] if c[0] == "launch"] == [3, 4, 5]
    assert ("launch", 2) in calls[:start] and ("launch", 6) in calls[stop:]


def test_window_of_one_step_and_of_step_zero():
    calls = run_steps(ProfilerWindow(FakeRuntime(), "0:0"), range(3))
    assert [c for c in calls if c[0] in ("start", "stop")] == [("start", 0), ("stop", 0)]


def test_run_ending_inside_the_window_is_closed_once():
    w = ProfilerWindow(FakeRuntime(), "3:50")
    calls = run_steps(w, range(10))
    assert [c for c in calls if c[0] in ("start", "stop")] == [("start", 3), ("stop", None)]
    w.close()
    assert sum(c[0] == "stop" for c in w.rt.calls) == 1


def test_resumed_run_opens_the_window_at_its_first_step_and_never_twice():
    calls = run_steps(ProfilerWindow(FakeRuntime(), "3:5"), [4, 5, 6, 3, 4])  # a step counter going back
    assert [c for c in calls if c[0] in ("start", "stop")] == [("start", 4), ("stop", 5)]


def test_window_never_reached_or_not_asked_for():
    w = ProfilerWindow(FakeRuntime(), "30:40")
    assert run_steps(w, range(10)) == [("launch", s) for s in range(10)]
    none = ProfilerWindow(FakeRuntime(), None)
    assert run_steps(none, range(5)) == [("launch", s) for s in range(5)]


def test_reference_runtime_profiler_flag_follows_the_window(ref_rt):
    w = ProfilerWindow(ref_rt, "1:2")
    seen = []
    for step in range(4):
        w.before_step(step)
        seen.append(ref_rt.profiling)
        w.after_step(step)
    assert seen == [False, True, True, False]


# --- the kernel table ---------------------------------------------------------------------------------------------

class Pair:
    """A composite entry without a name (a class, as GradClip): two launches timed as one row."""

    def __init__(self, plans):
        self.plans = plans

    def launch(self, stream):
        for p in self.plans:
            p.launch(stream)


def vec_step(rt, n=5000):
    x = rt.device_array(n, np.float32, "x")
    y = rt.device_array(n, np.float32, "y")
    plans = [vec.plan_elementwise(rt, vec.FILL_F32, x, 1.5, n),
             vec.plan_elementwise(rt, vec.FILL_F32, y, 0.0, n),
             vec.plan_elementwise(rt, vec.AXPY_F32, y, 2.0, x, n),
             Pair([vec.plan_elementwise(rt, vec.SCALE_F32, y, 0.5, n),
                   vec.plan_elementwise(rt, vec.SCALE_F32, x, 2.0, n)]),
             vec.plan_elementwise(rt, vec.COPY_F32, x, y, n)]
    return plans, x, y


def test_kernel_table_counts_names_and_shares(ref_rt, tmp_path, capsys):
    plans, x, y = vec_step(ref_rt)
    with KernelProfiler(ref_rt, "2:4") as profiler:
        for step in range(7):
            profiler.launch(step, plans)
        assert profiler.steps == 3
        path = profiler.report(tmp_path / "run")
    rows = {r["kernel"]: r for r in profiler.rows()}
    assert {k: r["launches"] for k, r in rows.items()} == {"fill_f32": 6, "axpy_f32": 3, "Pair": 3, "copy_f32": 3}
    assert sum(r["share"] for r in rows.values()) == pytest.approx(1.0)
    assert all(r["total_ms"] > 0 and r["mean_us"] > 0 and r["host_gap_us"] > 0 for r in rows.values())
    for r in rows.values():
        assert r["mean_us"] == pytest.approx(1e3 * r["total_ms"] / r["launches"])
    totals = [r["total_ms"] for r in profiler.rows()]
    assert totals == sorted(totals, reverse=True)
    # the plans ran for real, every step: x = 1.5 * 2, y = (0 + 2 * 1.5) * 0.5, then x = y
    assert np.allclose(x.download(), 1.5) and np.allclose(y.download(), 1.5)

    record = json.loads(path.read_text())
    assert path.name == "profile.json"
    assert record["format"] == PROFILE_FORMAT and record["version"] == PROFILE_VERSION
    assert record["backend"] == "reference" and record["window"] == "2:4" and record["steps"] == 3
    assert record["launches_per_step"] == len(plans)
    assert record["gpu_ms_per_step"] > 0 and record["host_ms_per_step"] > 0
    assert all(set(k) == set(COLUMNS) for k in record["kernels"])
    assert record["gpu_ms_per_step"] == pytest.approx(sum(r["total_ms"] for r in rows.values()) / 3)

    out = capsys.readouterr().out
    assert "3 step(s) (2:4)" in out and "host gap µs" in out and "Pair" in out and str(path) in out


def test_kernel_table_sees_the_time_a_launch_takes(ref_rt):
    class Slow:
        name = "slow"

        def launch(self, stream):
            time.sleep(0.004)

    plans, _, _ = vec_step(ref_rt, 16)
    with KernelProfiler(ref_rt) as profiler:
        for _ in range(2):
            profiler.profile_step([Slow(), *plans])
    rows = {r["kernel"]: r for r in profiler.rows()}
    assert rows["slow"]["launches"] == 2 and rows["slow"]["mean_us"] >= 3500
    assert profiler.rows()[0]["kernel"] == "slow" and rows["slow"]["share"] > 0.5


def test_kernel_table_refuses_a_capturing_stream(ref_rt):
    plans, _, _ = vec_step(ref_rt, 16)
    with KernelProfiler(ref_rt) as profiler, ref_rt.capture():
        with pytest.raises(RuntimeError, match="capturing"):
            profiler.profile_step(plans)


def test_learn_bench_profile_runs_on_the_reference_backend(tmp_path, capsys):
    assert learn.main(["--backend", "reference", "--profile", "--profile-steps", "1:2", "--out", str(tmp_path),
                       "--json", str(tmp_path / "bench.json")]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("summary:")
    record = json.loads((tmp_path / "profile.json").read_text())
    assert record["steps"] == 2 and record["window"] == "1:2"
    names = {r["kernel"] for r in record["kernels"]}
    assert "GradClip" in names and "adamw_all" in names
    assert sum(r["share"] for r in record["kernels"]) == pytest.approx(1.0)
    assert json.loads((tmp_path / "bench.json").read_text())["rows"] == record["kernels"]


def test_learn_bench_window_only(capsys):
    assert learn.main(["--backend", "reference", "--profile-steps", "0:1"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("summary: 2 eager learner steps")


# --- NVTX ---------------------------------------------------------------------------------------------------------

class FakeDomain:
    def __init__(self):
        self.events = []

    def get_event_attributes(self, message=None, color=None):
        return ("attrs", message, color)

    def push_range(self, attributes):
        self.events.append(("push", attributes[1]))

    def pop_range(self):
        self.events.append(("pop",))


def test_nvtx_ranges_push_and_pop_in_pairs(monkeypatch):
    domain = FakeDomain()
    monkeypatch.setattr(foxc_nvtx, "_domain", domain)
    with foxc_nvtx.nvtx_range("step"):
        with foxc_nvtx.nvtx_range("replay.sample", color="green"):
            pass
        with foxc_nvtx.nvtx_range("checkpoint.save"):
            pass
    assert domain.events == [("push", "step"), ("push", "replay.sample"), ("pop",), ("push", "checkpoint.save"),
                             ("pop",), ("pop",)]


def test_nvtx_absent_is_a_shared_no_op(monkeypatch):
    monkeypatch.setattr(foxc_nvtx, "_domain", None)
    assert foxc_nvtx.nvtx_range("a") is foxc_nvtx.nvtx_range("b")
    with pytest.raises(ValueError):
        with foxc_nvtx.nvtx_range("a"):
            raise ValueError("exceptions pass through")


def test_nvtx_absent_costs_under_a_microsecond(monkeypatch):
    monkeypatch.setattr(foxc_nvtx, "_domain", None)
    nvtx_range = foxc_nvtx.nvtx_range
    n = 20000

    def per_range_us():
        t = time.perf_counter()
        for _ in range(n):
            with nvtx_range("phase"):
                pass
        return (time.perf_counter() - t) / n * 1e6

    best = min(per_range_us() for _ in range(5))
    print(f"no-op nvtx_range: {best:.3f} µs a range")
    assert best < 1.0  # about 0.1 µs on a laptop core; a step has tens of ranges at most
