"""The reference backend's runtime: memory, copies, launches, capture and replay."""
import re

import numpy as np
import pytest

from foxc import vec
from foxc.driver import CudaError


def test_upload_download_roundtrip(ref_rt, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    with ref_rt.device_array(1000, np.float32, "x") as d:
        d.upload(x)
        assert np.array_equal(d.download(), x)


def test_uninitialised_device_memory_is_not_zero(ref_rt):
    d = ref_rt.device_array(16, np.float32, "x")
    assert not np.any(d.download() == 0)


def test_upload_checks_dtype_and_size(ref_rt):
    d = ref_rt.device_array(4, np.float32, "x")
    with pytest.raises(TypeError, match="holds float32, got float64"):
        d.upload(np.zeros(4))
    with pytest.raises(ValueError, match="holds 16 bytes, got 32"):
        d.upload(np.zeros(8, np.float32))


def test_pointer_resolution_and_bounds(ref_rt):
    a = ref_rt.device_array(10, np.float32, "a")
    b = ref_rt.device_array(10, np.float32, "b")
    mem = ref_rt.space.resolve(a.at(3).addr)
    assert mem.offset == 12 and mem.name == "a"
    with pytest.raises(CudaError, match="only 7 remain"):
        mem.f32(8)
    with pytest.raises(CudaError, match="ILLEGAL_ADDRESS"):
        ref_rt.space.resolve(a.ptr.addr + 40 + 16)  # past the end, inside the guard gap
    a.close()
    with pytest.raises(CudaError, match="not inside any live allocation"):
        ref_rt.space.resolve(a._addr)
    assert ref_rt.space.resolve(b.ptr.addr).name == "b"


def test_closed_array_has_no_pointer(ref_rt):
    a = ref_rt.device_array(4, np.float32, "a")
    a.close()
    a.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        a.ptr


def test_mapped_array_is_shared_with_kernels(ref_rt):
    m = ref_rt.mapped_array(64, np.float32, "m")
    m.host[:] = 1.0
    vec.plan_elementwise(ref_rt, vec.SCALE_F32, m, 3.0, 64).launch(ref_rt.stream)
    assert np.all(m.host == 3.0)


def test_dtod_copy(ref_rt, rng):
    x = rng.standard_normal(33).astype(np.float32)
    a = ref_rt.device_array(33, np.float32, "a")
    b = ref_rt.device_array(33, np.float32, "b")
    a.upload(x)
    ref_rt.copy_dtod(b.ptr, a.ptr, a.nbytes)
    assert np.array_equal(b.download(), x)


def test_capture_records_instead_of_running(ref_rt):
    x = ref_rt.device_array(8, np.float32, "x")
    x.upload(np.ones(8, np.float32))
    plan = vec.plan_elementwise(ref_rt, vec.SCALE_F32, x, 2.0, 8)
    with ref_rt.capture(name="double") as cap:
        plan.launch(ref_rt.stream)
        plan.launch(ref_rt.stream)
    assert np.all(x.download() == 1.0)  # nothing ran during capture
    assert cap.graph.kernel_count == 2
    cap.graph.launch(ref_rt.stream)
    cap.graph.launch(ref_rt.stream)
    assert np.all(x.download() == 16.0)


def test_graph_replay_equals_eager(ref_rt, rng):
    n = 1000
    x0 = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)

    def build():
        x = ref_rt.device_array(n, np.float32, "x"); x.upload(x0)
        y = ref_rt.device_array(n, np.float32, "y"); y.upload(y0)
        plans = [vec.plan_elementwise(ref_rt, vec.AXPY_F32, y, 0.5, x, n),
                 vec.plan_elementwise(ref_rt, vec.SCALE_F32, y, 0.9, n)]
        return y, plans

    y_eager, plans = build()
    for _ in range(10):
        for p in plans:
            p.launch(ref_rt.stream)
    y_graph, plans = build()
    with ref_rt.capture() as cap:
        for p in plans:
            p.launch(ref_rt.stream)
    for _ in range(10):
        cap.graph.launch(ref_rt.stream)
    assert np.array_equal(y_eager.download(), y_graph.download())


def test_events_time_host_work(ref_rt):
    a, b = ref_rt.event("a"), ref_rt.event("b")
    a.record(ref_rt.stream)
    b.record(ref_rt.stream)
    assert a.elapsed_ms(b) >= 0
    with pytest.raises(ValueError, match="never recorded"):
        ref_rt.event("c").elapsed_ms(a)


def test_block_too_large_is_refused(ref_rt):
    x = ref_rt.device_array(4, np.float32, "x")
    with pytest.raises(ValueError, match=r"fill_f32: block \(2048, 1, 1\)"):
        ref_rt.plan(vec.FILL_F32, 1, 2048, (x, 1.0, 4))


