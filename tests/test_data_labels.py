"""Labels: the vectorised computation against a naive loop, segment masking, dead band and fees."""
import numpy as np
import pytest

from foxc.data.labels import N_PLANES, PLANES, LabelConfig, balance, balance_counts, compute_labels
from foxc.data.synthetic import generate


def naive_labels(rec, tick, cfg):
    n, H = len(rec), len(cfg.horizons)
    out = np.zeros((N_PLANES, H, n), np.float32)
    for k, h in enumerate(cfg.horizons):
        for i in range(n):
            j = i + h
            if j >= n or rec["segment"][j] != rec["segment"][i]:
                continue
            b0, a0 = int(rec["bid_px"][i, 0]), int(rec["ask_px"][i, 0])
            b1, a1 = int(rec["bid_px"][j, 0]), int(rec["ask_px"][j, 0])
            dmid = (b1 + a1) / 2 - (b0 + a0) / 2
            long_pnl = b1 - a0 - 2 * cfg.fee_units
            short_pnl = b0 - a1 - 2 * cfg.fee_units
            scale = cfg.size_scale_ticks * tick
            out[:, k, i] = [dmid > 0, long_pnl > 0, short_pnl > 0, np.tanh(long_pnl / scale),
                            np.tanh(short_pnl / scale), abs(dmid) > cfg.dead_band_ticks * tick, 1]
    return out


@pytest.mark.parametrize("cfg", [LabelConfig(), LabelConfig((1, 3, 7), 0.5, 0.05, 2.0),
                                 LabelConfig((2, 2, 400), 1.0, 0.0, 8.0)])
def test_labels_match_naive_loop(rng, cfg):
    rec = generate(600, seed=int(rng.integers(1 << 30)), n_segments=int(rng.integers(1, 5)))
    tick = 250_000_000
    got = compute_labels(rec, tick, cfg)
    want = naive_labels(rec, tick, cfg)
    assert got.shape == (N_PLANES, 3, 600) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_labels_never_cross_a_segment():
    rec = generate(300, seed=1, n_segments=3)
    labels = compute_labels(rec, 250_000_000, LabelConfig((10, 50, 100)))
    for k, h in enumerate((10, 50, 100)):
        for end in (100, 200, 300):
            assert not labels[:, k, end - h:end].any()  # every plane is 0 where the horizon leaves the segment
            if h < 100:
                assert labels[6, k, end - h - 1] == 1


def test_dead_band_and_fee():
    rec = generate(2000, seed=2)
    tick = 250_000_000
    loose = compute_labels(rec, tick, LabelConfig((1, 5, 20)))
    banded = compute_labels(rec, tick, LabelConfig((1, 5, 20), dead_band_ticks=1.0))
    assert banded[5].sum() < loose[5].sum()
    fee = compute_labels(rec, tick, LabelConfig((1, 5, 20), fee_per_lot=0.25))
    assert fee[1].sum() < loose[1].sum() and np.all(fee[3] <= loose[3])


def test_balance_rows():
    rec = generate(3000, seed=3)
    rows = balance(balance_counts(compute_labels(rec, 250_000_000)), (10, 50, 100))
    assert [r["horizon"] for r in rows] == [10, 50, 100]
    assert all(0.3 < r["mid_up"] < 0.7 for r in rows)
    assert PLANES[:5] == ("mid_up", "long_win", "short_win", "long_size", "short_size")


def test_bad_horizons():
    with pytest.raises(ValueError):
        LabelConfig((10, 50))
    with pytest.raises(ValueError):
        LabelConfig((0, 5, 10))
