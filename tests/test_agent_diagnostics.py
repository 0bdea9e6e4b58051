import numpy as np

from agent_cases import isv_values
from foxc.agent.diagnostics import DiagnosticsRing
from foxc.agent.layout import FRAME_ISV, N_STATS
from foxc.isv import IsvBus
from foxc.isv.kernels import plan_step_increment


def make(rt, ring_len=8):
    bus = IsvBus(rt)
    stats = rt.device_array(N_STATS, np.float64, "stats")
    losses = rt.mapped_array(4, np.float32, "losses")
    ring = DiagnosticsRing(rt, bus, stats, losses, ring_len=ring_len)
    return bus, stats, losses, ring, plan_step_increment(rt, bus)


def test_frames_arrive_in_order_with_their_fields(ref_rt):
    bus, stats, losses, ring, step = make(ref_rt)
    for k in range(5):
        stats.upload(np.arange(N_STATS, dtype=np.float64) + k)
        losses.host[:] = [k, 2 * k, 3 * k, 4 * k]
        ring.extras.host[0] = 100 + k
        ring.launch(ref_rt.stream)
        step.launch(ref_rt.stream)
    frames = ring.poll()
    assert [f["step"] for f in frames] == [0, 1, 2, 3, 4]
    assert frames[3]["l_pi"] == 6 and frames[3]["n"] == 3 and frames[4]["extra0"] == 104
    assert frames[0]["lr_q"] == np.float32(bus["lr_q"])
    assert all(name in frames[0] for name in FRAME_ISV)
    assert ring.poll() == [] and ring.dropped == 0


def test_lapped_frames_are_counted_as_dropped(ref_rt):
    bus, stats, losses, ring, step = make(ref_rt, ring_len=4)
    stats.upload(np.zeros(N_STATS))
    for _ in range(10):
        ring.launch(ref_rt.stream)
        step.launch(ref_rt.stream)
    frames = ring.poll()
    assert [f["step"] for f in frames] == [6, 7, 8, 9]
    assert ring.dropped == 6
