"""The exact optimal average PnL per snapshot on a synthetic market: the yardstick for a learner.

Its agent holds -1, 0 or +1 lot and sees the latent imbalance x_t EXACTLY (an upper bound for any agent, which sees
it through the rounded touch sizes) and the spread s_t, in the average-reward MDP of `generate()`'s process:
  state     (x_t, s_t, p_{t-1}); action p_t ∈ {-1, 0, +1}, filled by market orders on snapshot t's book
  reward    p_t·E[Δmid | x_t, s_t] - |p_t - p_{t-1}|·(s_t/2 + fee), in ticks
  dynamics  x_{t+1} = φ·x_t + √(1-φ²)·ε; the bid moves ±1 tick w.p. q, up w.p. σ(β·x_t); s_{t+1} redrawn from π
            w.p. r, else kept; so E[Δmid | x, s] = q·(2σ(β·x) - 1) + r·(E_π[s] - s)/2
x on a Tauchen grid (`grid` points over ±5 sd); the gain g (ticks per snapshot per lot) by relative value iteration.
With regimes (β changing per segment), `market_optimum` is the regime-blind agent's (E[Δmid | x, s] averaged over
the regimes: 0 where they mirror each other), and `aware` the mean of the regimes' own gains (an upper bound).
The market-making markets (MakerParams) are solved by foxc.evaluate.maker_optimum: `optimal_pnl` gives their
market-order agent's, `market_optimum(m, orders="passive")` the agent's with resting quotes.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..data.markets import Market
from ..data.synthetic import MakerParams, SynthParams
from ..lobsim.layout import ORDERS
from .maker_optimum import MakerOptimum, solve_maker

POSITIONS = np.array([-1, 0, 1])
_erf = np.frompyfunc(math.erf, 1, 1)


@dataclass(frozen=True, eq=False)
class Optimum:
    pnl_per_snapshot: float   # the gain g: ticks per snapshot per lot
    policy: np.ndarray        # int8 [G, S, 3]: the target position at (x_i, spread 1..S, held −1..+1)
    x: np.ndarray             # float64 [G]: the grid of the latent imbalance (uniform)
    iterations: int           # of the relative value iteration
    spreads: np.ndarray       # int [S]: the spreads of the policy's second axis, in ticks (those π gives mass)

    def action(self, x, spread_ticks, position) -> np.ndarray:
        """The optimal target position (−1, 0, +1) at latent x (nearest grid point), spread and held position
        (only its sign counts; a spread π never draws takes the nearest one's row)."""
        h = self.x[1] - self.x[0]
        i = np.clip(np.rint((np.asarray(x, np.float64) - self.x[0]) / h), 0, len(self.x) - 1).astype(np.int64)
        s = np.abs(np.asarray(spread_ticks, np.int64)[..., None] - self.spreads).argmin(-1)
        return self.policy[i, s, np.sign(np.asarray(position)).astype(np.int64) + 1]


def tauchen(phi: float, grid: int, width: float = 5.0) -> tuple[np.ndarray, np.ndarray]:
    """The grid over ±width sd and the transition matrix [G, G] of the unit-variance AR(1)."""
    x = np.linspace(-width, width, grid)
    h = x[1] - x[0]
    sigma = math.sqrt(1.0 - phi ** 2)
    edges = np.concatenate([[-np.inf], x[:-1] + h / 2, [np.inf]])  # the cell of each grid point
    z = (edges[None, :] - phi * x[:, None]) / sigma
    cdf = 0.5 * (1.0 + _erf(z / math.sqrt(2.0)).astype(np.float64))  # the normal cdf
    P = np.diff(cdf, axis=1)
    return x, P / P.sum(axis=1, keepdims=True)


def optimal_pnl(params: SynthParams | MakerParams = SynthParams(), fee_ticks: float = 0.0, grid: int = 201,
                tol: float = 1e-10, max_iter: int = 200_000,
                betas: tuple[float, ...] | None = None) -> Optimum | MakerOptimum:
    """The optimal average PnL per snapshot (ticks, one lot) of an agent that sees x exactly, where the
    bid's drift is the mean over `betas` of q·(2σ(βx) − 1) (default: params.beta alone); of a market-making
    market, its market-order agent's (maker_optimum, quotes=False)."""
    if isinstance(params, MakerParams):
        return solve_maker(params, quotes=False, taker_fee=fee_ticks)
    p = params
    x, P = tauchen(p.phi, grid)
    drawn = p.spread_pi > 0  # a spread π never draws is never reached from the stationary chain
    spreads, pi = p.spreads[drawn], p.spread_pi[drawn]
    n = len(spreads)
    S = p.r_spread * pi[None, :] + (1.0 - p.r_spread) * np.eye(n)        # spread s -> s'
    betas = (p.beta,) if betas is None else betas
    drift = np.mean([p.q_move * np.tanh(b * x / 2.0) for b in betas], axis=0)  # q·(2σ(βx) − 1)
    m = drift[:, None] + (S @ spreads - spreads)[None, :] / 2.0          # E[Δmid | x, s]: [G, S]
    cost = spreads / 2.0 + fee_ticks                                      # per lot traded
    turn = np.abs(POSITIONS[None, :] - POSITIONS[:, None])                # |p − p_prev|: [prev, p]
    R = POSITIONS * m[:, :, None, None] - turn * cost[None, :, None, None]  # [G, s, prev, p]
    V = np.zeros((grid, n, 3))                                            # [G, s, prev]
    for it in range(1, max_iter + 1):
        # E[V(x', s', p) | x, s] for each chosen p (the next state's "prev" is p)
        W = np.einsum("st,itp->isp", S, (P @ V.reshape(grid, n * 3)).reshape(grid, n, 3))
        Q = R + W[:, :, None, :]
        V_new = Q.max(axis=-1)
        diff = V_new - V
        lo, hi = diff.min(), diff.max()
        V = V_new - V_new[grid // 2, int(pi.argmax()), 1]  # relative to a reference state, so V stays bounded
        if hi - lo < tol:
            break
    else:
        raise RuntimeError(f"relative value iteration did not converge in {max_iter} iterations (span {hi - lo:.3g})")
    policy = POSITIONS[Q.argmax(axis=-1)].astype(np.int8)
    # staying flat earns exactly 0, so the gain is >= 0, and known to within the span: a span reaching 0 is a market
    # without edge (rounding gave 2.2e-16 with numpy 2.4's products, and the held-out PnL a fraction of that)
    return Optimum(float((lo + hi) / 2.0) if lo > 0 else 0.0, policy, x, it, spreads)



@functools.lru_cache(maxsize=None)  # a wide market's takes seconds, and runs ask again
def market_optimum(market: Market, grid: int = 201, fee_per_lot: float | None = None, aware: bool = False,
                   orders: str = "market", maker_fee_per_lot: float = 0.0) -> float | None:
    """A named market's optimum, ticks per snapshot per lot, at `fee_per_lot` (price units; default: the market's
    own); with regimes, the blind agent's (above), or with `aware` the mean of the regimes' own. `orders`: the
    agent's orders, "market" (today's actions) or "passive" (also resting quotes, filled with `maker_fee_per_lot`):
    a market-making market's passive optimum, None on a market whose passive optimum is not computed."""
    assert orders in ORDERS, orders
    p = market.params
    fee_ticks = (market.fee_per_lot if fee_per_lot is None else fee_per_lot) / p.tick
    if isinstance(p, MakerParams):
        return solve_maker(p, quotes=orders == "passive", taker_fee=fee_ticks,
                           maker_fee=maker_fee_per_lot / p.tick).pnl_per_snapshot
    if orders == "passive":
        return None
    if aware:
        return float(np.mean([optimal_pnl(p, fee_ticks, grid, betas=(b,)).pnl_per_snapshot for b in p.betas]))
    return optimal_pnl(p, fee_ticks, grid, betas=p.betas).pnl_per_snapshot
