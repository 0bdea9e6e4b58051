"""The CUDA driver layer on a real GPU: kernels against their references, mapped memory, graphs, errors."""
import numpy as np
import pytest

from foxc import vec
from foxc.driver import CudaError, KernelSpec, f32, i32, i64, ptr
from foxc.driver.errors import check
from kernel_check import assert_close, poisoned, run_kernel


def both(cuda_rt, ref_rt, spec, grid, block, args):
    return (run_kernel(cuda_rt, spec, grid, block, [a.copy() if isinstance(a, np.ndarray) else a for a in args]),
            run_kernel(ref_rt, spec, grid, block, [a.copy() if isinstance(a, np.ndarray) else a for a in args]))


@pytest.mark.parametrize("n", [1, 255, 257, 100_003, 3_000_000])
def test_elementwise_kernels_match_reference(cuda_rt, ref_rt, rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = float(rng.standard_normal())
    g = vec.grid_for(n)
    for spec, args in [
        (vec.FILL_F32, [poisoned(n), a, n]),
        (vec.FILL_U32, [poisoned(n, np.uint32), int(rng.integers(0, 2**32)), n]),
        (vec.COPY_F32, [poisoned(n), x, n]),
        (vec.SCALE_F32, [x, a, n]),
        (vec.AXPY_F32, [y, a, x, n]),
    ]:
        got, want = both(cuda_rt, ref_rt, spec, g, vec.BLOCK, args)
        for i, (o, w) in enumerate(zip(got, want)):
            if o.dtype == np.float32:
                assert not np.isnan(o).any(), f"{spec.name}: output {i} has unwritten elements"
                assert_close(o, w, 1e-6, f"{spec.name} arg {i}")
            else:
                assert np.array_equal(o, w), spec.name


def test_small_grid_covers_everything_by_striding(cuda_rt, rng):
    n = 50_000
    out, = run_kernel(cuda_rt, vec.FILL_F32, 3, 128, [poisoned(n), 4.0, n])
    assert np.all(out == 4.0)


def test_mapped_pinned_visible_both_ways(cuda_rt, rng):
    n = 4096
    m = cuda_rt.mapped_array(n, np.float32, "mapped")
    d = cuda_rt.device_array(n, np.float32, "dev")
    src = rng.standard_normal(n).astype(np.float32)
    m.host[:] = src  # host writes, the kernel reads through the device pointer
    vec.plan_elementwise(cuda_rt, vec.COPY_F32, d, m, n).launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    assert np.array_equal(d.download(), src)
    vec.plan_elementwise(cuda_rt, vec.SCALE_F32, m, 2.0, n).launch(cuda_rt.stream)  # the kernel writes
    cuda_rt.stream.synchronize()
    assert np.array_equal(m.host, src * np.float32(2.0))
    m.close(); d.close()


def test_graph_equals_eager_launches(cuda_rt, rng):
    n, steps = 100_000, 25
    x0 = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)

    def setup():
        x = cuda_rt.device_array(n, np.float32, "x"); x.upload(x0)
        y = cuda_rt.device_array(n, np.float32, "y"); y.upload(y0)
        return y, [vec.plan_elementwise(cuda_rt, vec.AXPY_F32, y, 0.25, x, n),
                   vec.plan_elementwise(cuda_rt, vec.SCALE_F32, y, 0.875, n),
                   vec.plan_elementwise(cuda_rt, vec.AXPY_F32, x, -0.5, y, n)]

    y_eager, plans = setup()
    for _ in range(steps):
        for p in plans:
            p.launch(cuda_rt.stream)
    y_graph, plans = setup()
    with cuda_rt.capture(name="test") as cap:
        for p in plans:
            p.launch(cuda_rt.stream)
    assert cap.graph.kernel_count == 3 and cap.graph.node_count() == 3
    for _ in range(steps):
        cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    assert np.array_equal(y_eager.download(), y_graph.download())
    cap.graph.close()
    cap.graph.close()  # idempotent


