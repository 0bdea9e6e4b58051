"""Profiling on a real GPU: the event kernel table, and the cuProfilerStart/Stop window as ncu sees it."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from foxc import vec  # noqa: E402
from foxc.profile import KernelProfiler  # noqa: E402
from test_profile import vec_step  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_kernel_table_on_cuda(cuda_rt, tmp_path):
    plans, x, y = vec_step(cuda_rt, 1 << 22)
    refill = vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 1.5, 1 << 22)
    refill.launch(cuda_rt.stream)  # warm up on the capture stream
    with cuda_rt.capture(name="fill_graph") as cap:  # a graph as one entry of the list, named by its name
        refill.launch(cuda_rt.stream)
    plans = [cap.graph, *plans]
    with KernelProfiler(cuda_rt, "1:3") as profiler:
        for step in range(5):
            profiler.launch(step, plans)
        path = profiler.report(tmp_path)
    cuda_rt.stream.synchronize()
    rows = {r["kernel"]: r for r in profiler.rows()}
    assert {k: r["launches"] for k, r in rows.items()} == {
        "fill_graph": 3, "fill_f32": 6, "axpy_f32": 3, "Pair": 3, "copy_f32": 3}
    assert all(r["total_ms"] > 0 and r["mean_us"] > 0 and r["host_gap_us"] > 0 for r in rows.values())
    assert sum(r["share"] for r in rows.values()) == pytest.approx(1.0)
    # 4M floats: each kernel moves 16-48 MB, so it takes microseconds, not the event resolution (0.5 µs)
    assert all(r["mean_us"] > 2 for r in rows.values())
    assert rows["Pair"]["mean_us"] > rows["copy_f32"]["mean_us"]  # two read-modify-write passes vs one copy
    assert np.allclose(x.download(), 1.5) and np.allclose(y.download(), 1.5)
    record = json.loads(path.read_text())
    assert record["backend"] == "cuda" and record["steps"] == 3 and record["launches_per_step"] == len(plans)
    assert record["gpu_ms_per_step"] == pytest.approx(sum(r["total_ms"] for r in rows.values()) / 3)
    cap.graph.close()
    x.close()
    y.close()


WINDOW_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from foxc import vec
    from foxc.driver import open_runtime
    from foxc.profile import ProfilerWindow

    spec, steps = sys.argv[1], int(sys.argv[2])
    rt = open_runtime("cuda")
    n = 4096
    x = rt.device_array(n, np.float32, "x")
    fill = vec.plan_elementwise(rt, vec.FILL_F32, x, 1.0, n)
    scale = vec.plan_elementwise(rt, vec.SCALE_F32, x, 1.0, n)
    window = ProfilerWindow(rt, spec)
    for step in range(steps):
        window.before_step(step)
        fill.launch(rt.stream)
        scale.launch(rt.stream)
        scale.launch(rt.stream)
        window.after_step(step)
    window.close()
    rt.synchronize()
    print(f"window {spec}: {steps} steps, {steps} fill_f32 and {2 * steps} scale_f32 launches")
""")


def run_ncu(tmp_path, *ncu_args):
    script = tmp_path / "window.py"
    script.write_text(WINDOW_SCRIPT)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    cmd = ["ncu", "--profile-from-start", "off", "--target-processes", "all", "--clock-control", "none",
           "--metrics", "gpu__time_duration.sum", *ncu_args, sys.executable, str(script), "3:5", "10"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    if "ERR_NVGPUCTRPERM" in output:
        pytest.skip("ncu may not read the GPU performance counters here (ERR_NVGPUCTRPERM)")
    assert done.returncode == 0, output[-4000:]
    assert "window 3:5: 10 steps" in output, output[-4000:]
    return done.stdout, output


def profiled_names(output: str) -> Counter:
    """Kernels ncu profiled, from its '==PROF== Profiling "name" - ...' lines."""
    return Counter(re.findall(r'==PROF== Profiling "([^"]+)"', output))


def csv_kernel_names(stdout: str) -> Counter | None:
    """Kernel names of the rows of ncu's --csv --page raw table; None when there is no such table."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(lines))
    header = next((r for r in rows if r and r[0] == "ID"), None)
    if header is None or "Kernel Name" not in header:
        return None
    at = header.index("Kernel Name")
    return Counter(re.sub(r"\(.*", "", r[at]).strip() for r in rows if r and r[0].isdigit())


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu (Nsight Compute) is not on PATH")
def test_ncu_profiles_only_the_window_steps(cuda_rt, tmp_path):
    """Steps 3..5 of 10: ncu sees 3 fill_f32 and 6 scale_f32 launches, not the 10 and 20 the script made."""
    stdout, output = run_ncu(tmp_path, "--csv", "--page", "raw")
    # with --csv ncu prints no '==PROF== Profiling' lines: its table's rows are the record
    assert csv_kernel_names(stdout) == Counter({"fill_f32": 3, "scale_f32": 6}), stdout[-4000:]


@pytest.mark.skipif(shutil.which("ncu") is None, reason="ncu (Nsight Compute) is not on PATH")
def test_ncu_kernel_filter_in_the_window(cuda_rt, tmp_path):
    """The filter tools/ncu_kernel.sh uses: only the named kernel, only inside the window."""
    _, output = run_ncu(tmp_path, "-k", "regex:^scale_f32$")
    assert profiled_names(output) == Counter({"scale_f32": 6}), output[-4000:]
