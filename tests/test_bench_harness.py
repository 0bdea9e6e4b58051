"""One command line and one graph timer for every benchmark (foxc/bench/harness.py)."""
import pathlib
import re

import numpy as np
import pytest

from foxc import vec
from foxc.bench import __main__ as bench_main
from foxc.bench import harness

BENCH = pathlib.Path(__file__).resolve().parents[1] / "foxc" / "bench"


def test_harness_is_not_a_benchmark():
    assert "harness" not in bench_main.names() and "report" not in bench_main.names()


def test_every_benchmark_uses_the_harness_command_line():
    for name in bench_main.names():
        text = (BENCH / f"{name}.py").read_text()
        assert f'harness.parser("{name}", __doc__)' in text, name
        assert "harness.run(ap, argv, " in text, name
        for own in (r"ArgumentParser\(", r"open_runtime\(", r"output_file\(", r"\.capture\(name=\"bench\"\)"):
            assert not re.search(own, text), (name, own)


def test_time_graph_captures_the_plans_and_times_the_replays():
    from foxc.driver import open_runtime
    rt = open_runtime("reference")
    x = rt.device_array(64, np.float32, "x")
    plans = [vec.plan_elementwise(rt, vec.FILL_F32, x.at(16 * i), float(i + 1), 16) for i in range(4)]
    t, kernels = harness.time_graph(rt, plans, 3, warmup=2)
    assert kernels == 4 and t.gpu_ms >= 0 and t.wall_s >= t.host_s > 0
    np.testing.assert_array_equal(x.download(), np.repeat(np.arange(1, 5, dtype=np.float32), 16))


def test_a_bad_json_fails_before_the_benchmark_body(tmp_path, capsys):
    ran = []
    ap = harness.parser("probe", "probe: a test benchmark")
    assert harness.run(ap, ["--backend", "reference", "--json", str(tmp_path)],
                       lambda args, rt: ran.append(rt) or 0) == 2
    assert not ran and "probe: error: --json" in capsys.readouterr().err


def test_an_empty_json_path_is_refused_not_skipped(capsys):
    """--json "" (an unset shell variable) would write nothing and say nothing: refused before the benchmark."""
    ran = []
    ap = harness.parser("probe", "probe: a test benchmark")
    with pytest.raises(SystemExit) as exit_:  # refused by argparse, as every path flag's empty value
        harness.run(ap, ["--backend", "reference", "--json", ""], lambda args, rt: ran.append(rt) or 0)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and not ran and "error: argument --json: an empty path (give a file name)" in err


def test_sizes_past_the_hosts_memory_are_one_line(capsys):
    """A size whose arrays do not fit in host memory (--n-backtests 10**11 of the checkpoint benchmark) ended in
    numpy's MemoryError traceback: one line saying so (foxc.cli.run's, numpy's message), exit 2."""
    from foxc.bench import checkpoint
    assert checkpoint.main(["--backend", "reference", "--n-backtests", str(10**11), "--per-capacity", "64"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("foxc.bench checkpoint: error: Unable to allocate ")
    assert len(err.splitlines()) == 1