def test_forked_branch_runs_beside_the_stream(cuda_rt, rng):
    """Two independent chains, one on a forked side stream: the graph holds both, in parallel (no edge
    between them), and replays to the eager result; an unjoined fork fails the capture by name and leaves
    both streams usable."""
    n, steps = 100_000, 5
    x0, y0 = rng.standard_normal((2, n)).astype(np.float32)

    def setup():
        x, y = cuda_rt.device_array(n, np.float32, "x"), cuda_rt.device_array(n, np.float32, "y")
        x.upload(x0)
        y.upload(y0)
        return x, y, [vec.plan_elementwise(cuda_rt, vec.SCALE_F32, x, 0.5, n)], \
            [vec.plan_elementwise(cuda_rt, vec.SCALE_F32, y, 2.0, n), vec.plan_elementwise(cuda_rt, vec.AXPY_F32, y,
                                                                                             1.0, y, n)]
    x_e, y_e, main, side_plans = setup()
    for _ in range(steps):
        for p in main + side_plans:
            p.launch(cuda_rt.stream)
    x_g, y_g, main, side_plans = setup()
    side = cuda_rt.side_stream("lane")
    with cuda_rt.capture(name="branches") as cap:
        cap.fork(side)
        for p in side_plans:
            p.launch(side)
        for p in main:
            p.launch(cuda_rt.stream)
        cap.join(side)
    from cuda.bindings import driver
    err, _, _, _, n_edges = driver.cuGraphGetEdges(cap.graph._graph, 0)
    assert not err and cap.graph.kernel_count == 3 and cap.graph.node_count() == 3 and n_edges == 1
    for _ in range(steps):
        cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    assert np.array_equal(x_e.download(), x_g.download()) and np.array_equal(y_e.download(), y_g.download())
    with pytest.raises(CudaError, match="'lane' forked and not joined"):
        with cuda_rt.capture(name="unjoined") as bad:
            bad.fork(side)
            main[0].launch(side)
    assert side.capture_log is None and cuda_rt.stream.capture_log is None
    main[0].launch(side)  # neither stream is left capturing
    side.synchronize()
    main[0].launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()


def test_urgent_side_stream_keeps_its_priority_in_a_graph(cuda_rt):
    """An urgent side stream is at the context's greatest priority, the main stream at the least; captured
    kernels keep their stream's priority as a node attribute, which the instantiated graph uses."""
    from cuda.bindings import driver
    least, greatest = check(driver.cuCtxGetStreamPriorityRange(), "cuCtxGetStreamPriorityRange", "test")
    assert greatest < least  # numerically lower is more urgent
    urgent, plain = cuda_rt.side_stream("urgent", urgent=True), cuda_rt.side_stream("plain")
    prio = lambda st: check(driver.cuStreamGetPriority(st._handle), "cuStreamGetPriority", "test")  # noqa: E731
    assert (prio(urgent), prio(plain), prio(cuda_rt.stream)) == (greatest, least, least)
    assert urgent.urgent and not plain.urgent
    n = 4096
    x, y = cuda_rt.device_array(n, np.float32, "x"), cuda_rt.device_array(n, np.float32, "y")
    x.upload(np.ones(n, np.float32))
    y.upload(np.ones(n, np.float32))
    with cuda_rt.capture(name="priorities") as cap:
        cap.fork(urgent)
        vec.plan_elementwise(cuda_rt, vec.SCALE_F32, y, 3.0, n).launch(urgent)
        vec.plan_elementwise(cuda_rt, vec.SCALE_F32, x, 2.0, n).launch(cuda_rt.stream)
        cap.join(urgent)
    nodes, count = check(driver.cuGraphGetNodes(cap.graph._graph, 8), "cuGraphGetNodes", "test")
    attr = driver.CUkernelNodeAttrID.CU_LAUNCH_ATTRIBUTE_PRIORITY
    found = sorted(check(driver.cuGraphKernelNodeGetAttribute(node, attr), "cuGraphKernelNodeGetAttribute",
                         "test").priority for node in nodes[:count])
    assert found == sorted([greatest, least])
    cap.graph.launch(cuda_rt.stream)
    cuda_rt.stream.synchronize()
    assert np.all(x.download() == 2.0) and np.all(y.download() == 3.0)


