"""The trainer's bridge kernels (references) against a naive loop per backtest."""
import numpy as np

from bridge_cases import CAP, after_sim_args, before_act_args
from foxc.testing import poisoned, run_kernel
from foxc.trainer import bridge


def test_before_act(ref_rt, rng):
    B = 300
    args = before_act_args(rng, B, poisoned)
    planes = args[0]
    out = run_kernel(ref_rt, bridge.BRIDGE_BEFORE_ACT, bridge.grid(B), bridge.BLOCK, args)
    labels, mask = out[1:3]
    for b in range(B):
        for h in range(3):
            assert labels[b, h] == planes[0, b, h] and mask[b, h] == planes[5, b, h]
            assert labels[b, 3 + h] == planes[1, b, h] and mask[b, 3 + h] == planes[6, b, h]
            assert labels[b, 6 + h] == planes[2, b, h] and mask[b, 6 + h] == planes[6, b, h]


def test_after_sim(ref_rt, rng):
    B = 300
    args = after_sim_args(rng, B, poisoned)
    pos, log, prev = args[0], args[1], args[2].copy()
    out = run_kernel(ref_rt, bridge.BRIDGE_AFTER_SIM, bridge.grid(B), bridge.BLOCK, args)
    new_prev, closed, closed_pnl, drawdown = out[2:]
    for b in range(B):
        n = int(pos["trades"][b]) - int(prev[b])
        assert closed[b] == n and new_prev[b] == pos["trades"][b]
        pnl = sum(int(log["pnl"][b, (int(pos["trades"][b]) - 1 - k) % CAP]) for k in range(min(n, CAP)))
        assert np.isclose(closed_pnl[b], pnl * 1e-9, rtol=1e-6, atol=1e-12)
    assert (closed > 0).any() and (closed == 0).any()
