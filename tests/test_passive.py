"""foxc.lobsim.passive by hand: queue advance, partial and through fills, cancellation's probability, latency,
post-only, the position limit and the maker rebate (tests/test_passive_oracle.py checks the same against
hftbacktest)."""
import numpy as np
import pytest

from foxc.data.record import PRICE_SCALE, empty_snapshots
from foxc.lobsim.passive import ASK, BID, PassiveBook, PassiveConfig

P = PRICE_SCALE


def book(ts, bid=(100, 5), ask=(101, 5)):
    s = empty_snapshots(1)[0]
    s["ts_ns"] = ts
    s["bid_px"][0], s["bid_sz"][0] = bid[0] * P, bid[1]
    s["ask_px"][0], s["ask_sz"][0] = ask[0] * P, ask[1]
    return s


def traded(s, sell=None, buy=None):
    """Snapshot s with the interval's seller- and buyer-initiated trades at their extreme price: (price, volume)."""
    s = s.copy()
    if sell:
        s["sell_lo_px"], s["sell_lo_vol"] = sell[0] * P, sell[1]
    if buy:
        s["buy_hi_px"], s["buy_hi_vol"] = buy[0] * P, buy[1]
    return s


def test_risk_averse_queue_partial_then_through_fill():
    b = PassiveBook(PassiveConfig(max_position=5, maker_fee=-P // 4))
    assert b.post(BID, 100 * P, 3, now_ns=0) == 3
    s0, s1, s2, s3 = book(10), book(20, bid=(100, 2)), book(30, bid=(100, 1)), book(40, bid=(99, 4))
    assert b.step(s0, traded(s1, sell=(100, 3))) == [] and b.orders[BID].front == 2  # 5 ahead, 3 traded
    fills = b.step(s1, traded(s2, sell=(100, 4)))  # 2 ahead, 4 traded: 2 of its 3 lots
    assert [(f.side, f.lots, f.price) for f in fills] == [(BID, 2, 100 * P)] and b.orders[BID].leaves == 1
    fills = b.step(s2, traded(s3, sell=(99, 1)))  # a trade through its price fills the rest
    assert [f.lots for f in fills] == [1] and b.orders[BID] is None
    assert (b.position, b.cash, b.fees) == (3, -300 * P + 3 * P // 4, -3 * P // 4)


def test_whole_fill_and_the_opposite_touch_moving_onto_the_price():
    b = PassiveBook(PassiveConfig(max_position=5, partial=False))
    b.post(ASK, 101 * P, 3, now_ns=0)
    assert [f.lots for f in b.step(book(10), traded(book(20), buy=(101, 6)))] == [3]  # 5 ahead: one lot whole
    b.post(ASK, 102 * P, 1, now_ns=25)
    fills = b.step(book(20), book(30, bid=(102, 1), ask=(103, 1)))  # the bid moves onto 102
    assert [(f.side, f.lots, f.price) for f in fills] == [(ASK, 1, 102 * P)] and b.position == -4


LOG_P = np.log(2.0) / (np.log(2.0) + np.log(6.0))  # f(back) / (f(back) + f(front)), f(x) = log(1 + x)


@pytest.mark.parametrize("queue, front", [
    ("risk_averse", 2.0),  # only trades advance it: 5 ahead, capped by the 2 shown
    ("power", 5 - 4 * 25 / 26),  # cancels in front with probability 1 - f(1) / (f(1) + f(5)), f(x) = x²
    ("log", 5 - (1 - LOG_P) * 4 + (1 - LOG_P * 4))])  # more cancels behind than the 1 there: the rest in front
def test_cancellations_advance_the_probabilistic_queues(queue, front):
    """Joined behind 5, then 1 more behind it (6 shown), then 4 cancelled (2 shown)."""
    b = PassiveBook(PassiveConfig(queue=queue))
    b.post(BID, 100 * P, 1, now_ns=0)
    b.step(book(10, bid=(100, 5)), book(20, bid=(100, 6)))
    b.step(book(20, bid=(100, 6)), book(30, bid=(100, 2)))
    assert b.orders[BID].front == pytest.approx(front, rel=1e-12)


def test_latency_post_only_cancel_and_the_position_limit():
    b = PassiveBook(PassiveConfig(entry_latency_ns=15, cancel_latency_ns=15, max_position=2))
    assert b.post(BID, 100 * P, 5, now_ns=0) == 2  # capped by the limit
    assert b.post(BID, 99 * P, 1, now_ns=0) == 0  # one order a side
    b.step(book(0), traded(book(10), sell=(99, 9)))  # arrives at 15: not yet there when the trade through prints
    assert b.position == 0 and b.orders[BID].live is False
    b.step(book(10), book(20))  # there before the events at 20, behind the 5 shown at 10
    b.step(book(20), book(30))
    assert b.orders[BID].live and b.orders[BID].front == 5
    b.cancel(BID, now_ns=32)  # effective at 47: it still fills at 40
    assert [f.lots for f in b.step(book(30), traded(book(40), sell=(99, 1)))] == [2]
    assert b.post(ASK, 100 * P, 1, now_ns=40) == 1  # a post-only ask at the bid arrives at 55 and is rejected there
    b.step(book(40), book(50))
    b.step(book(50), book(60))
    assert b.orders[ASK] is None and b.position == 2