def test_finalizer_during_capture_is_deferred(cuda_rt):
    """A buffer collected while a capture is open is freed after it, not inside it."""
    import gc
    from foxc.driver import lifecycle
    x = cuda_rt.device_array(1024, np.float32, "x")
    plan = vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 3.0, 1024)
    plan.launch(cuda_rt.stream)
    holder = [cuda_rt.device_array(1024, np.float32, "doomed")]
    holder[0]._cycle = holder[0]  # only the cyclic collector can free it
    with cuda_rt.capture(name="gc") as cap:
        plan.launch(cuda_rt.stream)
        holder.clear()
        gc.collect()
        assert lifecycle._deferred, "the collected buffer should wait for the capture to end"
        plan.launch(cuda_rt.stream)
    assert not lifecycle._deferred
    cap.graph.launch(cuda_rt.stream)
    assert np.all(x.download() == 3.0)


def test_host_copies_are_refused_while_capturing(cuda_rt):
    """A captured host copy would read (or write) host memory at replay, long after the call returned."""
    x = cuda_rt.device_array(1024, np.float32, "weights")
    plan = vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 3.0, 1024)
    plan.launch(cuda_rt.stream)
    with pytest.raises(CudaError, match="uploading 'weights' while stream 'main' is capturing a graph"):
        with cuda_rt.capture(name="refused"):
            plan.launch(cuda_rt.stream)
            x.upload(np.zeros(1024, np.float32))
    with pytest.raises(CudaError, match="downloading 'weights' while stream 'main' is capturing"):
        with cuda_rt.capture(name="refused"):
            x.download()
    assert cuda_rt.stream.capture_log is None
    vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 5.0, 1024).launch(cuda_rt.stream)  # the stream is not capturing
    assert np.all(x.download() == 5.0)
    x.close()


def test_captured_device_copy_is_a_memcpy_node(cuda_rt, rng):
    src = cuda_rt.device_array(4096, np.float32, "src")
    dst = cuda_rt.device_array(4096, np.float32, "dst")
    with cuda_rt.capture(name="copy") as cap:
        cuda_rt.copy_dtod(dst.ptr, src.ptr, src.nbytes)
    assert cap.graph.kernel_count == 0 and cap.graph.node_count() == 1
    values = rng.standard_normal(4096).astype(np.float32)
    src.upload(values)  # between replays: the graph reads the device buffer when it runs
    del src  # the graph holds it
    cap.graph.launch(cuda_rt.stream)
    assert np.array_equal(dst.download(), values)
    cap.graph.close()
    dst.close()


def test_wrong_declaration_rejected_at_load(cuda_rt):
    """By name and type against the source's signature (offsets and sizes against the cubin are
    checked after it: tests/test_kernel_spec.py)."""
    narrow = KernelSpec("fill_f32", "vec/elementwise", (ptr("out"), f32("value"), i32("n")))
    with pytest.raises(ValueError, match=r"kernel fill_f32 .*parameter 2 is i64 'n' in the source, i32 'n' in the KernelSpec"):
        cuda_rt.kernel(narrow)
    short = KernelSpec("axpy_f32", "vec/elementwise", (ptr("y"), f32("alpha"), ptr("x")))
    with pytest.raises(ValueError, match="axpy_f32 .*the source has 4 parameters, the KernelSpec 3"):
        cuda_rt.kernel(short)
    swapped = KernelSpec("axpy_f32", "vec/elementwise", (ptr("x"), f32("alpha"), ptr("y"), i64("n")))
    with pytest.raises(ValueError, match="parameter 0 is ptr 'y' in the source, ptr 'x' in the KernelSpec"):
        cuda_rt.kernel(swapped)


