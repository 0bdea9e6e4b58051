"""Resting limit orders at snapshot granularity: the numpy reference of one backtest's passive quoting.

One backtest rests at most one bid and one ask (post-only). Each is placed at a price the caller chooses (the touch
or ticks behind it) and reaches the exchange `entry_latency_ns` after the decision; a cancel takes effect
`cancel_latency_ns` after it. Between two snapshots the queue in front of an order advances by the trades at its
price (the record's extreme trade prices of each side and the volume there: `sell_lo_px`/`sell_lo_vol`,
`buy_hi_px`/`buy_hi_vol`) and, in the probabilistic models,
by the cancellations the displayed size's fall implies; a trade through the order's price, or the opposite touch
moving onto it, fills what is left. Fills are at the order's price, maker fees per lot (a negative one is a rebate),
partial fills when the queue's advance covers part of the order.

The rules are hftbacktest's queue models (RiskAdverseQueueModel, ProbQueueModel with the power and log functions)
and its partial-fill exchange, applied to one interval at a time in the order the exchange sees the interval's
events: cancels and arrivals that happen before the next snapshot's events, then that snapshot's trades, then its
book. tests/test_passive_oracle.py replays the same snapshots through hftbacktest (one event per trade side and per
changed level, all stamped with the snapshot's time) and asserts the same fills, position, cash and fees. Where
foxc's data cannot say more than a snapshot does (the order of trades inside an interval, sizes beyond the 10
displayed levels: taken as 0), docs/notes/passive.md states the difference.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.record import PRICE_SCALE, PRICE_UNDEF
from .layout import QUOTE_CANCEL, QUOTE_JOIN, QUOTE_KEEP

BID, ASK = 0, 1
QUEUE_MODELS = ("risk_averse", "power", "log")
MAX_POWER = 4


@dataclass(frozen=True)
class PassiveConfig:
    """Resting orders' settings; money and prices are integers ×1e9 as the simulator's."""

    queue: str = "risk_averse"
    power: int = 2  # the power model's exponent, a whole number 1..MAX_POWER (x^n by repeated products: exact
    #                 on both backends)
    entry_latency_ns: int = 0
    cancel_latency_ns: int = 0
    maker_fee: int = 0  # money (price × 1e9) per lot; negative: a rebate
    max_position: int = 1  # |lots| an order may take the position to
    partial: bool = True  # a queue's advance fills what it covers; False: the whole order once it reaches the front
    tick: int = 0  # price × 1e9 of one tick: a join k > 0 ticks behind the touch needs it

    @classmethod
    def of_settings(cls, settings: dict, tick: int) -> "PassiveConfig | None":
        """The resting orders of a run's settings (its config.json's, a checkpoint's: --orders, --queue-model,
        --maker-fee in price units, the latencies, --lots as the position limit); None with --orders market or a
        run from before --orders. `tick`: price × 1e9 of one tick."""
        if settings.get("orders", "market") != "passive":
            return None
        model = settings["queue_model"]
        return cls(queue="risk_averse" if model == "risk_averse" else "power",
                   power=2 if model == "risk_averse" else int(model.removeprefix("power")),
                   entry_latency_ns=int(settings["entry_latency_ns"]), cancel_latency_ns=int(settings["cancel_latency_ns"]),
                   maker_fee=int(round(settings["maker_fee"] * PRICE_SCALE)), max_position=int(settings["lots_per_entry"]),
                   tick=int(tick))

    def __post_init__(self):
        assert self.queue in QUEUE_MODELS, self.queue
        assert isinstance(self.power, int) and 1 <= self.power <= MAX_POWER, self.power
        assert self.entry_latency_ns >= 0 and self.cancel_latency_ns >= 0 and self.max_position >= 1
        assert self.tick >= 0


@dataclass
class Resting:
    price: int
    leaves: int
    arrive_ns: int
    live: bool = False
    front: float = 0.0  # size in front of the order (hftbacktest's front_q_qty)
    cum_trade: float = 0.0  # traded at its price since the last change of the displayed size there
    cancel_ns: int | None = None


@dataclass(frozen=True)
class Fill:
    side: int
    lots: int
    price: int


def size_at(snapshot, side: int, price: int) -> int:
    """The displayed size at `price` on `side` of a snapshot; 0 where no displayed level has that price."""
    px, sz = (snapshot["bid_px"], snapshot["bid_sz"]) if side == BID else (snapshot["ask_px"], snapshot["ask_sz"])
    hit = np.flatnonzero(px == price)
    return int(sz[hit[0]]) if hit.size else 0


def best(snapshot, side: int) -> int:
    return int(snapshot["bid_px"][0] if side == BID else snapshot["ask_px"][0])


def _rust_min(a: float, b: float) -> float:
    """f64::min: the other operand where one is NaN."""
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def _power(x: np.float64, n: int) -> np.float64:
    """x^n as n - 1 products left to right, as the kernel computes it."""
    out = x
    for _ in range(n - 1):
        out = out * x
    return out


def _round_half_away(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


class PassiveBook:
    """One backtest's resting orders, position, cash and fees (money units: price × 1e9 × lots)."""

    def __init__(self, cfg: PassiveConfig):
        self.cfg = cfg
        self.orders: list[Resting | None] = [None, None]
        self.position = 0
        self.cash = 0
        self.fees = 0
        self.rejected = [0, 0]  # per side: post-only orders refused on arrival (they would have crossed)

    def post(self, side: int, price: int, lots: int, now_ns: int) -> int:
        """Send a post-only order on an empty side, its size capped by the position limit; the lots sent (0: none)."""
        room = self.cfg.max_position - (self.position if side == BID else -self.position)
        lots = min(lots, room)
        if self.orders[side] is not None or lots <= 0:
            return 0
        self.orders[side] = Resting(price, lots, now_ns + self.cfg.entry_latency_ns)
        return lots

    def cancel(self, side: int, now_ns: int) -> None:
        order = self.orders[side]
        if order is not None and order.cancel_ns is None:
            order.cancel_ns = now_ns + self.cfg.cancel_latency_ns

    def keep_within_limit(self, now_ns: int) -> None:
        """Cancel an order whose fill would take the position past the limit (a market order moved it since the
        order was posted; fills of resting orders alone never do)."""
        for side in (BID, ASK):
            order = self.orders[side]
            room = self.cfg.max_position - (self.position if side == BID else -self.position)
            if order is not None and order.leaves > room:
                self.cancel(side, now_ns)

    def step(self, prev, snap) -> list[Fill]:
        """The interval from snapshot `prev` to `snap`, whose trades and book changes happen at its exchange time
        (ts_ns - feed_delay_ns); orders are decided on the receive clock (ts_ns)."""
        ts = int(snap["ts_ns"]) - int(snap["feed_delay_ns"])
        for side in (BID, ASK):
            order = self.orders[side]
            if order is None:
                continue
            if order.cancel_ns is not None and order.cancel_ns < ts:
                self.orders[side] = None
            elif not order.live and order.arrive_ns < ts:  # it joins the book as `prev` shows it
                opposite = best(prev, 1 - side)
                crosses = opposite != PRICE_UNDEF and (order.price >= opposite if side == BID else
                                                       order.price <= opposite)
                if crosses:  # post-only: rejected
                    self.orders[side] = None
                    self.rejected[side] += 1
                else:
                    order.live, order.front = True, float(size_at(prev, side, order.price))
        fills = []
        self._trades(BID, int(snap["sell_lo_px"]), int(snap["sell_lo_vol"]), fills)
        self._trades(ASK, int(snap["buy_hi_px"]), int(snap["buy_hi_vol"]), fills)
        for side in (BID, ASK):
            order = self.orders[side]
            if order is None or not order.live:
                continue
            before, after = size_at(prev, side, order.price), size_at(snap, side, order.price)
            if before != after:
                self._depth(order, before, after)
            opposite = best(snap, 1 - side)
            if opposite != PRICE_UNDEF and (order.price >= opposite if side == BID else order.price <= opposite):
                self._fill(side, order.leaves, fills)
        return fills

    def _trades(self, side: int, px: int, vol: int, fills: list[Fill]) -> None:
        order = self.orders[side]
        if order is None or not order.live or vol <= 0:
            return
        through = px < order.price if side == BID else px > order.price
        if through:
            self._fill(side, order.leaves, fills)
        elif px == order.price:
            order.front -= vol
            order.cum_trade += vol
            executable = _round_half_away(-order.front)
            if executable > 0:
                order.front = 0.0
                self._fill(side, min(executable, order.leaves) if self.cfg.partial else order.leaves, fills)

    def _depth(self, order: Resting, before: int, after: int) -> None:
        if self.cfg.queue == "risk_averse":
            order.front = min(order.front, float(after))
            return
        change = before - after - order.cum_trade
        order.cum_trade = 0.0
        if change < 0:
            order.front = min(order.front, float(after))
            return
        front, back = order.front, before - order.front
        with np.errstate(all="ignore"):  # as Rust's f64: a negative size's power or log is NaN, not an exception
            f = (lambda x: _power(np.float64(x), self.cfg.power)) if self.cfg.queue == "power" else \
                (lambda x: np.log(np.float64(1.0 + x)))
            prob = f(back) / (f(back) + f(front))
        prob = 1.0 if math.isinf(prob) else float(prob)
        estimate = front - (1.0 - prob) * change + min(back - prob * change, 0.0)
        order.front = _rust_min(estimate, float(after))

    def _fill(self, side: int, lots: int, fills: list[Fill]) -> None:
        order = self.orders[side]
        sign = 1 if side == BID else -1
        self.position += sign * lots
        self.cash -= sign * lots * order.price
        fee = lots * self.cfg.maker_fee
        self.cash -= fee
        self.fees += fee
        fills.append(Fill(side, lots, order.price))
        order.leaves -= lots
        if order.leaves == 0:
            self.orders[side] = None


def quote(book: PassiveBook, side: int, code: int, now_ns: int, touch: int, lots: int) -> None:
    """Apply one side's quote (QUOTE_*) decided at `now_ns` with the side's touch price `touch` in view."""
    if code == QUOTE_KEEP:
        return
    order = book.orders[side]
    if code == QUOTE_CANCEL:
        book.cancel(side, now_ns)
        return
    behind = (code - QUOTE_JOIN) * book.cfg.tick
    price = touch - behind if side == BID else touch + behind
    if order is None:
        book.post(side, price, lots, now_ns)
    elif order.price != price:
        book.cancel(side, now_ns)
