"""foxc's resting-order reference (foxc.lobsim.passive) against hftbacktest, an independent backtester.

The same snapshots become hftbacktest's events: per snapshot, one seller- and one buyer-initiated trade event (the
interval's extreme prices and their volume), then one depth event per changed level (removed levels at size 0),
the side moving away first so that the book is never crossed between two events; every event of a snapshot is
stamped with its time, and the feed reaches the strategy `FEED_NS` later. A scripted strategy posts post-only
orders at the touch or behind it, and cancels some, at each snapshot's receive time, in both. After every
snapshot the position, the cash, the fees, the fills and the volume must be equal, for each queue model and
order latency.
"""
import numpy as np
import pytest

from foxc.data.record import PRICE_SCALE, empty_snapshots
from foxc.lobsim.passive import ASK, BID, PassiveBook, PassiveConfig, size_at

hbt_lib = pytest.importorskip("hftbacktest")
from hftbacktest import BacktestAsset, HashMapMarketDepthBacktest  # noqa: E402
from hftbacktest.order import GTX, LIMIT  # noqa: E402
from hftbacktest.types import (BUY_EVENT, DEPTH_EVENT, EXCH_EVENT, LOCAL_EVENT, SELL_EVENT,  # noqa: E402
                               TRADE_EVENT, event_dtype)

SPACING_NS, FEED_NS, RESPONSE_NS = 1_000_000, 200_000, 50_000
LEVELS = 10


def market(seed: int, n: int = 300):
    """Snapshots of a random-walk book of contiguous ticks (1 price unit each) with the trades between them; each
    reaches the strategy FEED_NS after the exchange's time (ts_ns is the receive time, as Databento's ts_recv)."""
    rng = np.random.default_rng(seed)
    snaps = empty_snapshots(n)
    bid = 1_000
    for t in range(n):
        if t:
            bid += int(rng.choice([-1, 0, 0, 0, 1]))
        ask = bid + int(rng.choice([1, 1, 2]))
        snaps[t]["ts_ns"] = 1_000_000_000 + t * SPACING_NS + FEED_NS
        snaps[t]["feed_delay_ns"] = FEED_NS
        snaps[t]["bid_px"] = (bid - np.arange(LEVELS)) * PRICE_SCALE
        snaps[t]["ask_px"] = (ask + np.arange(LEVELS)) * PRICE_SCALE
        snaps[t]["bid_sz"] = rng.integers(1, 12, LEVELS)
        snaps[t]["ask_sz"] = rng.integers(1, 12, LEVELS)
        if t:
            prev = snaps[t - 1]
            if rng.random() < 0.6:
                snaps[t]["sell_lo_px"] = prev["bid_px"][0] - PRICE_SCALE * int(rng.random() < 0.2)
                snaps[t]["sell_lo_vol"] = rng.integers(1, 10)
            if rng.random() < 0.6:
                snaps[t]["buy_hi_px"] = prev["ask_px"][0] + PRICE_SCALE * int(rng.random() < 0.2)
                snaps[t]["buy_hi_vol"] = rng.integers(1, 10)
    return snaps


