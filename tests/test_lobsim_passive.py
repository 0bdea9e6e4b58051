"""The simulator with resting orders (LobSimConfig.passive, lobsim_step_passive) on the reference backend: each
backtest's quotes and fills replayed independently through foxc.lobsim.passive's scalar book (the one checked
against hftbacktest), the accounts' conservation, the trade log, episode ends; tests/gpu checks the kernel against
this reference bit for bit."""
import numpy as np
import pytest

from foxc.data.record import PRICE_UNDEF
from foxc.lobsim import LobEnv
from foxc.lobsim.books import TICK, random_books
from foxc.lobsim.kernels import NO_CANCEL, snapshot_verdicts
from foxc.lobsim.layout import (BOOK_OK, HOLD, QUEUE_NONE, QUOTE_CANCEL, QUOTE_JOIN, QUOTE_KEEP, REASON_PASSIVE)
from foxc.lobsim.passive import ASK, BID, PassiveBook, PassiveConfig, quote

MIN_PX, MAX_PX = 1, 10_000_000 * 10**9


def random_quotes(rng, n):
    """Mostly keep; sometimes cancel or join at the touch or 1-2 ticks behind."""
    codes = np.array([QUOTE_KEEP] * 6 + [QUOTE_CANCEL, QUOTE_JOIN, QUOTE_JOIN, QUOTE_JOIN + 1, QUOTE_JOIN + 2])
    return rng.choice(codes, (2, n)).astype(np.int32)


def env_for(snaps, n, cfg, episode_len=0, **kw):
    return LobEnv(snaps, n, episode_len=episode_len, backend="reference", passive=cfg, **kw)


@pytest.mark.parametrize("cfg", [
    PassiveConfig(tick=TICK, max_position=2),
    PassiveConfig(queue="power", power=2, tick=TICK, entry_latency_ns=300_000, cancel_latency_ns=300_000,
                  maker_fee=-2_000_000, max_position=3, partial=False),
    PassiveConfig(queue="power", power=3, tick=TICK, entry_latency_ns=1_500_000, cancel_latency_ns=700_000,
                  maker_fee=1_000_000, max_position=1)], ids=["risk_averse", "power2-latency-rebate", "power3-fee"])
def test_fills_and_accounts_replay_through_the_scalar_book(cfg):
    """Market actions HOLD, one long episode per backtest: each backtest's position, cash and fees equal a
    PassiveBook fed the same quotes at the held book's time and the same intervals (the scalar book keeps its own
    accounts); rewards sum to the equity change; every logged trade's reason is passive."""
    rng = np.random.default_rng(5)
    snaps = random_books(1200, rng, trades=True, bad_frac=0.02)
    n = 24
    env = env_for(snaps, n, cfg, lots_per_entry=2)
    env.reset(3)
    env.cursors.cursor.upload(rng.integers(0, 600, n))  # one episode each, to the last snapshot
    env.cursors.episode_end.upload(np.full(n, len(snaps) - 1))
    books = [PassiveBook(cfg) for _ in range(n)]
    held = [None] * n
    ok = snapshot_verdicts(snaps, MIN_PX, MAX_PX) == BOOK_OK
    rewards = np.zeros(n)
    fills, filled_lots = 0, np.zeros((2, n), np.int64)
    for t in range(300):
        cursor = env.cursors.cursor.download()
        q = random_quotes(rng, n)
        r, dones, info = env.step(np.full(n, HOLD), quotes=q)
        assert not dones.any()
        rewards += r
        for b in range(n):
            c = int(cursor[b])
            if ok[c]:
                held[b] = snaps[c]
            pb = books[b]
            if held[b] is None:
                continue
            for side in (BID, ASK):  # quotes act only on the snapshot acted on (a skipped one leaves an older book)
                touch = int(held[b]["bid_px"][0] if side == BID else held[b]["ask_px"][0])
                if ok[c] and touch != PRICE_UNDEF:
                    quote(pb, side, int(q[side, b]), int(held[b]["ts_ns"]), touch, 2)
            if ok[c + 1]:
                for f in pb.step(held[b], snaps[c + 1]):
                    fills += 1
                    filled_lots[f.side, b] += f.lots
        lots = info["lots"]
        assert [pb.position for pb in books] == lots.tolist(), t
        pos = env.sim.positions()
        assert [pb.cash for pb in books] == pos["cash"].tolist(), t
        assert [pb.fees for pb in books] == pos["fees_paid"].tolist(), t
        assert (np.abs(lots) <= cfg.max_position).all()  # a post is capped; the other side's fills only reduce
    assert fills > 50, "few fills: the test exercised little"
    pos = env.sim.positions()
    assert np.allclose(rewards, pos["equity"] / 1e9, atol=1e-3)
    for b in range(n):
        logged = env.sim.trades(b)
        assert (logged["reason"] == REASON_PASSIVE).all()
    assert pos["trades"].sum() > 0
    assert np.array_equal(env.sim.orders()["q_fill_lots"], filled_lots)
    assert env.sim.stats()["q_fill_lots"] == filled_lots.sum(axis=1).tolist()


