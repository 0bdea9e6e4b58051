"""The step's side lanes (`Beside`): in the graph they run concurrently with the main lanes, so each pair
must share no array that either writes. The reference backend runs a graph in the order it was issued;
captured with the side lanes first and with them last, the same seed must give the same bits, and the
same as eager steps. A lane misdeclared on purpose shows that the comparison can fail."""
import functools

import pytest

from foxc.driver.errors import CudaError
from foxc.trainer.step import Beside
from trainer_cases import assert_same_state, config, market, state, trainer

DATA = market()
STEPS = 10  # capture after 64 // 16 + 3 = 7 steps, then graph replays


def run(rt, cfg, side_first=None, phases=None):
    t = trainer(rt, cfg, DATA)
    if phases is not None:
        t.ts.phases = phases(t.ts.phases)
    if side_first is not None:
        t.capture = functools.partial(t.capture, side_first=side_first)
    t.train(STEPS)
    assert (t.graph is not None) == (side_first is not None)
    return t


@pytest.mark.parametrize("precision", ["f32", "tf32"])
def test_lanes_in_either_order_give_the_same_bits(ref_rt, precision):
    eager = state(run(ref_rt, config(precision=precision, graph="off")))
    main_first = state(run(ref_rt, config(precision=precision, graph="on"), side_first=False))
    side_first = state(run(ref_rt, config(precision=precision, graph="on"), side_first=True))
    assert_same_state(eager, main_first)
    assert_same_state(eager, side_first)


def test_a_lane_that_shares_data_changes_the_bits(ref_rt):
    """rl_forward reads the batch's next states that replay_next writes: in two lanes of one Beside, the order
    decides."""
    def misdeclared(phases):
        out = []
        for item in phases:
            names = [name for name, _ in item.main] if isinstance(item, Beside) else []
            if "replay_next" in names:
                moved = item.main[names.index("replay_next")]
                item = Beside(side=[*item.side, moved], main=[p for p in item.main if p is not moved])
            out.append(item)
        return out
    cfg = config(graph="on")
    a = state(run(ref_rt, cfg, side_first=False, phases=misdeclared))
    b = state(run(ref_rt, cfg, side_first=True, phases=misdeclared))
    with pytest.raises(AssertionError):
        assert_same_state(a, b)


def test_a_fork_must_be_joined(ref_rt):
    side = ref_rt.side_stream("lane")
    with pytest.raises(CudaError, match="'lane' forked and not joined"):
        with ref_rt.capture(name="g") as cap:
            cap.fork(side)
    assert side.capture_log is None and ref_rt.stream.capture_log is None
    with ref_rt.capture(name="g") as cap:
        with pytest.raises(CudaError, match="was not forked"):
            cap.join(side)
        cap.fork(side)
        with pytest.raises(CudaError, match="already capturing"):
            cap.fork(side)
        cap.join(side)
    assert cap.graph is not None
