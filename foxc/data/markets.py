"""Named synthetic markets: the process's parameters plus the fee a trader pays there.

    m = market("default")
    records = generate(n, seed, m.params); optimum = market_optimum(m)   # foxc.evaluate.optimum

Each market's exact optimal PnL per snapshot (an agent that sees the latent imbalance exactly,
foxc.evaluate.optimum) is the yardstick a learner is measured against there. The market-making markets (`maker`,
`maker_null`: MakerParams, foxc.evaluate.maker_optimum) have two: market orders alone, and with resting quotes
(`market_optimum(m, orders="passive")`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .synthetic import MakerParams, SynthParams


@dataclass(frozen=True)
class Market:
    name: str
    params: SynthParams | MakerParams
    fee_per_lot: float  # per lot per side, price units (like the trainer's --fee)
    doc: str
    window_rows: int | None = None  # the training window's snapshots at most (a day of a real market); None: any


# wide: a US stock's level-1 book. Spreads of 10-20 ticks (mean 15), the mid moving on about half of the snapshots,
# an imbalance signal that calls the next move ~60 % of the time, by a fraction of a tick against ~7.5 of half spread
WIDE_SPREADS = (0.0,) * 9 + (1.0,) * 11
# regime: the default process whose signal flips from segment to segment (+0.5, 0, -0.5), 10,000 rows each, seen
# through a 60,000-row window (two segments of each regime)
REGIME_BETAS, REGIME_ROWS = (0.5, 0.0, -0.5), 10_000


MARKETS: dict[str, Market] = {m.name: m for m in (
    Market("easy", SynthParams(q_move=0.5, beta=2.0, phi=0.9, spread_probs=(1.0, 0.0, 0.0)), 0.0,
           "a strong signal: the touch moves every other snapshot, mostly with the imbalance; spread always "
           "1 tick; optimum ≈ 0.20 ticks per snapshot"),
    Market("default", SynthParams(), 0.0,
           "the embedded default: a weak signal (best horizon-1 accuracy ≈ 0.60); optimum ≈ 0.028 ticks per "
           "snapshot"),
    Market("null", SynthParams(beta=0.0), 0.0,
           "no edge at all: the bid is a driftless walk whatever the book shows (the spread's mean reversion "
           "moves the mid predictably, but by less than a round trip's half spreads); optimum 0"),
    Market("noisy", SynthParams(kappa=0.2, beta=0.3), 0.025,
           "a weaker signal, shown more faintly, and a fee: β = 0.3 (best horizon-1 accuracy ≈ 0.58); κ = 0.2, "
           "so the level-1 imbalance varies ≈ 0.19 (sd) instead of ≈ 0.41 and the size rounding hides x to "
           "≈ 0.06 (sd) instead of ≈ 0.04; a fee of 0.1 tick per side (realistic). The exact optimum sees x "
           "exactly, so κ does not enter it, and the fee alone barely lowers it (the optimal agent already "
           "trades rarely to save the half spread: 0.0263 with β = 0.5), hence the lower β: optimum ≈ 0.0126 "
           "ticks per snapshot, ≈ 0.45 of the default's and clearly above 0"),
    Market("wide", SynthParams(phi=0.95, q_move=0.45, r_spread=0.05, spread_probs=WIDE_SPREADS, touch_size=300.0), 0.0,
           "a stock's microstructure: spreads of 10-20 ticks (mean 15), the mid moving on ~48 % of the snapshots, "
           "an imbalance signal with a best horizon-1 accuracy ≈ 0.60 that moves the mid by a fraction of a tick "
           "(≤ 0.45 per snapshot at the most extreme imbalance) against ~7.5 ticks of half spread; touch sizes of "
           "~300. Market orders cannot beat the round trip: optimum ≈ 0 (1e-6 ticks per snapshot), the right "
           "policy never trades"),
    Market("regime", SynthParams(beta_cycle=REGIME_BETAS, segment_rows=REGIME_ROWS), 0.0,
           "the default process whose signal changes sign and strength from segment to segment (β = +0.5, 0, "
           "-0.5, 10,000 rows each), trained on a 60,000-row window: a policy fitted to some segments loses on "
           "others. An agent that knows each segment's β earns ≈ 0.019 ticks per snapshot (2/3 of default's); "
           "one that sees the imbalance but not the regime earns nothing (the regimes mirror each other): "
           "optimum 0, abstaining is right", window_rows=60_000),
    Market("short", SynthParams(), 0.0,
           "the default process through a 30,000-row training window, the size of a real day of level-1 rows: "
           "a learner that memorises its window loses on held-out rows; optimum ≈ 0.028 ticks per snapshot",
           window_rows=30_000),
    Market("maker", MakerParams(), 0.0,
           "market making: a one-tick spread whose touch holds 1-3 one-lot orders (an order joins behind them); "
           "uninformed market orders of 1-2 lots trade at the touch (probability 0.2 a side a snapshot); a latent "
           "flow z (-1, 0, +1; redrawn w.p. 0.5 a snapshot) sends sweeps its way (0.25 a snapshot when z != 0) "
           "that take the touch and move the book a tick; the depth behind the touch shows z (thick on z's side: "
           "read at ~97 %). Market orders earn nothing (optimum 0); quoting the side the flow is not coming to "
           "earns 0.0341 ticks per snapshot (the exact optimum seeing z); always quoting both sides loses "
           "0.0156 (adverse selection)"),
    Market("maker_null", MakerParams(informed=0.0, blind=0.1), 0.0,
           "maker's book whose sweeps (0.1 each way a snapshot) ignore z: a quote at the touch loses half a tick to "
           "every sweep through it and waits behind the queue for the uninformed orders that would pay for it. "
           "No edge with market orders or quotes: optimum 0, the right policy never quotes; always quoting loses "
           "0.0298 ticks per snapshot"),
)}


def market(name: str) -> Market:
    try:
        return MARKETS[name]
    except KeyError:
        raise ValueError(f"unknown market {name!r}; known: {', '.join(MARKETS)}") from None