def test_an_order_joins_fills_partly_then_through_and_the_episode_end_drops_the_rest():
    """A hand-made market: the bid joins behind 5, 3 then 4 trade at its price (2 of its 3 lots), a print below
    fills the last; an ask posted after is dropped unfilled at the episode's end, and the position closes at market."""
    snaps = random_books(8, np.random.default_rng(0), empty_level_frac=0.0)
    snaps["bid_px"] = (10_000 - np.arange(10)) * TICK
    snaps["ask_px"] = (10_001 + np.arange(10)) * TICK
    snaps["bid_sz"], snaps["ask_sz"] = 5, 5
    for t, px, vol in ((2, 10_000, 3), (3, 10_000, 4), (4, 9_999, 1)):
        snaps[t]["sell_lo_px"], snaps[t]["sell_lo_vol"] = px * TICK, vol
    env = env_for(snaps, 1, PassiveConfig(tick=TICK, max_position=3, maker_fee=-1_000_000), lots_per_entry=3)
    env.reset(0)
    env.cursors.cursor.upload(np.array([1], np.int64))
    env.cursors.episode_end.upload(np.array([6], np.int64))
    lots = []
    for t, (bid, ask) in enumerate([(QUOTE_JOIN, QUOTE_KEEP), (QUOTE_KEEP, QUOTE_KEEP), (QUOTE_KEEP, QUOTE_KEEP),
                                    (QUOTE_KEEP, QUOTE_JOIN + 1), (QUOTE_KEEP, QUOTE_KEEP), (QUOTE_KEEP, QUOTE_KEEP)]):
        _, done, info = env.step(np.array([HOLD]), quotes=np.array([[bid], [ask]]))
        lots.append(int(info["lots"][0]))
        orders = env.sim.orders()
        if t == 3:
            assert orders["q_px"][1, 0] == 10_002 * TICK and orders["q_state"][1, 0] != QUEUE_NONE
    assert lots == [0, 2, 3, 3, 3, 0] and done[0] == 1
    orders = env.sim.orders()
    assert (orders["q_state"] == QUEUE_NONE).all() and (orders["q_cancel"] == NO_CANCEL).all()
    assert orders["q_fill_lots"][:, 0].tolist() == [3, 0] and orders["q_posts"][:, 0].tolist() == [1, 1]
    pos = env.sim.positions()[0]
    assert pos["fees_paid"] == -3_000_000  # three lots' rebate; the close at market pays no fee here
    trades = env.sim.trades(0)
    assert len(trades) == 1 and trades[0]["side"] == 1 and trades[0]["lots"] == 3


def test_quotes_need_resting_orders_and_are_checked():
    snaps = random_books(50, np.random.default_rng(1))
    env = LobEnv(snaps, 4, backend="reference")
    env.reset(0)
    with pytest.raises(ValueError, match="quotes need resting orders"):
        env.step(np.zeros(4), quotes=np.zeros((2, 4), np.int32))
    env = env_for(snaps, 4, PassiveConfig(tick=TICK))
    env.reset(0)
    with pytest.raises(ValueError, match="quotes must be whole numbers 0..11 of shape"):
        env.step(np.zeros(4), quotes=np.full((2, 4), 12, np.int32))
    with pytest.raises(ValueError, match="passive queue model 'log'"):
        env_for(snaps, 4, PassiveConfig(queue="log"))


def test_an_order_a_market_order_left_past_the_limit_is_cancelled():
    """Market orders and quotes mixed, no latency: a resting order whose fill would take the position past
    max_position after a market order moved it is cancelled before the next interval, so |position| never passes
    the limit (market targets are ±lots_per_entry, within it); resting orders do fill."""
    rng = np.random.default_rng(11)
    snaps = random_books(2000, rng, trades=True)
    n = 64
    env = env_for(snaps, n, PassiveConfig(tick=TICK, max_position=3), episode_len=200, lots_per_entry=2)
    env.reset(1)
    for t in range(150):
        acts = np.where(rng.random(n) < 0.7, HOLD, rng.integers(0, 5, n))
        _, _, info = env.step(acts, quotes=random_quotes(rng, n))
        assert (np.abs(info["lots"]) <= 3).all(), t
    assert sum(env.sim.stats()["q_fill_lots"]) > 200
