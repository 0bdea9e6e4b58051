"""The synthetic default: seeded, a plausible book, and a weak signal a simple learner finds."""
import hashlib
import re

import numpy as np
import pytest

from foxc.data import validate
from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.markets import market
from foxc.data.record import FLAG_NO_TRADES, PRICE_UNDEF
from foxc.data.synthetic import SynthParams, ar1, best_accuracy_h1, generate, h1_move_probs, synthetic_data


def test_seeded_and_deterministic():
    a, b, c = generate(5000, 7), generate(5000, 7), generate(5000, 8)
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()


def test_ar1_matches_the_recursion(rng):
    eps = rng.standard_normal(1000)
    want, x = np.zeros(1000), 0.0
    for i, e in enumerate(eps):
        x = 0.93 * x + e
        want[i] = x
    np.testing.assert_allclose(ar1(eps, 0.93), want, rtol=1e-9, atol=1e-9)


def test_plausible_book():
    p = SynthParams()
    rec = generate(50_000, 1)
    kept, skipped = validate.apply(rec, None, validate.ValidationConfig())
    assert len(kept) == len(rec)
    tick = p.tick_units
    assert np.all(rec["bid_px"] % tick == 0) and np.all(rec["ask_px"] % tick == 0)
    spread = (rec["ask_px"][:, 0] - rec["bid_px"][:, 0]) // tick
    share = np.bincount(spread, minlength=4)[1:4] / len(rec)
    assert share.sum() == 1.0 and share[0] > 0.5 and share[2] < 0.2
    depth = rec["bid_sz"][:, 1:].mean(0)
    assert np.all(np.diff(depth) > 0)  # the depth profile grows away from the touch
    imb = (rec["bid_sz"][:, 0].astype(float) - rec["ask_sz"][:, 0]) / (rec["bid_sz"][:, 0] + rec["ask_sz"][:, 0])
    lag1 = np.corrcoef(imb[:-1], imb[1:])[0, 1]
    assert 0.8 < lag1 < 0.995 and abs(imb.mean()) < 0.1  # persistent and mean-reverting around zero
    assert np.all(np.diff(rec["ts_ns"]) > 0)


def test_best_accuracy_matches_monte_carlo_of_the_true_model():
    """The Bayes rule from the process's own probabilities, applied to generated data."""
    p = SynthParams()
    n = 400_000
    rng = np.random.default_rng(11)
    x = ar1(np.r_[rng.standard_normal(), rng.standard_normal(n - 1) * np.sqrt(1 - p.phi ** 2)], p.phi)
    rec = generate(n, 11, p)  # the same draws: generate() starts with exactly these normals
    spread = (rec["ask_px"][:, 0] - rec["bid_px"][:, 0]) // p.tick_units
    up, down = np.zeros(n), np.zeros(n)
    for s in (1, 2, 3):
        sel = spread == s
        up[sel], down[sel] = h1_move_probs(x[sel], s, p)
    mid2 = rec["bid_px"][:, 0] + rec["ask_px"][:, 0]
    move = np.sign(mid2[1:] - mid2[:-1])
    labelled = move != 0
    correct = np.where(up[:-1] > down[:-1], move > 0, move < 0)[labelled]
    best = best_accuracy_h1(p)
    se = np.sqrt(best * (1 - best) / labelled.sum())
    assert abs(correct.mean() - best) < 4 * se
    assert 0.55 < best < 0.65


def logistic_fit(x, y, iters=25):
    X = np.stack([np.ones_like(x), x], 1)
    w = np.zeros(2)
    for _ in range(iters):  # Newton's method on the log-likelihood
        p = 1 / (1 + np.exp(-X @ w))
        g = X.T @ (y - p)
        H = (X * (p * (1 - p))[:, None]).T @ X
        w += np.linalg.solve(H + 1e-9 * np.eye(2), g)
    return w


def test_logistic_on_imbalance_beats_chance():
    data = synthetic_data(200_000, seed=5)
    rec = data.records
    labels = compute_labels(rec, data.tick, LabelConfig((1, 10, 50)))
    imb = (rec["bid_sz"][:, 0].astype(float) - rec["ask_sz"][:, 0]) / (rec["bid_sz"][:, 0] + rec["ask_sz"][:, 0])
    w_mask = labels[5, 0] > 0
    half = len(rec) // 2
    train, test = np.flatnonzero(w_mask[:half]), half + np.flatnonzero(w_mask[half:])
    w = logistic_fit(imb[train], labels[0, 0, train])
    acc = np.mean(((w[0] + w[1] * imb[test]) > 0) == (labels[0, 0, test] > 0.5))
    best = best_accuracy_h1()
    se = np.sqrt(0.25 / len(test))
    assert w[1] > 0 and acc > 0.5 + 10 * se  # beats a coin clearly
    assert acc < best + 4 * se  # and never the Bayes bound


@pytest.mark.parametrize("n, n_segments, named", [(0, 1, "n 0"), (2.5, 1, "n 2.5"), (-3, 1, "n -3"),
                                                  (100, 0, "n_segments 0"), (100, 101, "n_segments 101"),
                                                  (100, 1.5, "n_segments 1.5")])
