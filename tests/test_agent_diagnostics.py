"""The diagnostics ring on the reference backend: frames written by agent_step_end, polled by the host."""
import numpy as np

from agent_cases import StepEnd
from foxc.agent.layout import FRAME_ISV


def test_frames_arrive_in_order_with_their_fields(ref_rt, rng):
    end = StepEnd(ref_rt, rng, ring_len=8, B=5)
    for k in range(5):
        end.losses.host[:] = [k, 2 * k, 3 * k, 4 * k]
        end.ring.extras.host[0] = 100 + k
        end.plan.launch(ref_rt.stream)
    frames = end.ring.poll()
    assert [f["step"] for f in frames] == [0, 1, 2, 3, 4]
    assert frames[3]["l_pi"] == 6 and frames[3]["n"] == 5 and frames[4]["extra0"] == 104
    assert frames[0]["lr_q"] == np.float32(end.bus["lr_q"])
    assert all(name in frames[0] for name in FRAME_ISV)
    assert end.ring.poll() == [] and end.ring.dropped == 0


def test_lapped_frames_are_counted_as_dropped(ref_rt, rng):
    end = StepEnd(ref_rt, rng, ring_len=4)
    for _ in range(10):
        end.plan.launch(ref_rt.stream)
    frames = end.ring.poll()
    assert [f["step"] for f in frames] == [6, 7, 8, 9]
    assert end.ring.dropped == 6


def test_the_host_view_of_the_isv_follows_the_device_copy(ref_rt, rng):
    """The controllers and the counter change the device-resident ISV; the host's view catches up with
    each step's last launch, and a host write reaches the device copy the next step reads."""
    end = StepEnd(ref_rt, rng)
    for _ in range(3):
        end.plan.launch(ref_rt.stream)
    assert end.bus.step == 3
    assert np.array_equal(end.bus.device.download(), end.bus.values)
    end.bus["per_alpha"] = 0.25
    end.plan.launch(ref_rt.stream)
    assert end.bus["per_alpha"] == 0.25 and end.bus.step == 4
