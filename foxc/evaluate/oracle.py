"""An oracle in the simulator: the exact optimal policy (foxc.evaluate.optimum) fed the latent imbalance
as read back from the book. A BASELINE, not the RL agent: it knows the market's process.

x̂ = atanh((b − a)/(b + a)) / κ from the newest snapshot's level-1 sizes b, a (generate() makes them
⌈s·e^{±κx}⌉, so the ratio is tanh(κx) up to rounding), the spread in ticks from the touch, and the
held side from the simulator's position; the optimum's target position becomes a simulator action.
Its PnL falls short of the optimum only by what the rounding of the sizes hides of x (and by the
forced close at each chunk's end). Measured on 2M held-out rows against the same policy fed the true
x, the oracle's PnL minus that policy's is +0.1 ± 0.06 % of the optimum on `easy`, +0.3 ± 0.2 % on
`default`, −2.5 ± 1.4 % on `noisy` (κ = 0.2): the book hides almost nothing. A learner that
approaches it has learnt what can be learnt.
"""
from __future__ import annotations

import numpy as np

from ..data.markets import Market
from ..lobsim.layout import FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, SHORT
from .optimum import Optimum, optimal_pnl
from .policy import PolicyContext


def imbalance_estimate(records: np.ndarray, kappa: float) -> np.ndarray:
    """x̂ from the level-1 sizes (clipped so that an empty side gives a finite ±atanh(0.999)/κ)."""
    b = records["bid_sz"][:, 0].astype(np.float64)
    a = records["ask_sz"][:, 0].astype(np.float64)
    ratio = np.divide(b - a, b + a, out=np.zeros_like(b), where=(b + a) > 0)
    return np.arctanh(np.clip(ratio, -0.999, 0.999)) / kappa


def target_actions(target: np.ndarray, lots: np.ndarray) -> np.ndarray:
    """Simulator actions that move the position of sign(lots) to the target side (−1, 0, +1)."""
    side = np.sign(lots)
    flat = np.where(side > 0, FLAT_FROM_LONG, np.where(side < 0, FLAT_FROM_SHORT, HOLD))
    act = np.where(target > 0, LONG, np.where(target < 0, SHORT, flat))
    return np.where(target == side, HOLD, act).astype(np.int32)


class ImbalanceOracle:
    name = "oracle: optimal policy on the book's imbalance (not the RL agent)"
    is_baseline = True

    def __init__(self, market: Market, optimum: Optimum | None = None):
        self.market = market
        self.optimum = optimum if optimum is not None else optimal_pnl(
            market.params, market.fee_per_lot / market.params.tick)

    def __call__(self, ctx: PolicyContext) -> np.ndarray:
        obs = ctx.obs
        x_hat = imbalance_estimate(obs, self.market.params.kappa)
        spread = (obs["ask_px"][:, 0] - obs["bid_px"][:, 0]) // ctx.tick
        target = self.optimum.action(x_hat, spread, ctx.lots)
        return np.where(ctx.active, target_actions(target, ctx.lots), HOLD).astype(np.int32)