def events(snaps) -> np.ndarray:
    rows = []

    def add(flag, ts, px, qty):
        rows.append((flag | EXCH_EVENT | LOCAL_EVENT, ts, ts + FEED_NS, px / PRICE_SCALE, float(qty), 0, 0, 0.0))

    def side_events(flag, ts, prev_px, prev_sz, px, sz, descending):
        now = dict(zip(px.tolist(), sz.tolist()))
        before = dict(zip(prev_px.tolist(), prev_sz.tolist())) if prev_px is not None else {}
        for price in sorted(set(before) - set(now)):
            add(DEPTH_EVENT | flag, ts, price, 0)
        for price in sorted(now, reverse=descending):
            if before.get(price) != now[price]:
                add(DEPTH_EVENT | flag, ts, price, now[price])

    for t, s in enumerate(snaps):
        ts, prev = int(s["ts_ns"]) - int(s["feed_delay_ns"]), snaps[t - 1] if t else None
        if t and s["sell_lo_vol"]:
            add(TRADE_EVENT | SELL_EVENT, ts, s["sell_lo_px"], s["sell_lo_vol"])
        if t and s["buy_hi_vol"]:
            add(TRADE_EVENT | BUY_EVENT, ts, s["buy_hi_px"], s["buy_hi_vol"])
        bids = lambda: side_events(BUY_EVENT, ts, None if prev is None else prev["bid_px"],  # noqa: E731
                                   None if prev is None else prev["bid_sz"], s["bid_px"], s["bid_sz"], False)
        asks = lambda: side_events(SELL_EVENT, ts, None if prev is None else prev["ask_px"],  # noqa: E731
                                   None if prev is None else prev["ask_sz"], s["ask_px"], s["ask_sz"], True)
        up = prev is not None and s["bid_px"][0] > prev["bid_px"][0]
        for apply in ((asks, bids) if up else (bids, asks)):  # the side moving away first: never crossed
            apply()
    return np.array(rows, dtype=event_dtype)


QUEUES = {"risk_averse": lambda a: a.risk_adverse_queue_model(),
          "power2": lambda a: a.power_prob_queue_model(2.0),
          "power3": lambda a: a.power_prob_queue_model(3.0),
          "log": lambda a: a.log_prob_queue_model()}


def oracle(snaps, queue: str, latency_ns: int, maker_fee: float, partial: bool):
    """hftbacktest over the snapshots' events, and the events (hftbacktest reads them in place: keep them alive)."""
    feed = events(snaps)
    asset = (BacktestAsset().data([feed]).linear_asset(1.0)
             .constant_order_latency(latency_ns, RESPONSE_NS)
             .trading_qty_fee_model(maker_fee, 0.0).tick_size(1.0).lot_size(1.0).last_trades_capacity(64))
    asset = asset.partial_fill_exchange() if partial else asset.no_partial_fill_exchange()
    return HashMapMarketDepthBacktest([QUEUES[queue](asset)]), feed


def scripted(book: PassiveBook, snaps, seed: int):
    """Run the reference under a random script: at each snapshot's receive time, post on an empty side (at the touch
    or 1-2 ticks behind, 1-3 lots) or cancel an order whose acknowledgement has arrived. Returns the actions and the
    state after each snapshot. The snapshots' trade volumes are adjusted in place where a queue fill would equal the order's whole rest:
    hftbacktest's partial-fill exchange leaves such an order on its ladder (its `filled_qty > leaves` test), and
    its next fill attempt fails (InvalidOrderStatus); one lot more fills it whole there as here."""
    rng = np.random.default_rng(100 + seed)
    actions, states = [], []
    for t in range(len(snaps)):
        if t:
            for side, px, vol in ((BID, "sell_lo_px", "sell_lo_vol"), (ASK, "buy_hi_px", "buy_hi_vol")):
                order = book.orders[side]
                exch_ns = snaps[t]["ts_ns"] - snaps[t]["feed_delay_ns"]
                arrives = order is not None and (order.live or order.arrive_ns < exch_ns)
                if arrives and snaps[t][vol] and snaps[t][px] == order.price:
                    front = order.front if order.live else size_at(snaps[t - 1], side, order.price)
                    if np.floor(snaps[t][vol] - front + 0.5) == order.leaves:
                        snaps[t][vol] += 1
            done = book.step(snaps[t - 1], snaps[t])
        else:
            done = []
        now = int(snaps[t]["ts_ns"])  # the receive time
        states.append((book.position, book.cash, book.fees, len(done), sum(f.lots for f in done)))
        act = []
        for side in (BID, ASK):
            order = book.orders[side]
            if order is None and rng.random() < 0.35:
                behind = int(rng.choice([0, 0, 1, 2]))
                touch = int(snaps[t]["bid_px"][0] if side == BID else snaps[t]["ask_px"][0])
                price = touch - behind * PRICE_SCALE if side == BID else touch + behind * PRICE_SCALE
                lots = book.post(side, price, int(rng.integers(1, 4)), now)
                if lots:
                    act.append(("post", side, price, lots))
            elif (order is not None and order.cancel_ns is None and order.arrive_ns + RESPONSE_NS < now
                  and rng.random() < 0.15):
                book.cancel(side, now)
                act.append(("cancel", side))
        actions.append(act)
    return actions, states


