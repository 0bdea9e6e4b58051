import math
import re
from pathlib import Path

import numpy as np
import pytest

from foxc.isv import IsvBus, N_SLOTS, SLOTS, slot_index
from foxc.isv import header

GOLDEN = Path(__file__).parent / "golden" / "isv_slots.txt"


def test_indices_are_dense_and_names_unique():
    assert [s.index for s in SLOTS] == list(range(N_SLOTS))
    assert len({s.name for s in SLOTS}) == N_SLOTS
    assert all(s.doc and math.isfinite(s.bootstrap) for s in SLOTS)


def test_golden_indices_are_append_only():
    """Checkpoints store the bus by index: an existing slot may never move or vanish."""
    golden = [line.split() for line in GOLDEN.read_text().splitlines() if line and not line.startswith("#")]
    assert golden, "the golden list is empty"
    for index, name in golden:
        assert SLOTS[int(index)].name == name, f"slot {index} was '{name}' in the golden list"


def test_generated_header_is_current():
    assert header.is_current(), "cuda/include/foxc/isv_slots.h is stale: python -m foxc.isv.header --write"
    text = header.render()
    for s in SLOTS:
        assert f"#define {s.macro}" in text


def test_header_check_reports_stale_file(tmp_path):
    stale = tmp_path / "isv_slots.h"
    stale.write_text(header.render().replace("ISV_GAMMA", "ISV_GAMMA_OLD"))
    assert not header.is_current(stale)
    assert header.write(stale) and header.is_current(stale)


def test_bus_bootstraps_and_reads_without_copy(ref_rt):
    bus = IsvBus(ref_rt)
    assert bus["gamma"] == np.float32(0.99)
    bus["gamma"] = 0.5
    assert bus.values[slot_index("gamma")] == 0.5
    bus.reset()
    assert np.array_equal(bus.values, np.array([s.bootstrap for s in SLOTS], np.float32))


def test_device_resident_bus_writes_reach_both_copies(ref_rt):
    """Kernels address the device copy; host writes go to both (agent_step_end publishes the device
    copy to the host's view: tests/test_agent_diagnostics.py)."""
    bus = IsvBus(ref_rt, device_resident=True)
    assert bus.ptr.addr == bus.device.ptr.addr != bus.array.ptr.addr
    bus["gamma"] = 0.5  # host writes reach the device copy
    assert bus.device.download()[slot_index("gamma")] == np.float32(0.5)
    bus.load(np.zeros(N_SLOTS, np.float32))
    assert not bus.device.download().any() and not bus.values.any()


@pytest.mark.parametrize("value", ["x", [1, 2], None, float("nan"), math.inf, True])
def test_bus_write_refuses_what_is_no_finite_number(ref_rt, value):
    """bus["gamma"] = "x" failed with numpy's 'could not convert string to float' naming no slot, NaN was written
    (every kernel that reads gamma then computes NaN): foxc's misuse, an assertion naming the slot, the bus
    unchanged."""
    bus = IsvBus(ref_rt)
    with pytest.raises(AssertionError, match=f"ISV slot 'gamma' must be a finite number, got {re.escape(repr(value))}"):
        bus["gamma"] = value
    assert bus["gamma"] == np.float32(0.99)
    bus["gamma"] = np.float64(0.5)
    assert bus["gamma"] == 0.5


def test_a_closed_bus_is_not_read(ref_rt):
    """After close() the slots' mapped memory is freed: reads gave NaN on the reference backend (on a GPU they
    read freed pinned memory); each access is foxc's misuse, an assertion saying the bus is closed."""
    bus = IsvBus(ref_rt)
    bus.close()
    for access in (lambda: bus["gamma"], lambda: bus.values, bus.as_dict, lambda: bus.load(np.zeros(N_SLOTS))):
        with pytest.raises(AssertionError, match="ISV bus 'isv' is closed"):
            access()
