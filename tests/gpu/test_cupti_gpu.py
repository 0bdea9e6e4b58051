"""CUPTI kernel records on a real GPU: one per kernel, eager and inside a graph, named and timed."""
from collections import Counter

import numpy as np
import pytest

from foxc import vec
from foxc.bench.cupti import CuptiError, KernelActivity, busy_fraction, kernel_summary

N = 1 << 22  # 16 MB a kernel: microseconds each, well above the timestamps' resolution
SKEW_NS = 50_000


@pytest.fixture
def cupti():
    try:
        KernelActivity()
    except CuptiError as e:
        pytest.skip(str(e))


def test_kernel_records_of_eager_launches_and_graph_replays(cuda_rt, cupti):
    x = cuda_rt.device_array(N, np.float32, "x")
    fill = vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 2.0, N)
    scale = vec.plan_elementwise(cuda_rt, vec.SCALE_F32, x, 1.0, N)
    fill.launch(cuda_rt.stream)
    scale.launch(cuda_rt.stream)
    with cuda_rt.capture(name="fill_scale") as cap:
        fill.launch(cuda_rt.stream)
        scale.launch(cuda_rt.stream)
    stream = cuda_rt.stream
    stream.synchronize()
    with KernelActivity() as trace:
        for _ in range(3):
            fill.launch(stream)
        stream.synchronize()
        t0 = trace.timestamp()
        for _ in range(5):
            cap.graph.launch(stream)
        stream.synchronize()
        t1 = trace.timestamp()
    assert not trace.dropped and not trace.untimed
    assert Counter(k.name for k in trace.kernels) == {"fill_f32": 8, "scale_f32": 5}
    eager, graphed = [k for k in trace.kernels if k.graph_id == 0], [k for k in trace.kernels if k.graph_id]
    assert len(eager) == 3 and all(k.name == "fill_f32" and k.correlation > 0 for k in eager)
    assert len(graphed) == 10 and len({k.graph_id for k in graphed}) == 1
    # GPU timestamps on the host's clock: the replays inside the host's span, up to CUPTI's clock normalisation
    assert all(t0 - SKEW_NS <= k.start < k.end <= t1 + SKEW_NS for k in graphed)
    assert all(k.end <= t0 + SKEW_NS for k in eager)
    busy = busy_fraction([(k.start, k.end) for k in graphed], (t0, t1))
    assert 0 < busy <= 1
    assert {r["name"]: r["count"] for r in kernel_summary(graphed)} == {"fill_f32": 5, "scale_f32": 5}

    with KernelActivity() as again:  # a second trace in the same process sees only its own kernels
        scale.launch(stream)
        stream.synchronize()
    assert [k.name for k in again.kernels] == ["scale_f32"]
    assert np.allclose(x.download(), 2.0)
    cap.graph.close()
    x.close()