def test_sizes_it_cannot_make_are_refused_naming_them(n, n_segments, named):
    """synthetic_data(0) was an IndexError in the generator; n_segments 0 made one segment without a word, and more
    segments than rows made empty ones."""
    for make in (generate, synthetic_data):
        with pytest.raises(ValueError, match=re.escape(f"synthetic data: {named}: ")):
            make(n, n_segments=n_segments)


def test_one_row_is_the_least_it_makes():
    assert synthetic_data(1).n_rows == 1 and synthetic_data(3, n_segments=3).n_segments == 3


# ---- the interval's trades (sides, prices, volumes) beside the fields the generator always made

NEW_FIELDS = ("feed_delay_ns", "sell_lo_px", "buy_hi_px", "last_px", "sell_lo_vol", "buy_hi_vol", "sell_vol", "buy_vol")
# sha256 of every other field of generate(30_000, 5, market.params, 3 segments, or the market's own), made by the
# generator at 2d34d8b, before it filled the trade fields: drawing those must not move a bit of the rest
FIELDS_AT_2D34D8B = {"easy": "c20945243d37b18fe55ea315553d99ea", "default": "baf81d83a1a9a1bb87b82a5fb4496289",
                     "null": "253725284395b2f8e9f5f439a7643848", "noisy": "606549071cd8cf28cf9bcad24ee6afa4",
                     "wide": "be71159ef34c35d42491872a95dbd1e6", "regime": "c5b6c15519d18fad9b6ca152b70af288",
                     "short": "baf81d83a1a9a1bb87b82a5fb4496289"}


def old_fields_digest(rec):
    h = hashlib.sha256()
    for name in rec.dtype.names:
        if name not in NEW_FIELDS:
            h.update(name.encode())
            h.update(np.ascontiguousarray(rec[name]).tobytes())
    return h.hexdigest()[:32]


@pytest.mark.parametrize("name", sorted(FIELDS_AT_2D34D8B))
def test_trade_fields_leave_every_other_bit_as_it_was(name):
    p = market(name).params
    assert old_fields_digest(generate(30_000, 5, p, 1 if p.segment_rows else 3)) == FIELDS_AT_2D34D8B[name]


def test_trades_follow_the_book():
    """A fall of the bid with a trade: a seller took the previous best bid level; a rise: a buyer took the previous
    best ask level; no move: one trade at the previous touch, below its size; no trade: no trade fields."""
    rec = generate(200_000, 3)
    prev = np.r_[0, np.arange(len(rec) - 1)]
    bid, ask = rec["bid_px"][:, 0], rec["ask_px"][:, 0]
    traded = rec["trade_count"] > 0
    fell, rose = traded & (bid < bid[prev]), traded & (bid > bid[prev])
    still = traded & ~fell & ~rose
    sell, buy = rec["sell_lo_px"] != PRICE_UNDEF, rec["buy_hi_px"] != PRICE_UNDEF
    assert fell.sum() > 1000 and rose.sum() > 1000 and still.sum() > 1000
    assert not (sell & buy).any() and np.array_equal(sell | buy, traded)
    assert np.all(rec["sell_lo_vol"][~sell] == 0) and np.all(rec["buy_hi_vol"][~buy] == 0)
    assert np.all(rec["last_px"][~traded] == PRICE_UNDEF)
    assert np.array_equal(rec["sell_vol"], rec["sell_lo_vol"]) and np.array_equal(rec["buy_vol"], rec["buy_hi_vol"])
    assert np.all(sell[fell]) and np.all(buy[rose])
    assert np.array_equal(rec["sell_lo_px"][fell], bid[prev][fell])
    assert np.array_equal(rec["sell_lo_vol"][fell], rec["bid_sz"][prev, 0][fell])
    assert np.array_equal(rec["buy_hi_px"][rose], ask[prev][rose])
    assert np.array_equal(rec["buy_hi_vol"][rose], rec["ask_sz"][prev, 0][rose])
    s, b = still & sell, still & buy
    assert np.array_equal(rec["sell_lo_px"][s], bid[prev][s]) and np.array_equal(rec["buy_hi_px"][b], ask[prev][b])
    assert 0.45 < s.sum() / still.sum() < 0.55
    for on, vol, size in ((s, "sell_lo_vol", rec["bid_sz"][prev, 0]), (b, "buy_hi_vol", rec["ask_sz"][prev, 0])):
        v, z = rec[vol][on].astype(np.int64), size[on].astype(np.int64)
        assert np.all(v >= 1) and np.all(v < np.maximum(z, 2)) and v.max() > 1
    last = np.where(sell, rec["sell_lo_px"], rec["buy_hi_px"])
    assert np.array_equal(rec["last_px"][traded], last[traded])
    assert np.all(rec["feed_delay_ns"] == 0) and not np.any(rec["flags"] & FLAG_NO_TRADES)


def test_trade_fields_are_seeded():
    a, b, c = generate(3000, 4), generate(3000, 4), generate(3000, 5)
    for f in NEW_FIELDS[1:]:
        assert np.array_equal(a[f], b[f])
    assert not np.array_equal(a["sell_lo_vol"], c["sell_lo_vol"])
