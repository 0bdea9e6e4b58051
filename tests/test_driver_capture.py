"""Capture and handle lifetimes on the reference backend: host copies refused inside a capture, device
copies and nested graphs recorded, closes idempotent, collected buffers freed (after any open capture)."""
import gc

import numpy as np
import pytest

from foxc import vec
from foxc.driver import CudaError, lifecycle


def test_host_copies_are_refused_while_capturing(ref_rt):
    x = ref_rt.device_array(8, np.float32, "weights")
    x.upload(np.ones(8, np.float32))
    plan = vec.plan_elementwise(ref_rt, vec.SCALE_F32, x, 2.0, 8)
    with pytest.raises(CudaError, match="uploading 'weights' while stream 'main' is capturing a graph"):
        with ref_rt.capture(name="refused"):
            plan.launch(ref_rt.stream)
            x.upload(np.zeros(8, np.float32))
    with pytest.raises(CudaError, match="downloading 'weights' while stream 'main' is capturing"):
        with ref_rt.capture():
            x.download()
    assert ref_rt.stream.capture_log is None and not lifecycle._open_captures  # both captures ended
    plan.launch(ref_rt.stream)  # nothing recorded above ran
    assert np.all(x.download() == 2.0)


def test_device_copies_are_recorded_and_keep_their_buffers(ref_rt):
    src = ref_rt.device_array(4, np.float32, "src")
    dst = ref_rt.device_array(4, np.float32, "dst")
    src.upload(np.arange(4, dtype=np.float32))
    with ref_rt.capture() as cap:
        ref_rt.copy_dtod(dst.ptr, src.ptr, src.nbytes)
    assert cap.graph.node_count() == 1 and cap.graph.kernel_count == 0
    src.upload(np.full(4, 7, np.float32))  # between replays, not inside the capture
    del src
    gc.collect()
    cap.graph.launch(ref_rt.stream)
    assert np.all(dst.download() == 7)


def test_a_graph_launched_inside_a_capture_is_recorded_whole(ref_rt):
    x = ref_rt.device_array(4, np.float32, "x")
    x.upload(np.ones(4, np.float32))
    with ref_rt.capture() as inner:
        vec.plan_elementwise(ref_rt, vec.SCALE_F32, x, 2.0, 4).launch(ref_rt.stream)
    with ref_rt.capture() as outer:
        inner.graph.launch(ref_rt.stream)
        inner.graph.launch(ref_rt.stream)
    assert outer.graph.kernel_count == 2
    outer.graph.launch(ref_rt.stream)
    assert np.all(x.download() == 4)


def test_nested_capture_on_one_stream_is_refused(ref_rt):
    with ref_rt.capture():
        with pytest.raises(CudaError, match="already capturing"):
            ref_rt.capture().__enter__()


def test_close_is_idempotent_and_with_closes(ref_rt):
    with ref_rt.device_array(4, np.float32, "a") as a, ref_rt.mapped_array(4, np.float32, "m") as m:
        addresses = a.ptr.addr, m.ptr.addr
    for arr, addr in zip((a, m), addresses):
        with pytest.raises(ValueError, match="closed"):
            arr.ptr
        with pytest.raises(ValueError, match="closed"):
            arr.at(1)
        arr.close()
        with pytest.raises(CudaError, match="not inside any live allocation"):
            ref_rt.space.resolve(addr)
    with pytest.raises(ValueError, match="device array 'a' is closed"):
        a.upload(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="device array 'a' is closed"):
        a.download()
    with ref_rt as rt:
        assert rt.backend == "reference"
    ref_rt.close()


def test_a_collected_array_is_freed_but_not_while_a_capture_is_open(ref_rt):
    doomed = ref_rt.device_array(4, np.float32, "doomed")
    addr = doomed.ptr.addr
    doomed._cycle = doomed  # only the cyclic collector frees it
    with ref_rt.capture():
        del doomed
        gc.collect()
        assert ref_rt.space.resolve(addr).name == "doomed" and lifecycle._deferred
    assert not lifecycle._deferred
    with pytest.raises(CudaError, match="not inside any live allocation"):
        ref_rt.space.resolve(addr)

