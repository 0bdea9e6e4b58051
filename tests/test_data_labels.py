"""Labels: the vectorised computation against a naive loop, segment masking, dead band and fees."""
import re

import numpy as np
import pytest

from foxc.data.labels import N_PLANES, PLANES, LabelConfig, balance, balance_counts, compute_labels
from foxc.data.record import SNAPSHOT_DTYPE
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


@pytest.mark.parametrize("tick", [0, -250_000_000, 0.25, True, None])
def test_a_tick_that_is_no_whole_number_of_price_units_is_refused(tick):
    """compute_labels(rec, 0) divided by zero (sizes NaN, every mid move past the dead band) and 0.25 (the tick in
    price, not in price units) gave labels in units 1e9 too small: refused, naming the value."""
    with pytest.raises(ValueError, match=re.escape(f"tick must be a whole number of price units >= 1 (price × 1e9: "
                                                   f"250_000_000 is a tick of 0.25), got {tick!r}")):
        compute_labels(generate(100, seed=1), tick)


@pytest.mark.parametrize("records, got", [(np.zeros((100, 3)), "float64 (100, 3)"), ([1, 2], "list"),
                                          (np.zeros((2, 50), SNAPSHOT_DTYPE), f"{SNAPSHOT_DTYPE} (2, 50)")])
def test_records_that_are_no_snapshot_array_are_refused_naming_what_they_are(records, got):
    """A float array was an IndexError ('only integers, slices ... are valid indices') deep in the labelling."""
    with pytest.raises(ValueError, match=re.escape("records must be a 1-D array of SNAPSHOT_DTYPE records (a "
                                                   f"MarketData's .records), got {got}")):
        compute_labels(records, 250_000_000)


@pytest.mark.parametrize("settings, got", [
    (dict(horizons=(1.5, 5, 10)), "horizons (1.5, 5, 10)"), (dict(horizons=(True, 5, 10)), "horizons (True, 5, 10)"),
    (dict(horizons=10), "horizons 10"), (dict(size_scale_ticks=0), "size_scale_ticks 0"),
    (dict(dead_band_ticks=float("nan")), "dead_band_ticks nan"), (dict(fee_per_lot=-1), "fee_per_lot -1")])
def test_label_settings_that_label_nothing_sensible_are_refused_naming_them(settings, got):
    """horizons (1.5, 5, 10) passed int(h) >= 1 and failed slicing with a TypeError; size_scale_ticks 0 divided by
    zero."""
    with pytest.raises(ValueError, match=re.escape(f"LabelConfig: {got}")):
        LabelConfig(**settings)


def test_label_settings_that_are_no_label_config_are_refused():
    with pytest.raises(TypeError, match=r"^cfg must be a foxc\.data\.labels\.LabelConfig, got a dict$"):
        compute_labels(generate(100, seed=1), 250_000_000, {"horizons": (1, 2, 3)})


def test_whole_horizons_are_kept_as_ints():
    assert LabelConfig([np.int64(10), 50.0, 100]).horizons == (10, 50, 100)


@pytest.mark.parametrize("horizons", ["1", "10,50"])
def test_inspect_refuses_horizons_not_three_naming_the_flag_before_reading(horizons, tmp_path, capsys):
    """inspect --horizons 1 printed the whole summary, then "three horizons >= 1 are needed" naming no flag."""
    from foxc.data.__main__ import main
    from foxc.data.parquet import write_parquet
    write_parquet(tmp_path / "x.parquet", generate(100, seed=1))
    assert main(["inspect", str(tmp_path / "x.parquet"), "--horizons", horizons]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"foxc.data inspect: error: --horizons {horizons}: give three horizons\n"