def test_driver_error_surfaces_by_name(cuda_rt):
    x = cuda_rt.device_array(16, np.float32, "x")
    plan = cuda_rt.plan(vec.FILL_F32, 1, 32, (x, 1.0, 16), shared_bytes=1 << 20)  # more shared memory than exists
    with pytest.raises(CudaError, match=r"cuLaunchKernel failed with CUDA_ERROR_INVALID_VALUE while launching fill_f32"):
        plan.launch(cuda_rt.stream)
    vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 2.0, 16).launch(cuda_rt.stream)  # the context survives
    assert np.all(x.download() == 2.0)


def test_events_time_device_work(cuda_rt):
    x = cuda_rt.device_array(1 << 24, np.float32, "x")
    plan = vec.plan_elementwise(cuda_rt, vec.FILL_F32, x, 1.0, x.size)
    a, b = cuda_rt.event("a"), cuda_rt.event("b")
    a.record(cuda_rt.stream)
    for _ in range(5):
        plan.launch(cuda_rt.stream)
    b.record(cuda_rt.stream)
    ms = a.elapsed_ms(b)
    assert 0 < ms < 1000


def test_dtod_copy_and_close_waits(cuda_rt, rng):
    src = rng.standard_normal(1 << 20).astype(np.float32)
    a = cuda_rt.device_array(src.size, np.float32, "a")
    b = cuda_rt.device_array(src.size, np.float32, "b")
    a.upload(src)
    cuda_rt.copy_dtod(b.ptr, a.ptr, a.nbytes)
    assert np.array_equal(b.download(), src)
    a.close(); a.close()
    with pytest.raises(ValueError, match="closed"):
        a.ptr


def _resident_blocks(plan, block: int) -> int:
    from cuda.bindings import driver
    return check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(plan.kernel._handle, block, plan._shared_bytes),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor", f"the occupancy of {plan.name}")


@pytest.mark.parametrize("per_sm", [1, 2, 3, 5])
def test_max_blocks_per_sm_holds_a_kernel_to_that_many_blocks(cuda_rt, per_sm):
    """The padded shared memory leaves room for exactly `per_sm` blocks of a kernel that would fit more (a fill of
    256-thread blocks: 8 an SM by threads), and the padded plan still computes the same."""
    n = 10_000
    out = cuda_rt.device_array(n, np.float32, "out")
    free = vec.plan_elementwise(cuda_rt, vec.FILL_F32, out, 1.0, n)
    held = cuda_rt.plan(vec.FILL_F32, vec.grid_for(n), vec.BLOCK, (out, 2.5, n), max_blocks_per_sm=per_sm)
    assert _resident_blocks(free, vec.BLOCK) > per_sm and _resident_blocks(held, vec.BLOCK) == per_sm
    held.launch(cuda_rt.stream)
    assert np.all(out.download() == 2.5)
    out.close()


def test_the_forward_scan_is_spread_when_it_fits_one_wave(cuda_rt):
    """At B = 1,024 the TF32 forward scan's 256 blocks fit one wave at two an SM: held to two (three fit by
    registers); at B = 4,096 it is left as it is."""
    from foxc.nn import ssm
    D, F, K = 128, 16, 32
    arrays = {k: cuda_rt.device_array(1, np.float32, k) for k in ("gates", "states", "y", "x", "W", "bias")}
    plans = {B: ssm.plan_proj_scan_fwd(cuda_rt, K, B, D, F, precision="tf32", **arrays) for B in (1024, 4096)}
    assert ssm.one_wave_spread(cuda_rt, ssm.proj_scan_grid(1024, D)) == ssm.PS_SPREAD
    assert ssm.one_wave_spread(cuda_rt, ssm.proj_scan_grid(4096, D)) is None
    assert _resident_blocks(plans[1024], ssm.PS_THREADS) == ssm.PS_SPREAD
    assert _resident_blocks(plans[4096], ssm.PS_THREADS) > ssm.PS_SPREAD
    for a in arrays.values():
        a.close()
