"""The market-making markets' exact optimum (foxc.evaluate.maker_optimum) IS the passive simulator's: its optimal
policy, played on generated records through foxc.lobsim.passive.PassiveBook (market orders crossing at the touch,
modelled here), earns the computed gain within noise; so does a naive always-quote policy, which loses. Market
orders alone earn nothing on `maker`; on `maker_null` nothing earns and the optimal policy never quotes."""
from functools import lru_cache

import numpy as np
import pytest

from foxc.data.markets import market
from foxc.data.synthetic import generate, latent
from foxc.evaluate.maker_optimum import CANCEL, JOIN, always_quote, solve_maker
from foxc.evaluate.optimum import market_optimum, optimal_pnl
from foxc.lobsim.passive import ASK, BID, PassiveBook, PassiveConfig


@lru_cache(maxsize=None)
def solved(name, policy=None, quotes=True):
    return solve_maker(market(name).params, quotes=quotes, policy=policy)


def play(o, rec, flow):
    """Ticks per snapshot (equity marked to the mid, as the simulator's reward) of the policy `o` (a MakerOptimum)
    deciding at each snapshot on the latent `flow` it is given, through PassiveBook with latency 0; and counts of
    its market orders, posts and fills."""
    tick = int(rec["ask_px"][0, 0] - rec["bid_px"][0, 0])
    book = PassiveBook(PassiveConfig(max_position=1))
    bid, ask = rec["bid_px"][:, 0].tolist(), rec["ask_px"][:, 0].tolist()
    bid_sz, ask_sz, ts, flow = rec["bid_sz"][:, 0].tolist(), rec["ask_sz"][:, 0].tolist(), rec["ts_ns"].tolist(), \
        flow.tolist()
    equity = np.zeros(len(rec))
    counts = {"market": 0, "posts": 0, "fills": 0}
    for t in range(len(rec) - 1):
        codes = []
        for side, touch in ((BID, bid[t]), (ASK, ask[t])):
            order = book.orders[side]
            behind = None if order is None else (touch - order.price if side == BID else order.price - touch) // tick
            codes.append(o.order_code(behind, 0 if order is None else int(order.front)))
        target, quote_bid, quote_ask = o.action(flow[t], bid_sz[t], ask_sz[t], book.position, *codes)
        lots = target - book.position
        if lots:  # a market order at t's touch
            book.cash -= lots * (ask[t] if lots > 0 else bid[t])
            book.position = target
            counts["market"] += abs(lots)
        for side, quote, touch, code in ((BID, quote_bid, bid[t], codes[0]), (ASK, quote_ask, ask[t], codes[1])):
            order = book.orders[side]
            room = 1 - book.position if side == BID else 1 + book.position
            if order is None:
                if quote == JOIN:
                    counts["posts"] += book.post(side, touch, 1, ts[t])
            elif quote == CANCEL or room < 1 or code == 1 or (quote == JOIN and order.price != touch):
                book.cancel(side, ts[t])  # code 1: too far behind the touch, which the MDP cancels
        counts["fills"] += len(book.step(rec[t], rec[t + 1]))
        equity[t + 1] = book.cash + book.position * (bid[t + 1] + ask[t + 1]) / 2
    return np.diff(equity) / tick, counts


