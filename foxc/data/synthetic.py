"""The embedded default: a seeded synthetic 10-level book with a weak, learnable order-flow signal, per snapshot t:
  latent imbalance  x_t = φ·x_{t−1} + √(1−φ²)·ε_t, ε ~ N(0,1): a stationary AR(1) of unit variance
  touch sizes       bid_sz_0 = ⌈s·e^{κ·x_t}⌉, ask_sz_0 = ⌈s·e^{−κ·x_t}⌉: their imbalance ≈ tanh(κ·x_t) reveals x_t
  price             the best bid moves one tick with probability q, up with probability σ(β·x_t): the signal
  spread            kept with probability 1−r, else redrawn from π over 1, 2, …, len(π) ticks
  depth             level l sits l ticks behind the touch, size s·(1 + d·l)·U[0.5, 1.5); order counts ≈ size / 4
  trades            reported with probability 0.5 when the price moves, 0.05 otherwise; time: exponential gaps
  trade sides       a row with a trade (trade_count 1) whose best bid fell: a seller took the previous best bid
                    level whole (sell_lo_px = that price, sell_lo_vol = sell_vol = its displayed size); whose best
                    bid rose: a buyer took the previous best ask level whole (buy_hi_px, buy_hi_vol, buy_vol
                    likewise); whose bid did not move: one trade at the previous touch of a side drawn evenly, of
                    a volume drawn from 1 to the touch size less one (1 at a size of 1); last_px the trade's
                    price. A move without a trade: the level went by cancellations (no trade fields). feed_delay 0
  regimes           with `beta_cycle`, segment s has β = beta_cycle[s mod len] (`segment_rows` rows each)
The best accuracy any predictor of the unmasked mid direction at horizon 1 reaches is E[max(P_up, P_down)] /
E[P_up + P_down] over x ~ N(0, 1) and spread ~ π: `best_accuracy_h1` (Gauss-Hermite quadrature).
`generate` with MakerParams makes the market-making process instead (`generate_maker`, MakerParams' doc)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numbers import whole
from .record import LEVELS, PRICE_SCALE, PRICE_UNDEF, SNAPSHOT_DTYPE, empty_snapshots
from .market import MarketData, finish
from .validate import ValidationReport

START_NS = 1_704_205_800 * 10**9  # 2024-01-02 14:30 UTC
AR_BLOCK = 256


@dataclass(frozen=True)
class SynthParams:
    tick: float = 0.25
    start_price: float = 4000.0
    phi: float = 0.97           # persistence of the latent imbalance
    kappa: float = 0.5          # how strongly the touch sizes show it
    q_move: float = 0.25        # probability that the touch moves one tick per snapshot
    beta: float = 0.5           # σ(β·x): the weak signal (best accuracy at horizon 1 ≈ 0.599)
    r_spread: float = 0.1       # probability that the spread is redrawn
    spread_probs: tuple[float, ...] = (0.6, 0.3, 0.1)  # π over spreads of 1, 2, 3, ... ticks
    touch_size: float = 20.0
    depth_slope: float = 0.25
    mean_gap_us: float = 1000.0
    instrument_id: int = 1
    beta_cycle: tuple[float, ...] = ()  # regimes: segment s has β = beta_cycle[s % len]; () every segment has beta
    segment_rows: int = 0       # rows per segment (the last may be shorter); 0: generate()'s n_segments

    @property
    def tick_units(self) -> int:
        return int(round(self.tick * PRICE_SCALE))

    @property
    def spreads(self) -> np.ndarray:
        """The spreads π is over, in ticks: 1, 2, ..., len(spread_probs)."""
        return np.arange(1, len(self.spread_probs) + 1)

    @property
    def spread_pi(self) -> np.ndarray:
        return np.asarray(self.spread_probs, np.float64) / sum(self.spread_probs)

    @property
    def betas(self) -> tuple[float, ...]:
        """β of each regime, in the order segments cycle through them (one regime without beta_cycle)."""
        return tuple(self.beta_cycle) or (self.beta,)


def ar1(eps: np.ndarray, phi: float) -> np.ndarray:
    """x_t = φ·x_{t−1} + eps_t with x_{−1} = 0, in blocks: cumulative sums inside, a carry between."""
    n = len(eps)
    m = -(-n // AR_BLOCK)
    e = np.zeros(m * AR_BLOCK)
    e[:n] = eps
    e = e.reshape(m, AR_BLOCK)
    pw = phi ** np.arange(AR_BLOCK, dtype=np.float64)
    local = np.cumsum(e / pw, axis=1) * pw  # Σ_{s≤i} φ^{i−s} e[s] within each block
    carry_in = np.zeros(m)
    decay = phi ** AR_BLOCK
    ends = local[:, -1]
    for j in range(1, m):
        carry_in[j] = ends[j - 1] + decay * carry_in[j - 1]
    x = local + carry_in[:, None] * (pw * phi)[None, :]
    return x.reshape(-1)[:n]


def _latent(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    eps = rng.standard_normal(n) * np.sqrt(1.0 - phi ** 2)
    eps[0] = rng.standard_normal()
    return ar1(eps, phi)


def latent(n: int, seed: int = 0, params: SynthParams = SynthParams()) -> np.ndarray:
    """The latent imbalance x_t that `generate(n, seed, params)` uses (its first draws; both share `_latent`); of a
    MakerParams market, its latent flow z_t."""
    if isinstance(params, MakerParams):
        return maker_latent(n, seed, params)
    return _latent(np.random.default_rng(seed), n, params.phi)


def generate(n: int, seed: int = 0, params: SynthParams = SynthParams(), n_segments: int = 1) -> np.ndarray:
    """n snapshot records (validated by construction); segment ids split the rows evenly."""
    if not whole(n) or n < 1:
        raise ValueError(f"synthetic data: n {n!r}: the snapshots to make must be a whole number >= 1")
    if not whole(n_segments) or not 1 <= n_segments <= n:  # 0 made one segment, more than n empty ones
        raise ValueError(f"synthetic data: n_segments {n_segments!r}: must be a whole number from 1 to n ({n})")
    n, n_segments = int(n), int(n_segments)
    p = params
    if isinstance(p, MakerParams):
        return generate_maker(n, seed, p, n_segments)
    if p.segment_rows and n_segments != 1:
        raise ValueError(f"synthetic data: n_segments {n_segments}: this market cuts its own segments "
                         f"({p.segment_rows:,} rows each)")
    rng = np.random.default_rng(seed)
    x = _latent(rng, n, p.phi)
    rows = np.arange(n, dtype=np.int64)
    segment = rows // p.segment_rows if p.segment_rows else rows * n_segments // n
    beta = np.asarray(p.betas)[segment % len(p.betas)]

    u = rng.random((3, n))
    move = u[0] < p.q_move
    up = u[1] < 1.0 / (1.0 + np.exp(-beta * x))
    step = np.where(move, np.where(up, 1, -1), 0).astype(np.int64)
    bid_ticks = int(round(p.start_price / p.tick)) + np.concatenate([[0], np.cumsum(step[:-1])])

    redraw = u[2] < p.r_spread
    redraw[0] = True
    fresh = rng.choice(p.spreads, size=n, p=p.spread_pi)
    last = np.maximum.accumulate(np.where(redraw, np.arange(n), 0))
    spread = fresh[last]

    rec = np.zeros(n, SNAPSHOT_DTYPE)
    tick = p.tick_units
    lv = np.arange(LEVELS, dtype=np.int64)
    rec["bid_px"] = (bid_ticks[:, None] - lv) * tick
    rec["ask_px"] = (bid_ticks[:, None] + spread[:, None] + lv) * tick
    profile = (p.touch_size * (1.0 + p.depth_slope * lv)).astype(np.float32)
    noise = rng.random((2, n, LEVELS), dtype=np.float32) + np.float32(0.5)
    for side, z, sign in (("bid", noise[0], 1.0), ("ask", noise[1], -1.0)):
        size = np.ceil(profile * z).astype(np.uint32)
        size[:, 0] = np.ceil(p.touch_size * np.exp(sign * p.kappa * x))
        rec[f"{side}_sz"] = size
        rec[f"{side}_ct"] = size // 4 + 1
    rec["trade_count"] = rng.random(n, dtype=np.float32) < np.where(move, np.float32(0.5), np.float32(0.05))
    gaps = 1 + (rng.exponential(p.mean_gap_us * 1000.0, n)).astype(np.int64)
    rec["ts_ns"] = START_NS + np.cumsum(gaps)
    rec["instrument_id"] = p.instrument_id
    rec["segment"] = segment.astype(np.uint32)
    # after every draw above, from a generator of its own, so the fields above keep their bits
    trade_sides(rec, np.random.default_rng([seed, 1]))
    return rec


def trade_sides(rec: np.ndarray, rng: np.random.Generator) -> None:
    """The trade fields of rows whose trade_count and touch are set (the module's rule); row 0 reads itself as the
    previous row."""
    prev = np.r_[0, np.arange(len(rec) - 1)]
    traded = rec["trade_count"] > 0
    bid = rec["bid_px"][:, 0]
    fell, rose = traded & (bid < bid[prev]), traded & (bid > bid[prev])
    still = traded & ~fell & ~rose
    side_u, vol_u = rng.random((2, len(rec)))
    seller = np.where(still, side_u < 0.5, fell)
    touch_px = np.where(seller, rec["bid_px"][prev, 0], rec["ask_px"][prev, 0])
    touch_sz = np.where(seller, rec["bid_sz"][prev, 0], rec["ask_sz"][prev, 0]).astype(np.int64)
    part = 1 + np.floor(vol_u * np.maximum(touch_sz - 1, 1)).astype(np.int64)  # 1 .. size-1
    vol = np.where(still, part, touch_sz).astype(np.uint32)
    for side, on in (("sell_lo", traded & seller), ("buy_hi", traded & ~seller)):
        rec[f"{side}_px"] = np.where(on, touch_px, PRICE_UNDEF)
        rec[f"{side}_vol"] = np.where(on, vol, 0)
    rec["sell_vol"], rec["buy_vol"] = rec["sell_lo_vol"], rec["buy_hi_vol"]
    rec["last_px"] = np.where(traded, touch_px, PRICE_UNDEF)
    rec["feed_delay_ns"] = 0


def synthetic_data(n: int, seed: int = 0, params: SynthParams = SynthParams(), n_segments: int = 1) -> MarketData:
    rec = finish(generate(n, seed, params, n_segments))
    report = ValidationReport()
    report.add("<synthetic>", n, {}, [f"seed {seed}, {params}"])
    return MarketData(rec, "SYNTH", int(rec["instrument_id"][0]), "synthetic", [],
                      params.tick_units, report)


def h1_move_probs(x: np.ndarray, spread: int, p: SynthParams, beta: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """P(mid up), P(mid down) from t to t+1 given the latent x_t and the spread at t (ticks), under β = `beta`."""
    beta = p.beta if beta is None else beta
    p_up_move = p.q_move / (1.0 + np.exp(-beta * x))
    step_probs = {1: p_up_move, -1: p.q_move - p_up_move, 0: np.full_like(x, 1.0 - p.q_move)}
    up = np.zeros_like(x)
    down = np.zeros_like(x)
    for s_next, pi_next in zip(p.spreads, p.spread_pi):
        p_s = p.r_spread * pi_next + (1.0 - p.r_spread) * (s_next == spread)
        for d, p_d in step_probs.items():
            half_ticks = 2 * d + (s_next - spread)
            if half_ticks > 0:
                up += p_s * p_d
            elif half_ticks < 0:
                down += p_s * p_d
    return up, down


def best_accuracy_h1(p: SynthParams = SynthParams(), nodes: int = 96) -> float:
    """The Bayes accuracy of the mid direction at horizon 1 (dead band 0), knowing each segment's β."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)  # ∫ f(z) e^{−z²/2} dz
    w = w / w.sum()
    best = labelled = 0.0
    for beta in p.betas:
        for spread, pi in zip(p.spreads, p.spread_pi):
            if pi == 0:
                continue
            up, down = h1_move_probs(z, spread, p, beta)
            best += pi * np.sum(w * np.maximum(up, down))
            labelled += pi * np.sum(w * (up + down))
    return float(best / labelled)


# ---- the market-making process (markets `maker`, `maker_null`): a queue at a one-tick spread, informed sweeps

@dataclass(frozen=True)
class MakerParams:
    """A book at a constant one-tick spread whose touch holds 1..max_size one-lot orders, per snapshot interval:
      latent flow   z ∈ {−1, 0, +1}, redrawn from z_probs with probability `switch` per snapshot (else kept)
      one event     an uninformed market order at each touch with probability `noise` (volume v drawn from
                    noise_vol over 1, 2, …, at most the touch size: it trades at the touch, which stays); a sweep
                    in z's direction with probability `informed` (z ≠ 0) and one each way with probability `blind`
                    (a sweep takes the touch level whole and the book moves one tick its way: the price taken
                    becomes the other side's touch, onto any order resting there)
      touch sizes   after a trade, size − v; an emptied touch refills, else one order joins behind w.p. `add` (up
                    to max_size) or one leaves w.p. `cancel` (a touch of 1 stays); after a move both are new.
                    New sizes are drawn from `refill`: (thick, even, thin) pmfs over 1..max_size; z = +1 refills
                    the bid thick and the ask thin, z = −1 the other way, z = 0 both even
      depth         level l ≥ 1 holds max_size + 1 lots, or 2·max_size with probability `depth_tilt` (thick,
                    even, thin: the sides as the refills); more than any queue in front of an order, which
                    therefore never shrinks behind the touch. The depth shows z, the flow's direction, fresh each
                    snapshot: the agent sees it through the book, not exactly
    Trades are reported as they happen (sell_lo_px/buy_hi_px at the touch taken, the volume, one print per lot)."""
    tick: float = 0.25
    start_price: float = 4000.0
    max_size: int = 3
    switch: float = 0.5
    z_probs: tuple[float, float, float] = (0.25, 0.5, 0.25)
    noise: float = 0.2
    noise_vol: tuple[float, ...] = (0.7, 0.3)
    informed: float = 0.25
    blind: float = 0.0
    add: float = 0.2
    cancel: float = 0.2
    refill: tuple[tuple[float, ...], ...] = ((0.1, 0.3, 0.6), (1 / 3, 1 / 3, 1 / 3), (0.6, 0.3, 0.1))
    depth_tilt: tuple[float, float, float] = (0.9, 0.5, 0.1)
    mean_gap_us: float = 1000.0
    instrument_id: int = 2
    segment_rows: int = 0  # one segment per generate()'s n_segments, as SynthParams

    def __post_init__(self):
        S = self.max_size
        assert S >= 2 and len(self.refill) == 3 and all(len(r) == S for r in self.refill), self
        assert 2 * self.noise + self.informed + 2 * self.blind <= 1.0 and self.add + self.cancel <= 1.0, self

    @property
    def tick_units(self) -> int:
        return int(round(self.tick * PRICE_SCALE))

    def events(self) -> np.ndarray:
        """P(event | z) [3, E] over z = −1, 0, +1: E = NONE, a sell of 1..V lots, a buy of 1..V lots, UP, DOWN
        (V = len(noise_vol)); a sell (buy) is an uninformed order hitting the bid (lifting the ask)."""
        vol = np.asarray(self.noise_vol, np.float64) / sum(self.noise_vol)
        V = len(vol)
        out = np.zeros((3, 2 * V + 3))
        for i, z in enumerate((-1, 0, 1)):
            out[i, 1:1 + V] = out[i, 1 + V:1 + 2 * V] = self.noise * vol
            out[i, 2 * V + 1] = self.blind + self.informed * (z == 1)
            out[i, 2 * V + 2] = self.blind + self.informed * (z == -1)
            out[i, 0] = 1.0 - out[i, 1:].sum()
        return out

    def refill_pmf(self, z: int, side: int) -> np.ndarray:
        """The new touch size's pmf over 1..max_size on `side` (0 bid, 1 ask) under z."""
        p = np.asarray(self.refill[_tilt(z, side)], np.float64)
        return p / p.sum()


def _tilt(z, side: int):
    """0 thick, 1 even, 2 thin: the book's side `side` (0 bid, 1 ask) under the flow z (+1: buyers informed)."""
    return 1 - z if side == 0 else 1 + z


def maker_latent(n: int, seed: int, p: MakerParams) -> np.ndarray:
    """z_t (int8) of `generate(n, seed, p)`: its first draws."""
    rng = np.random.default_rng(seed)
    return _maker_latent(rng, n, p)


def _maker_latent(rng: np.random.Generator, n: int, p: MakerParams) -> np.ndarray:
    redraw = rng.random(n) < p.switch
    redraw[0] = True
    fresh = rng.choice(np.array([-1, 0, 1], np.int8), size=n, p=np.asarray(p.z_probs) / sum(p.z_probs))
    return fresh[np.maximum.accumulate(np.where(redraw, np.arange(n), 0))]


def _draw(u: np.ndarray, pmf: np.ndarray) -> np.ndarray:
    """Index drawn by inverse cdf from uniforms u [n] and per-row pmfs [n, K]."""
    return np.minimum((u[:, None] >= np.cumsum(pmf, axis=1)).sum(axis=1), pmf.shape[1] - 1)


def _compose_prefix(maps: np.ndarray) -> np.ndarray:
    """F_t = maps[t] ∘ … ∘ maps[0] for maps [n, S] of {0..S-1} into itself (a parallel prefix of compositions)."""
    F = maps.copy()
    d = 1
    while d < len(F):
        F[d:] = np.take_along_axis(F[d:], F[:-d], axis=1)
        d *= 2
    return F


def generate_maker(n: int, seed: int, p: MakerParams, n_segments: int = 1) -> np.ndarray:
    """n snapshot records of the market-making process (row t's trades are those of the interval from row t−1)."""
    rng = np.random.default_rng(seed)
    z = _maker_latent(rng, n, p)
    zi = z.astype(np.int64) + 1
    S, V = p.max_size, len(p.noise_vol)
    UP, DOWN = 2 * V + 1, 2 * V + 2
    event = _draw(rng.random(n), p.events()[zi])  # of the interval after row t
    sell_v = np.where((event >= 1) & (event <= V), event, 0)
    buy_v = np.where((event > V) & (event <= 2 * V), event - V, 0)
    move = np.where(event == UP, 1, np.where(event == DOWN, -1, 0))
    churn = rng.random((2, n))
    pmfs = [np.stack([p.refill_pmf(k - 1, side) for k in range(3)]) for side in (0, 1)]  # [z + 1, size − 1]
    refill = np.stack([_draw(rng.random(n), pmfs[side][zi]) for side in (0, 1)]) + 1
    first = [int(_draw(rng.random(1), pmfs[side][zi[:1]])[0]) + 1 for side in (0, 1)]  # row 0's sizes
    sizes = np.arange(1, S + 1)
    touch = np.zeros((2, n), np.int64)
    for side, v in ((0, sell_v), (1, buy_v)):
        left = sizes[None, :] - np.minimum(v[:, None], sizes[None, :])  # after the trade, each size before
        grown = np.where(churn[side][:, None] < p.add, np.minimum(left + 1, S),
                         np.where((churn[side][:, None] < p.add + p.cancel) & (left >= 2), left - 1, left))
        after = np.where((left == 0) | (move[:, None] != 0), refill[side][:, None], grown)
        F = _compose_prefix(after - 1)
        touch[side] = np.r_[first[side], F[:-1, first[side] - 1] + 1]
    bid_ticks = int(round(p.start_price / p.tick)) + np.r_[0, np.cumsum(move[:-1])]

    rec = empty_snapshots(n)
    tick = p.tick_units
    lv = np.arange(LEVELS, dtype=np.int64)
    rec["bid_px"] = (bid_ticks[:, None] - lv) * tick
    rec["ask_px"] = (bid_ticks[:, None] + 1 + lv) * tick
    thick = rng.random((2, n, LEVELS)) < np.asarray(p.depth_tilt)[np.stack([_tilt(z, 0), _tilt(z, 1)])][..., None]
    for side, name in enumerate(("bid", "ask")):
        size = np.where(thick[side], 2 * S, S + 1).astype(np.uint32)
        size[:, 0] = touch[side]
        rec[f"{name}_sz"] = rec[f"{name}_ct"] = size  # one-lot orders
    # row t+1's trades: the interval's event on row t's touch
    took = np.stack([np.minimum(sell_v, touch[0]) + np.where(move < 0, touch[0], 0),
                     np.minimum(buy_v, touch[1]) + np.where(move > 0, touch[1], 0)])[:, :-1]
    px = np.stack([rec["bid_px"][:-1, 0], rec["ask_px"][:-1, 0]])
    for side, name in ((0, "sell_lo"), (1, "buy_hi")):
        rec[f"{name}_px"][1:] = np.where(took[side] > 0, px[side], PRICE_UNDEF)
        rec[f"{name}_vol"][1:] = took[side]
    rec["sell_vol"], rec["buy_vol"] = rec["sell_lo_vol"], rec["buy_hi_vol"]
    rec["trade_count"][1:] = took.sum(axis=0)
    rec["last_px"][1:] = np.where(took[0] > 0, px[0], np.where(took[1] > 0, px[1], PRICE_UNDEF))
    gaps = 1 + (rng.exponential(p.mean_gap_us * 1000.0, n)).astype(np.int64)
    rec["ts_ns"] = START_NS + np.cumsum(gaps)
    rec["instrument_id"] = p.instrument_id
    rec["segment"] = (np.arange(n, dtype=np.int64) * n_segments // n).astype(np.uint32)
    return rec
