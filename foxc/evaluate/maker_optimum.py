"""The exact optimum of the market-making markets (`maker`, `maker_null`): market orders and resting quotes.

The agent holds −1, 0 or +1 lot and sees the latent flow z EXACTLY (an upper bound for an agent that reads it from
the book), the touch sizes, its position and its resting orders. Each snapshot t it chooses a target position
(market orders at t's touch, half the one-tick spread per lot) and per side a quote, in `--orders passive`'s terms:
  KEEP    leave the resting order (or none) as it is
  CANCEL  remove it before the interval's events
  JOIN    one lot at the side's touch behind the size t shows there; an order already there keeps its place; one
          at another price is cancelled (the side may post again at the next snapshot)
An order's size is capped at posting so the position stays within ±1, and a market order that brings the
position to the limit on a side cancels that side's order (its fill would pass the limit). The interval (t, t+1]
then fills as foxc/lobsim/passive.py does with the risk-averse queue and latency 0: a trade at the order's price
advances its queue (fills once the volume passes the size in front), the opposite touch moving onto its price
fills it (a sweep), a fall of the displayed size there below the front shortens it. Reward: the equity change
marked to the mid, in ticks (a fill at the touch earns half a tick against the mid, or loses half a tick when the
book moves through it).

  state     (z, bid size, ask size, position, bid order, ask order); an order is (ticks behind its touch k, lots in
            front f), k ≤ `behind` (default 3); one further behind is FAR and is cancelled at the next decision
            (it cannot fill within an interval: in this process only an order at the touch fills); the gain
            converges in `behind` (tests/test_maker_optimum.py)
  gain      by relative value iteration, ticks per snapshot per lot
`quotes=False` solves the market-order agent alone (today's action set) on the same process.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from ..data.synthetic import MakerParams

KEEP, CANCEL, JOIN = range(3)
QUOTES = ("KEEP", "CANCEL", "JOIN")
NONE, FAR = 0, 1  # order codes; an order at (k, f) is 2 + k·(max_size + 1) + f
HALF = 0.5        # half the one-tick spread: a market order's cost per lot, and a fill's edge against the mid


@dataclass(frozen=True, eq=False)
class MakerOptimum:
    pnl_per_snapshot: float  # the gain: ticks per snapshot per lot
    policy: np.ndarray       # int8 [3, S, S, 3, O, O, 3]: (target position, bid quote, ask quote) per state
    value: np.ndarray        # float64 [3, S, S, 3, O, O]: the relative values
    iterations: int
    behind: int              # the deepest tracked order, ticks behind the touch
    max_size: int

    def order_code(self, ticks_behind: int | None, front: int) -> int:
        """The state's code of an order (ticks_behind None: no order)."""
        if ticks_behind is None:
            return NONE
        if ticks_behind > self.behind:
            return FAR
        assert 0 <= ticks_behind and 0 <= front <= self.max_size, (ticks_behind, front)
        return 2 + ticks_behind * (self.max_size + 1) + front

    def action(self, z: int, bid_size: int, ask_size: int, position: int, bid_order: int, ask_order: int):
        """(target position, bid quote, ask quote) at a state; orders as `order_code` gives them."""
        S = self.max_size
        i = (z + 1, min(bid_size, S) - 1, min(ask_size, S) - 1, position + 1, bid_order, ask_order)
        target, bid, ask = self.policy[i]
        return int(target) - 1, int(bid), int(ask)