def batch_se(values, k=50):
    b = values[: len(values) // k * k].reshape(k, -1).mean(axis=1)
    return b.std(ddof=1) / np.sqrt(k)


def drawn(name, n, seed):
    p = market(name).params
    return generate(n, seed, p), latent(n, seed, p)


@pytest.mark.parametrize("name, policy, quotes, gain", [("maker", None, True, 0.03415), ("maker", always_quote, True,
                                                         -0.01559), ("maker", None, False, 0.0),
                                                         ("maker_null", None, True, 0.0),
                                                         ("maker_null", always_quote, True, -0.02985)])
def test_documented_figures(name, policy, quotes, gain):
    """The figures markets.py and docs/notes/passive.md quote."""
    assert solved(name, policy, quotes).pnl_per_snapshot == pytest.approx(gain, abs=5e-5)


def test_the_optimal_policy_through_the_passive_book_earns_the_optimum():
    """The MDP solved is the simulator's fill model: a different queue rule, join book, fill price or reward would
    move the realised PnL off the gain by more than the noise allows (4 SE here ≈ 9 % of the gain)."""
    o = solved("maker")
    rec, flow = drawn("maker", 200_000, 101)
    pnl, counts = play(o, rec, flow)
    se = batch_se(pnl)
    assert abs(pnl.mean() - o.pnl_per_snapshot) < 4 * se, (pnl.mean(), o.pnl_per_snapshot, se)
    assert se < 0.1 * o.pnl_per_snapshot
    assert counts["fills"] > 0.02 * len(rec) and counts["posts"] > counts["fills"]


@pytest.mark.slow  # ~40 s on two cores
@pytest.mark.parametrize("name, policy", [("maker", None), ("maker", always_quote), ("maker_null", always_quote)])
def test_the_simulator_earns_the_computed_gain_on_a_million_snapshots(name, policy):
    o = solved(name, policy)
    rec, flow = drawn(name, 1_000_000, 202)
    pnl, counts = play(o, rec, flow)
    se = batch_se(pnl)
    assert abs(pnl.mean() - o.pnl_per_snapshot) < 4 * se, (pnl.mean(), o.pnl_per_snapshot, se)
    assert se < 0.02 and counts["fills"] > 20_000


def test_always_quoting_both_sides_loses_on_maker():
    """Adverse selection: the sweeps fill the side the flow comes to, then move the book through it."""
    a, o = solved("maker", always_quote), solved("maker")
    assert a.pnl_per_snapshot < -0.4 * o.pnl_per_snapshot
    rec, flow = drawn("maker", 200_000, 303)
    pnl, counts = play(a, rec, flow)
    se = batch_se(pnl)
    assert abs(pnl.mean() - a.pnl_per_snapshot) < 4 * se and pnl.mean() + 4 * se < 0
    assert counts["market"] == 0


def test_maker_null_has_no_edge_and_its_optimum_never_quotes():
    o, a = solved("maker_null"), solved("maker_null", always_quote)
    assert o.pnl_per_snapshot == 0.0 and a.pnl_per_snapshot < -0.02
    flat = o.policy[:, :, :, 1, 0, 0]  # flat, nothing resting: every flow and touch sizes
    assert np.all(flat == (1, 0, 0))  # hold, keep, keep: never a quote nor a market order
    rec, flow = drawn("maker_null", 20_000, 404)
    pnl, counts = play(o, rec, flow)
    assert counts == {"market": 0, "posts": 0, "fills": 0} and not pnl.any()


def test_market_orders_alone_earn_nothing_on_maker():
    """The drift a sweep brings lasts too little to pay the spread: the market-order optimum is 0, far below the
    quoting one; the same call gives it to today's commands (optimal_pnl, market_optimum's default)."""
    m = market("maker")
    only = solved("maker", quotes=False).pnl_per_snapshot
    assert only == 0.0 and solved("maker").pnl_per_snapshot > 0.03
    assert market_optimum(m) == only and optimal_pnl(m.params).pnl_per_snapshot == only
    assert market_optimum(m, orders="passive") == solved("maker").pnl_per_snapshot
    assert market_optimum(market("default"), orders="passive") is None


def test_orders_far_behind_the_touch_are_worth_nothing():
    """The MDP follows an order down to `behind` ticks behind the touch and cancels it further; the gain does not
    change with that depth (a stale order comes back to the touch only as the flow turns against it)."""
    p = market("maker").params
    assert solve_maker(p, behind=1).pnl_per_snapshot == pytest.approx(solved("maker").pnl_per_snapshot, abs=1e-9)


def test_fees_enter_the_optimum():
    """A maker fee of half the spread takes a quiet fill's edge (what is left: a fill that opens a position the
    flow then pays, cheaper than a market order); a rebate raises the optimum; a taker fee leaves market orders
    at 0."""
    m = market("maker")
    half_spread, g = 0.5 * m.params.tick, solved("maker").pnl_per_snapshot
    assert 0 < market_optimum(m, orders="passive", maker_fee_per_lot=half_spread) < 0.2 * g
    assert market_optimum(m, orders="passive", maker_fee_per_lot=-0.1 * half_spread) > g
    assert 0 < market_optimum(m, orders="passive", fee_per_lot=half_spread) < g  # it exits by market orders
    assert market_optimum(m, fee_per_lot=half_spread) == 0.0


def test_the_book_shows_enough_of_the_flow_for_most_of_the_optimum():
    """A baseline (not the RL agent): the optimal policy on the flow read from the depth's thickness, not the true
    one, keeps most of the optimum (a learner's yardstick is reachable)."""
    o = solved("maker")
    rec, flow = drawn("maker", 200_000, 505)
    depth = rec["bid_sz"][:, 1:].sum(1).astype(np.int64) - rec["ask_sz"][:, 1:].sum(1)
    read = np.where(depth > 8, 1, np.where(depth < -8, -1, 0)).astype(np.int8)
    assert 0.95 < np.mean(read == flow) < 1.0
    pnl, _ = play(o, rec, read)
    se = batch_se(pnl)
    assert 0.7 * o.pnl_per_snapshot < pnl.mean() < o.pnl_per_snapshot + 4 * se, (pnl.mean(), se)
