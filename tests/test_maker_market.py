"""The market-making process (markets `maker`, `maker_null`): a valid book, seeded, whose events, sizes and trade
fields are those MakerParams defines (the MDP of foxc.evaluate.maker_optimum reads the same definitions)."""
import numpy as np
import pytest

from foxc.data import validate
from foxc.data.markets import market
from foxc.data.record import PRICE_UNDEF
from foxc.data.synthetic import MakerParams, generate, latent, synthetic_data

P = MakerParams()
N = 300_000


@pytest.fixture(scope="module")
def drawn():
    return generate(N, 3, P), latent(N, 3, P)


def test_a_valid_seeded_book(drawn):
    rec, _ = drawn
    kept, skipped = validate.apply(rec, None, validate.ValidationConfig())
    assert len(kept) == len(rec) and not any(skipped.values())
    tick = P.tick_units
    assert np.all(rec["ask_px"][:, 0] - rec["bid_px"][:, 0] == tick)
    assert np.all(np.diff(rec["bid_px"], axis=1) == -tick) and np.all(np.diff(rec["ask_px"], axis=1) == tick)
    assert set(np.unique(rec["bid_sz"][:, 0])) == {1, 2, 3} and set(np.unique(rec["ask_sz"][:, 1:])) == {4, 6}
    assert np.array_equal(rec["bid_ct"], rec["bid_sz"]) and np.all(np.diff(rec["ts_ns"]) > 0)
    assert generate(5000, 3, P).tobytes() == generate(5000, 3, P).tobytes()
    assert generate(5000, 3, P).tobytes() != generate(5000, 4, P).tobytes()
    assert synthetic_data(1000, 1, P, n_segments=2).n_segments == 2


def events(rec):
    """Per interval t -> t+1 the event's index in MakerParams.events()' columns, read from the records."""
    V = len(P.noise_vol)
    step = np.diff(rec["bid_px"][:, 0]) // P.tick_units
    sold, bought = rec["sell_lo_vol"][1:].astype(np.int64), rec["buy_hi_vol"][1:].astype(np.int64)
    return np.where(step > 0, 2 * V + 1, np.where(step < 0, 2 * V + 2,
                    np.where(sold > 0, sold, np.where(bought > 0, V + bought, 0))))


def test_trades_are_those_of_the_book(drawn):
    """A sweep takes the previous touch whole (one print per lot) and moves the book a tick; an uninformed order
    trades at the touch, which stays, at most its size; nothing else trades."""
    rec, _ = drawn
    prev, cur = rec[:-1], rec[1:]
    step = np.diff(rec["bid_px"][:, 0]) // P.tick_units
    assert set(np.unique(step)) == {-1, 0, 1}
    sell, buy = cur["sell_lo_px"] != PRICE_UNDEF, cur["buy_hi_px"] != PRICE_UNDEF
    assert not (sell & buy).any()
    down, up = step < 0, step > 0
    assert np.all(sell[down]) and np.all(buy[up])
    assert np.array_equal(cur["sell_lo_px"][sell], prev["bid_px"][sell, 0])
    assert np.array_equal(cur["buy_hi_px"][buy], prev["ask_px"][buy, 0])
    assert np.array_equal(cur["sell_lo_vol"][down], prev["bid_sz"][down, 0])
    assert np.array_equal(cur["buy_hi_vol"][up], prev["ask_sz"][up, 0])
    quiet = step == 0
    assert np.all(cur["sell_lo_vol"][quiet] <= prev["bid_sz"][quiet, 0])
    assert np.all(cur["buy_hi_vol"][quiet] <= prev["ask_sz"][quiet, 0])
    assert np.array_equal(cur["trade_count"], cur["sell_lo_vol"] + cur["buy_hi_vol"])
    assert np.array_equal(cur["sell_vol"], cur["sell_lo_vol"]) and np.array_equal(cur["buy_vol"], cur["buy_hi_vol"])
    assert np.array_equal(cur["last_px"], np.where(sell, cur["sell_lo_px"], np.where(buy, cur["buy_hi_px"],
                                                                                     PRICE_UNDEF)))
    assert rec["trade_count"][0] == 0 and rec["sell_lo_px"][0] == PRICE_UNDEF and np.all(rec["feed_delay_ns"] == 0)


def test_events_follow_the_latent_flow(drawn):
    """The event frequencies given z are MakerParams.events() (an uninformed order bigger than the touch trades the
    touch's size: its volume read as that)."""
    rec, z = drawn
    e = events(rec)
    V = len(P.noise_vol)
    want = P.events()
    size = {0: rec["bid_sz"][:-1, 0], 1: rec["ask_sz"][:-1, 0]}
    for i, flow in enumerate((-1, 0, 1)):
        at = z[:-1] == flow
        big = at & (size[0] >= V) & (size[1] >= V)  # where no order is capped by the touch
        got = np.bincount(e[big], minlength=want.shape[1]) / big.sum()
        se = np.sqrt(want[i] * (1 - want[i]) / big.sum())
        assert np.all(np.abs(got - want[i]) < 5 * se + 1e-12), (flow, got, want[i])
    assert abs(np.mean(z == 0) - 0.5) < 0.01


def test_touch_sizes_follow_their_rule(drawn):
    """Without a move, size' = size − traded; an emptied touch refills; else +1 w.p. add (capped), −1 w.p. cancel
    (a touch of 1 stays). A move redraws both touches."""
    rec, z = drawn
    e = events(rec)
    V = len(P.noise_vol)
    b, b2 = rec["bid_sz"][:-1, 0].astype(np.int64), rec["bid_sz"][1:, 0].astype(np.int64)
    sold = np.where((e >= 1) & (e <= V), np.minimum(e, b), 0)
    left = b - sold
    quiet = (e <= 2 * V) & (left >= 2) & (left < P.max_size)
    d = b2[quiet] - left[quiet]
    assert set(np.unique(d)) == {-1, 0, 1}
    for value, p in ((1, P.add), (-1, P.cancel)):
        share = np.mean(d == value)
        assert abs(share - p) < 5 * np.sqrt(p * (1 - p) / quiet.sum())
    moved = (e > 2 * V) & (z[:-1] == 1)  # a sweep under z = +1: the bid refills thick
    got = np.bincount(b2[moved], minlength=P.max_size + 1)[1:] / moved.sum()
    assert np.allclose(got, P.refill_pmf(1, 0), atol=0.02)


def test_the_depth_shows_the_flow(drawn):
    """The depth's thickness reads z (the agent's view of it): a simple threshold gets ~97 % right."""
    rec, z = drawn
    depth = rec["bid_sz"][:, 1:].sum(1).astype(np.int64) - rec["ask_sz"][:, 1:].sum(1)
    guess = np.where(depth > 8, 1, np.where(depth < -8, -1, 0))
    assert 0.95 < np.mean(guess == z) < 0.99


def test_the_null_markets_sweeps_ignore_the_flow():
    p = market("maker_null").params
    rec, z = generate(200_000, 5, p), latent(200_000, 5, p)
    step = np.diff(rec["bid_px"][:, 0]) // p.tick_units
    for flow in (-1, 1):
        at = z[:-1] == flow
        up, down = np.mean(step[at] > 0), np.mean(step[at] < 0)
        assert abs(up - 0.1) < 0.01 and abs(down - 0.1) < 0.01