class MakerMDP:
    """The process's states, the decisions' post-decision states, and the interval's transitions among them."""

    def __init__(self, p: MakerParams, behind: int = 3, taker_fee: float = 0.0, maker_fee: float = 0.0):
        """Fees per lot in ticks: a market order's (`taker_fee`), a resting order's fill's (`maker_fee`, negative:
        a rebate)."""
        self.p, self.behind, self.taker_fee, self.maker_fee = p, behind, taker_fee, maker_fee
        S = self.S = p.max_size
        self.O = 2 + (behind + 1) * (S + 1)
        self.shape = (3, S, S, 3, self.O, self.O)
        self.N = int(np.prod(self.shape))
        z, b, a, pos, ob, oa = (x.ravel() for x in np.indices(self.shape))
        self.z, self.b, self.a, self.pos, self.ob, self.oa = z, b + 1, a + 1, pos - 1, ob, oa
        self.actions = list(itertools.product((-1, 0, 1), range(3), range(3)))
        self._decisions()
        self._interval()

    def index(self, z, b, a, pos, ob, oa):
        return np.ravel_multi_index((z, b - 1, a - 1, pos + 1, ob, oa), self.shape)

    # ---- orders
    def _code(self, k, f):
        return 2 + k * (self.S + 1) + f

    def _split(self, code):
        """(live, k, f) of order codes (k, f: 0 where none or FAR)."""
        live = code >= 2
        c = np.where(live, code - 2, 0)
        return live, c // (self.S + 1), c % (self.S + 1)

    def _quote(self, code, quote, room, size):
        """The order resting through the interval after `quote` (room: lots the position may take that way)."""
        live, k, _ = self._split(code)
        kept = np.where(live & ~((quote == JOIN) & (k > 0)), code, NONE)  # JOIN elsewhere cancels; FAR goes
        joined = np.where(code == NONE, self._code(0, size), kept)
        out = np.where(quote == CANCEL, NONE, np.where(quote == JOIN, joined, kept))
        return np.where(room > 0, out, NONE)

    def _decisions(self):
        """post[s, a] and the market orders' cost[s, a]."""
        post, cost = [], []
        for target, qb, qa in self.actions:
            t = np.full(self.N, target)
            ob = self._quote(self.ob, qb, 1 - t, self.b)
            oa = self._quote(self.oa, qa, 1 + t, self.a)
            post.append(self.index(self.z, self.b, self.a, t, ob, oa))
            cost.append((HALF + self.taker_fee) * np.abs(t - self.pos))
        self.post, self.cost = np.stack(post, 1), np.stack(cost, 1)

    # ---- the interval
    def _size_next(self, size, traded, moved, z, side):
        """P(size') [n, S] over size' = 1..S of a touch of `size` after `traded` lots there, given the move."""
        p, S = self.p, self.S
        refill = np.stack([p.refill_pmf(k - 1, side) for k in range(3)])[z]  # [n, S]
        left = size - np.minimum(traded, size)
        out = np.zeros((len(size), S))
        if moved:
            return refill
        rows = np.arange(len(size))
        gone = left == 0
        out[gone] = refill[gone]
        keep = ~gone
        up = np.minimum(left + 1, S)
        down = np.where(left >= 2, left - 1, left)
        for to, w in ((up, p.add), (down, p.cancel), (left, 1.0 - p.add - p.cancel)):
            np.add.at(out, (rows[keep], to[keep] - 1), w)
        return out

    def _order_next(self, code, traded, moved, size_next):
        """(order code after the interval, filled) of a bid (`moved` +1: the book moved away from it, −1: through
        it; `traded`: lots sold at the touch). The ask is the mirror image."""
        live, k, f = self._split(code)
        at = live & (k == 0)
        if moved < 0:  # the touch was taken and the ask fell onto it
            filled = at
            k2 = np.maximum(k - 1, 0)
            f2 = np.where(k == 1, np.minimum(f, size_next), f)
            out = np.where(live & ~at, self._code(k2, f2), NONE)
            return out, filled
        if moved > 0:
            deeper = k + 1
            out = np.where(live, np.where(deeper > self.behind, FAR, self._code(np.minimum(deeper, self.behind), f)),
                           np.where(code == FAR, FAR, NONE))
            return out, np.zeros(len(code), bool)
        filled = at & (traded > f)
        f2 = np.where(at, np.minimum(f - np.minimum(traded, f), size_next), f)
        out = np.where(live & ~filled, self._code(k, f2), np.where(code == FAR, FAR, NONE))
        return out, filled

    def _interval(self):
        """Per outcome o (event, bid size', ask size'): prob[o, post], reward[o, post], the next state's index
        without z (z' is independent of everything but z)."""
        p, S = self.p, self.S
        V = len(p.noise_vol)
        ev = p.events()[self.z]  # [N, E]
        probs, rewards, nexts = [], [], []
        for e in range(ev.shape[1]):
            sold = np.full(self.N, e if 1 <= e <= V else 0)
            bought = np.full(self.N, e - V if V < e <= 2 * V else 0)
            moved = 1 if e == 2 * V + 1 else -1 if e == 2 * V + 2 else 0
            pb = self._size_next(self.b, sold, moved != 0, self.z, 0)
            pa = self._size_next(self.a, bought, moved != 0, self.z, 1)
            for b2, a2 in itertools.product(range(1, S + 1), repeat=2):
                prob = ev[:, e] * pb[:, b2 - 1] * pa[:, a2 - 1]
                if not prob.any():
                    continue
                ob, bid_fill = self._order_next(self.ob, np.minimum(sold, self.b), moved,
                                                np.full(self.N, b2))
                oa, ask_fill = self._order_next(self.oa, np.minimum(bought, self.a), -moved, np.full(self.N, a2))
                edge = HALF if moved == 0 else -HALF  # a fill without a move earns the half spread; a sweep's loses it
                reward = self.pos * moved + (edge - self.maker_fee) * (bid_fill.astype(float) + ask_fill)
                # clipped only in states no decision leads to (a bid resting at +1, an ask at −1)
                pos2 = np.clip(self.pos + bid_fill - ask_fill, -1, 1)
                nxt = self.index(np.zeros(self.N, np.int64), np.full(self.N, b2), np.full(self.N, a2), pos2, ob, oa)
                probs.append(prob)
                rewards.append(reward)
                nexts.append(nxt)
        self.prob, self.next = np.stack(probs), np.stack(nexts)
        self.reward = (self.prob * np.stack(rewards)).sum(0)
        assert np.allclose(self.prob.sum(0), 1.0)
        zp = np.asarray(p.z_probs, np.float64) / sum(p.z_probs)
        self.Z = p.switch * zp[None, :] + (1.0 - p.switch) * np.eye(3)  # z -> z'

    # ---- solving
    def solve(self, allowed: np.ndarray | None = None, tol: float = 1e-10, max_iter: int = 100_000):
        """(gain, values, Q, iterations) of relative value iteration over the actions `allowed` [N, A] (default:
        all)."""
        used = np.unique(self.post if allowed is None else self.post[allowed])  # the post-decision states reached
        prob, reward = self.prob[:, used], self.reward[used]
        nxt = self.z[used] * (self.N // 3) + self.next[:, used]  # (z, rest') of V(z', rest') averaged over z'
        W = np.zeros(self.N)
        V = np.zeros(self.N)
        ref = self.index(1, 1, 1, 0, NONE, NONE)
        for it in range(1, max_iter + 1):
            U = (self.Z @ V.reshape(3, -1)).ravel()  # E[V(z', rest) | z]
            W[used] = reward + (prob * U[nxt]).sum(0)  # E[reward + V(next) | post-decision state]
            Q = W[self.post] - self.cost
            if allowed is not None:
                Q = np.where(allowed, Q, -np.inf)
            V_new = Q.max(1)
            diff = V_new - V
            lo, hi = diff.min(), diff.max()
            V = V_new - V_new[ref]
            if hi - lo < tol:
                return (lo + hi) / 2.0, V, Q, it
        raise RuntimeError(f"relative value iteration did not converge in {max_iter} iterations (span {hi - lo:.3g})")

    def market_only(self) -> np.ndarray:
        """The actions of an agent without quotes: JOIN never, and nothing rests."""
        return np.array([qb != JOIN and qa != JOIN for _, qb, qa in self.actions])[None, :].repeat(self.N, 0)

    def fixed(self, choose) -> np.ndarray:
        """allowed[N, A] of one action per state: `choose(mdp)` gives (target, bid quote, ask quote) arrays [N]."""
        target, qb, qa = choose(self)
        want = np.stack([(target == t) & (qb == b) & (qa == a) for t, b, a in self.actions], 1)
        assert (want.sum(1) == 1).all()
        return want


def always_quote(mdp: MakerMDP):
    """Keep the position, JOIN both sides every snapshot (a naive market maker)."""
    return mdp.pos, np.full(mdp.N, JOIN), np.full(mdp.N, JOIN)


@functools.lru_cache(maxsize=4)  # ~30 MB each
def _mdp(p: MakerParams, behind: int, taker_fee: float, maker_fee: float) -> MakerMDP:
    return MakerMDP(p, behind, taker_fee, maker_fee)


def solve_maker(p: MakerParams, quotes: bool = True, behind: int = 3, policy=None, taker_fee: float = 0.0,
                maker_fee: float = 0.0) -> MakerOptimum:
    """The optimum (or with `policy`, a function of the MDP giving (target, bid quote, ask quote) per state, that
    policy's gain); `quotes=False`: market orders alone. Fees in ticks per lot (MakerMDP)."""
    return _solve(p, bool(quotes), int(behind), policy, float(taker_fee), float(maker_fee))


@functools.lru_cache(maxsize=16)  # seconds each; a run, its evaluation and the commands ask again
def _solve(p: MakerParams, quotes: bool, behind: int, policy, taker_fee: float, maker_fee: float) -> MakerOptimum:
    mdp = _mdp(p, behind, taker_fee, maker_fee)
    allowed = mdp.fixed(policy) if policy is not None else None if quotes else mdp.market_only()
    gain, V, Q, it = mdp.solve(allowed)
    acts = np.array(mdp.actions)
    # among actions within rounding of the best, the one that trades and quotes least (no edge: doing nothing)
    busy = np.abs(acts[None, :, 0] - mdp.pos[:, None]) + (acts[None, :, 1] == JOIN) + (acts[None, :, 2] == JOIN)
    near = Q >= Q.max(1, keepdims=True) - 1e-9
    best = acts[np.where(near, -busy, -np.inf).argmax(1)].astype(np.int8)
    best[:, 0] += 1
    # a market with no edge gives a gain of rounding's size either side of 0
    gain = 0.0 if abs(gain) < 1e-9 else float(gain)
    return MakerOptimum(gain, best.reshape(*mdp.shape, 3), V.reshape(mdp.shape), it, behind, p.max_size)