def test_missing_reference_is_named(ref_rt):
    from foxc.driver import KernelSpec, ptr
    with pytest.raises(ValueError, match="no numpy reference registered"):
        ref_rt.kernel(KernelSpec("not_registered", "x/y", (ptr("a"),)))


# ---- BLAS threads ------------------------------------------------------------------------------------

_BLAS_PROBE = ("import json; from threadpoolctl import threadpool_info;"
               "from foxc.driver.reference.runtime import ReferenceRuntime;"
               "blas = lambda: [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'];"
               "before = blas(); rt = ReferenceRuntime();"
               "print(json.dumps([before, blas(), rt.device_name]))")


def _blas_probe(**env_set):
    """(BLAS threads before, after a ReferenceRuntime, its device name) in a fresh process."""
    import json
    import os
    import subprocess
    import sys
    from foxc.driver.reference.runtime import USER_SETTINGS
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS}
    env.update(env_set)
    out = subprocess.run([sys.executable, "-c", _BLAS_PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_reference_runtime_pins_blas_to_one_thread_unless_the_user_chose():
    _, after, name = _blas_probe()
    assert after == [1] and "pinned" in name
    before, after, name = _blas_probe(OPENBLAS_NUM_THREADS="2")
    assert before == after == [2] and "OPENBLAS_NUM_THREADS=2" in name


def test_max_blocks_per_sm_changes_nothing_on_the_reference_and_must_be_positive(ref_rt):
    out = ref_rt.device_array(10, np.float32, "out")
    plan = ref_rt.plan(vec.FILL_F32, 1, vec.BLOCK, (out, 3.0, 10), max_blocks_per_sm=2)
    plan.launch(ref_rt.stream)
    assert np.all(out.download() == 3.0) and ref_rt.multiprocessors == 1
    with pytest.raises(ValueError, match="max_blocks_per_sm must be at least 1"):
        ref_rt.plan(vec.FILL_F32, 1, vec.BLOCK, (out, 3.0, 10), max_blocks_per_sm=0)
    out.close()


def test_forward_scan_is_spread_only_when_its_grid_fits_one_wave():
    from types import SimpleNamespace

    from foxc.nn import ssm
    h200 = SimpleNamespace(multiprocessors=132)
    assert ssm.one_wave_spread(h200, ssm.proj_scan_grid(1024, 128)) == ssm.PS_SPREAD  # 256 blocks <= 264
    assert ssm.one_wave_spread(h200, ssm.proj_scan_grid(1056, 128)) == ssm.PS_SPREAD  # 264
    assert ssm.one_wave_spread(h200, ssm.proj_scan_grid(1072, 128)) is None  # 268
    assert ssm.one_wave_spread(h200, ssm.proj_scan_grid(4096, 128)) is None


def test_a_closed_runtime_refuses_to_allocate_plan_or_load(ref_rt):
    """After close() the reference runtime still allocated, planned and launched (a CUDA one, whose context is
    released, could crash): every call that makes something is refused, on both backends (runtime.Runtime)."""
    m = ref_rt.mapped_array(64, np.float32, "m")
    ref_rt.close()
    ref_rt.close()  # idempotent
    calls = [lambda: ref_rt.device_array(4, np.float32, "x"), lambda: ref_rt.mapped_array(4, np.float32, "y"),
             lambda: vec.plan_elementwise(ref_rt, vec.SCALE_F32, m, 3.0, 64), lambda: ref_rt.kernel(vec.SCALE_F32),
             lambda: ref_rt.side_stream("side"), lambda: ref_rt.event("e"), lambda: ref_rt.capture(name="g")]
    for call in calls:
        with pytest.raises(ValueError, match="^reference runtime is closed$"):
            call()


@pytest.mark.parametrize("shape", [2.5, (2.5, 3), (4, -1), True, "8", (2, None)])
def test_a_shape_that_is_no_whole_sizes_is_refused_naming_it(ref_rt, shape):
    """device_array(2.5, ...) said "'float' object is not iterable" and (2.5, 3) was cut to (2, 3)."""
    with pytest.raises(ValueError, match=re.escape(f"'x': shape {shape!r}")):
        ref_rt.device_array(shape, np.float32, "x")


@pytest.mark.parametrize("dtype", [object, str, "U4", np.dtype([("a", np.int32), ("b", object)])])
def test_a_dtype_device_memory_cannot_hold_is_refused(ref_rt, dtype):
    """An object dtype was accepted on the reference backend (a pointer's bytes), never by a device."""
    with pytest.raises(ValueError, match=re.escape(f"'x': dtype {np.dtype(dtype)}")):
        ref_rt.device_array(4, dtype, "x")
