"""Validation: every skip reason counted, the first reason wins, the report prints and writes JSON."""
import json
import re

import numpy as np
import pytest

from foxc.data import validate
from foxc.data.parquet import write_parquet
from foxc.data.record import PRICE_UNDEF
from foxc.data.source import load
from foxc.data.synthetic import generate
from foxc.data.validate import SKIP_REASONS, DataError, ValidationConfig

CFG = ValidationConfig(min_price=1.0, max_price=100_000.0)


def break_row(rec, i, reason):
    r = rec[i:i + 1].copy()
    if reason == "empty_book":
        r["bid_px"] = PRICE_UNDEF; r["ask_px"] = PRICE_UNDEF
    elif reason == "one_sided":
        r["ask_px"] = PRICE_UNDEF
    elif reason == "nonpositive_price":
        r["bid_px"][0, 9] = -5
    elif reason == "price_out_of_range":
        r["ask_px"][0, 9] = 10**15  # 1,000,000 > max_price
    elif reason == "crossed":
        r["bid_px"][0, :] = r["ask_px"][0, 0] + 1_000_000_000 - np.arange(10) * 250_000_000
    elif reason == "locked":
        r["bid_px"][0, :] = r["ask_px"][0, 0] - np.arange(10) * 250_000_000
    elif reason == "unsorted_levels":
        r["ask_px"][0, 3], r["ask_px"][0, 4] = r["ask_px"][0, 4], r["ask_px"][0, 3]
    elif reason == "trade_volume":  # more sold at the lowest price than sold in all
        r["sell_lo_px"], r["sell_lo_vol"], r["sell_vol"] = r["bid_px"][0, 0], 5, 3
    elif reason == "non_monotonic_ts":
        r["ts_ns"] = rec["ts_ns"][i - 1] - 5
    rec[i:i + 1] = r


@pytest.mark.parametrize("reason", [r for r in SKIP_REASONS if r != "nan_or_inf"])
def test_each_reason_is_counted_and_skipped(reason):
    rec = generate(200, seed=3)
    rows = [17, 90, 151]
    for i in rows:
        break_row(rec, i, reason)
    kept, skipped = validate.apply(rec, None, CFG)
    assert skipped[reason] == 3 and sum(skipped.values()) == 3
    assert len(kept) == 197 and not np.isin(kept["ts_ns"], rec["ts_ns"][rows]).any()


def test_nan_or_inf_from_float_flags():
    rec = generate(50, seed=1)
    bad = np.zeros(50, bool)
    bad[[3, 4]] = True
    kept, skipped = validate.apply(rec, bad, CFG)
    assert skipped["nan_or_inf"] == 2 and len(kept) == 48


def test_first_reason_wins_and_gaps_in_levels():
    rec = generate(20, seed=2)
    rec["ask_px"][5] = PRICE_UNDEF  # one-sided and, with a negative bid, non-positive too
    rec["bid_px"][5, 2] = -1
    rec["bid_px"][8, 3] = PRICE_UNDEF  # a hole in the middle of the book
    rec["bid_sz"][8, 3] = 0
    codes = validate.skip_reasons(rec, None, CFG)
    assert SKIP_REASONS[codes[5] - 1] == "one_sided"
    assert SKIP_REASONS[codes[8] - 1] == "unsorted_levels"
    assert (codes != 0).sum() == 2


def test_a_time_jump_back_skips_only_the_late_rows():
    rec = generate(10, seed=2)
    rec["ts_ns"][4:6] = rec["ts_ns"][3] - 10
    kept, skipped = validate.apply(rec, None, CFG)
    assert skipped["non_monotonic_ts"] == 2 and np.all(np.diff(kept["ts_ns"]) >= 0)


def test_report_summary_and_json(tmp_path):
    rec = generate(300, seed=3)
    break_row(rec, 10, "crossed")
    break_row(rec, 20, "locked")
    break_row(rec, 30, "locked")
    write_parquet(tmp_path / "x.parquet", rec)
    data = load(tmp_path / "x.parquet", CFG)
    assert data.report.skipped() == {"crossed": 1, "locked": 2} and len(data.records) == 297
    text = data.report.summary()
    assert "300 rows read, 297 kept, 3 skipped" in text and "locked" in text
    written = json.loads(data.report.write_json(tmp_path / "run").read_text())
    assert written["skipped"] == {"crossed": 1, "locked": 2}
    assert written["files"][str(tmp_path / "x.parquet")]["rows_kept"] == 297


