"""Named synthetic markets: the process's parameters plus the fee a trader pays there.

    m = market("default")
    records = generate(n, seed, m.params); optimum = market_optimum(m)   # foxc.evaluate.optimum

Each market's exact optimal PnL per snapshot (an agent that sees the latent imbalance exactly,
foxc.evaluate.optimum) is the yardstick a learner is measured against there.
"""
from __future__ import annotations

from dataclasses import dataclass

from .synthetic import SynthParams


@dataclass(frozen=True)
class Market:
    name: str
    params: SynthParams
    fee_per_lot: float  # per lot per side, price units (like the trainer's --fee)
    doc: str


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
)}


def market(name: str) -> Market:
    try:
        return MARKETS[name]
    except KeyError:
        raise ValueError(f"unknown market {name!r}; known: {', '.join(MARKETS)}") from None