def cases():
    """Every queue model, latency (none, under one snapshot's interval, over one) and exchange, two markets (slow:
    hftbacktest's start compiles; tests/test_passive.py has the fast cases)."""
    for seed in (0, 1):
        for queue in QUEUES:
            for latency_ns in (0, 300_000, 1_500_000):
                for partial in (True, False):
                    yield pytest.param(queue, latency_ns, partial, seed, marks=pytest.mark.slow,
                                       id=f"{queue}-{latency_ns}ns-{'partial' if partial else 'whole'}-{seed}")


@pytest.mark.parametrize("queue, latency_ns, partial, seed", list(cases()))
def test_fills_position_and_money_equal_hftbacktest(queue, latency_ns, partial, seed):
    """After every snapshot: the lots each order has filled, the position, cash and fees. hftbacktest's local state
    applies an order's fills only once it is Filled (local.rs), so with partial fills its position is read from its
    orders (each response's leaves), and with whole fills from its state as well."""
    snaps = market(seed)
    maker_fee = -0.25  # a rebate per lot
    cfg = PassiveConfig(queue="power" if queue.startswith("power") else queue,
                        power=int(queue[-1]) if queue.startswith("power") else 2,
                        entry_latency_ns=latency_ns, cancel_latency_ns=latency_ns,
                        maker_fee=int(maker_fee * PRICE_SCALE), max_position=4, partial=partial)
    actions, states = scripted(PassiveBook(cfg), snaps, seed)
    hbt, _feed = oracle(snaps, queue, latency_ns, maker_fee, partial)
    next_id, ids, filled, fills, volume = 1, [0, 0], {}, 0, 0
    try:
        for t in range(len(snaps)):
            now = int(snaps[t]["ts_ns"])  # the receive time
            if not t:  # the clock starts unset; a first step of 1 ns sets it to the first event's exchange time + 1
                assert hbt.elapse(1) == 0
            last = t == len(snaps) - 1  # past the last event hftbacktest says EndOfData (1)
            assert hbt.elapse(now - hbt.current_timestamp) in ((0, 1) if last else (0,))
            assert last or hbt.current_timestamp == now
            orders = hbt.orders(0).values()
            while orders.has_next():
                order = orders.get()
                sign = 1 if order.side == 1 else -1
                filled[order.order_id] = (sign * (order.qty - order.leaves_qty), order.price_tick)
            position, cash, fees, n, lots = states[t]
            assert sum(q for q, _ in filled.values()) == position, t
            assert -sum(q * px for q, px in filled.values()) * PRICE_SCALE - fees == cash, t
            assert sum(abs(q) for q, _ in filled.values()) * maker_fee * PRICE_SCALE == fees, t
            if not partial:
                fills, volume = fills + n, volume + lots
                state = hbt.state_values(0)
                assert (hbt.position(0), state.fee, state.balance) == (position, fees / PRICE_SCALE,
                                                                      (cash + fees) / PRICE_SCALE), t
                assert (state.num_trades, state.trading_volume) == (fills, volume), t
            for act in actions[t]:
                if act[0] == "post":
                    _, side, price, lots = act
                    submit = hbt.submit_buy_order if side == BID else hbt.submit_sell_order
                    assert submit(0, next_id, price / PRICE_SCALE, float(lots), GTX, LIMIT, False) == 0
                    ids[side], next_id = next_id, next_id + 1
                else:
                    assert hbt.cancel(0, ids[act[1]], False) == 0
            hbt.clear_inactive_orders(0)
    finally:
        hbt.close()
    partly = sum(1 for fills_at in states if fills_at[3]) < sum(fills_at[4] for fills_at in states)
    assert sum(1 for q, _ in filled.values() if q) > 20 and (partly or not partial)  # the script filled orders