def test_a_file_with_nothing_usable_is_rejected(tmp_path):
    rec = generate(30, seed=3)
    rec["ask_px"] = PRICE_UNDEF
    write_parquet(tmp_path / "x.parquet", rec)
    with pytest.raises(DataError, match="no usable rows: all 30 skipped \\(30 one_sided\\)"):
        load(tmp_path / "x.parquet")


def test_data_error_is_one_line():
    e = DataError("/d/f.parquet", "wrong type string (expected integer)", row=None, column="bid_px_00")
    assert str(e) == "/d/f.parquet, column 'bid_px_00': wrong type string (expected integer)"
    assert str(DataError("f.dbn", "truncated", row=12)) == "f.dbn, row 12: truncated"


def rough_books(n: int, seed: int, cfg: ValidationConfig) -> tuple[np.ndarray, np.ndarray]:
    """Books broken in every way a level or a trade can be (and thin books that are fine), with bad floats."""
    rng = np.random.default_rng(seed)
    rec = generate(n, seed=seed)
    for i in rng.choice(n, n // 2, replace=False):
        side, lvl = ("bid_px", "ask_px")[rng.integers(2)], rng.integers(10)
        kind = rng.integers(15)
        if kind == 0:
            rec[side][i, lvl:] = PRICE_UNDEF  # a thin book: kept unless the touch goes
        elif kind == 1:
            rec[side][i, lvl] = PRICE_UNDEF  # a hole
        elif kind == 2:
            rec[side][i, lvl] = -rng.integers(0, 2) * 250_000_000
        elif kind == 3:
            rec[side][i, lvl] = cfg.min_units - rng.integers(0, 2)  # at the bound, or just below
        elif kind == 4:
            rec[side][i, lvl] = cfg.max_units + rng.integers(0, 2)
        elif kind == 5:
            rec[side][i, lvl] = rec[side][i, max(0, lvl - 1)]  # equal levels (the touch: locked or crossed)
        elif kind == 6:
            rec["bid_px"][i, 0] = rec["ask_px"][i, 0] + rng.integers(-1, 2) * 250_000_000
        elif kind == 7:
            rec[side][i] = rec[side][i, ::-1]
        elif kind == 8:
            rec["bid_px"][i] = rec["ask_px"][i] = PRICE_UNDEF
        elif kind == 9:
            rec["ts_ns"][i] -= rng.integers(1, 10**7)
        else:  # the trades: a price at or below zero, or out of range; volumes that do not add up
            name, vol, total = (("sell_lo_px", "sell_lo_vol", "sell_vol"), ("buy_hi_px", "buy_hi_vol", "buy_vol"),
                                ("last_px", None, None))[rng.integers(3)]
            rec[name][i] = (-rng.integers(0, 2) * 250_000_000, cfg.min_units - rng.integers(0, 2),
                            cfg.max_units + rng.integers(0, 2), rec["bid_px"][i, 0], PRICE_UNDEF)[kind - 10]
            if vol is not None:
                rec[vol][i] = rng.integers(1, 4)
                rec[total][i] = rec[vol][i] - (kind == 13)  # 13: the price's volume above the side's total
    return rec, rng.random(n) < 0.02


@pytest.mark.parametrize("cfg", [CFG, ValidationConfig(), ValidationConfig(min_price=0.0),
                                 ValidationConfig(min_price=3900.0, max_price=4100.0)])
def test_the_whole_book_check_keeps_only_rows_every_rule_keeps(cfg, monkeypatch):
    """skip_reasons passes most rows by one quick check of whole books; its codes are those of the
    rule-by-rule check alone."""
    rec, bad = rough_books(20_000, 5, cfg)
    fast = validate.skip_reasons(rec, bad, cfg)
    monkeypatch.setattr(validate, "_whole_books", lambda rec, bad, cfg: None)
    slow = validate.skip_reasons(rec, bad, cfg)
    assert np.array_equal(fast, slow)
    assert 0.3 < (slow == 0).mean() < 0.8 and set(np.unique(slow)) == set(range(len(SKIP_REASONS) + 1))


def test_price_bounds_beyond_int64_units_bound_nothing(tmp_path, capsys):
    """--max-price 1e300 is 1e309 price units: int(round(inf)) was an OverflowError traceback. A bound past
    every int64 price passes them all (the lower bound refuses them all)."""
    rec = generate(100, seed=3)
    assert len(validate.apply(rec, None, ValidationConfig(0.0, 1e300))[0]) == 100
    kept, skipped = validate.apply(rec, None, ValidationConfig(1e300, 1e301))
    assert len(kept) == 0 and skipped["price_out_of_range"] == 100
    write_parquet(tmp_path / "x.parquet", rec)
    from foxc.data.__main__ import main
    assert main(["inspect", str(tmp_path / "x.parquet"), "--max-price", "1e300"]) == 0
    assert "100 kept" in capsys.readouterr().out


def test_a_run_whose_rows_validation_mostly_skipped_names_that_not_the_horizons(tmp_path):
    """2,950 of 3,000 rows one-sided: the 50 kept are too few for horizon 50, and the error blamed --horizons
    (the validation summary was not even shown: it is logged once the data is ready)."""
    from foxc.trainer.config import ConfigError, TrainConfig
    from foxc.trainer.session import run_data
    rec = generate(3000, seed=1)
    rec["ask_px"][:2950] = PRICE_UNDEF
    rec["bid_px"][2950:2960, 0] = rec["ask_px"][2950:2960, 0]
    write_parquet(tmp_path / "x.parquet", rec)
    path = tmp_path / "x.parquet"
    # real data is always held out (--holdout 0.1: 36 left), then validated (--val-frac 0.2 of those: 28 train)
    for eval_every, training in ((0, " (28 of them for training)"), (10, " (28 of them for training)")):
        cfg = TrainConfig.for_backend("reference", data=str(path), eval_every=eval_every, holdout_frac=0.1)
        with pytest.raises(ConfigError) as err:
            run_data(cfg)
        assert str(err.value) == (f"--data {path}: validation skipped 2,960 of its 3,000 snapshots (2,950 one_sided, "
                                  f"10 locked): the 40 kept{training} leave no labelled row at horizon 50 of --horizons "
                                  f"10,50,100 (python -m foxc.data inspect {path} shows the skips per file)")
    cfg = TrainConfig.for_backend("reference", data=str(path), eval_every=10, holdout_frac=0.99)
    with pytest.raises(ValueError, match=r"x\.parquet: validation skipped 2,960 of its 3,000 snapshots .*: the 40 kept "
                                         r"are too few to hold out --holdout 0\.99 of them"):
        run_data(cfg)
    write_parquet(path, generate(40, seed=1))  # nothing skipped: the horizon is the cause
    with pytest.raises(ConfigError, match=r"^--horizons 10,50,100: horizon 50 leaves no labelled row in the 28 "):
        run_data(TrainConfig.for_backend("reference", data=str(path)))


@pytest.mark.parametrize("bounds, got", [((10, 1), "min_price 10, max_price 1"), ((-1, 5), "min_price -1, max_price 5"),
                                         ((1, 1), "min_price 1, max_price 1"),
                                         ((float("nan"), 5), "min_price nan, max_price 5"),
                                         (("1", 5), "min_price '1', max_price 5"),
                                         ((0, float("inf")), "min_price 0, max_price inf"),
                                         ((True, 5), "min_price True, max_price 5")])
def test_price_bounds_that_bound_nothing_or_are_no_numbers_are_refused(bounds, got):
    """ValidationConfig(min_price=10, max_price=1) was taken and skipped every row as price_out_of_range."""
    with pytest.raises(ValueError, match=re.escape(f"ValidationConfig: need finite numbers 0 <= min_price < max_price "
                                                   f"(in price), got {got}")):
        ValidationConfig(*bounds)


def test_a_validation_config_that_is_no_validation_config_is_refused_naming_it(tmp_path):
    """load(config={...}) failed with an AttributeError deep in the validator."""
    write_parquet(tmp_path / "x.parquet", generate(100, seed=3))
    with pytest.raises(TypeError, match=re.escape("config must be a ValidationConfig or None, got a dict")):
        load(tmp_path / "x.parquet", config={"min_price": 1.0})


def test_a_negative_size_in_a_parquet_file_is_a_skipped_row_counted_as_such(tmp_path):
    """A signed size column's value below zero was clipped to 0 and the row kept, silently: it is counted as
    `negative_size`, as LOBSTER's is (an empty level's size is not read, and a NaN price's row keeps its count)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    path = tmp_path / "signed.parquet"
    write_parquet(path, generate(300, seed=4))
    table = pq.read_table(path)
    for name, row, value in (("bid_sz_00", 10, -5), ("ask_ct_03", 40, -1), ("ask_sz_09", 70, -2)):
        column = table.column(name).to_numpy().astype(np.int64)
        column[row] = value
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(column))
    px = table.column("ask_px_09").to_numpy().copy()
    px[70] = PRICE_UNDEF  # row 70's negative size is at an empty level: not read
    table = table.set_column(table.schema.get_field_index("ask_px_09"), "ask_px_09", pa.array(px))
    pq.write_table(table, path)
    data = load(path)
    assert data.report.skipped() == {"negative_size": 2}
    assert data.n_rows == 298 and not np.isin(data.records["ts_ns"], generate(300, seed=4)["ts_ns"][[10, 40]]).any()
