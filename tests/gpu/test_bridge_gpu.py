"""The trainer's bridge kernels on the GPU against their references, outputs poisoned."""
import numpy as np
import pytest

from bridge_cases import after_sim_args, before_act_args
from foxc.testing import poisoned, run_kernel
from foxc.trainer import bridge


def both(cuda_rt, ref_rt, spec, B, args):
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    return (run_kernel(cuda_rt, spec, bridge.grid(B), bridge.BLOCK, copy()),
            run_kernel(ref_rt, spec, bridge.grid(B), bridge.BLOCK, copy()))


@pytest.mark.parametrize("B", [1, 257, 65536])
def test_bridges_match_reference(cuda_rt, ref_rt, rng, B):
    for spec, args in ((bridge.BRIDGE_BEFORE_ACT, before_act_args(rng, B, poisoned)),
                       (bridge.BRIDGE_AFTER_SIM, after_sim_args(rng, B, poisoned))):
        got, want = both(cuda_rt, ref_rt, spec, B, args)
        for i, (g, w) in enumerate(zip(got, want)):
            if g.dtype == np.float32:
                assert not np.isnan(g).any(), f"{spec.name}: output {i} left unwritten"
                np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-12, err_msg=f"{spec.name} output {i}")
            else:
                assert g.tobytes() == w.tobytes(), f"{spec.name} output {i}"
