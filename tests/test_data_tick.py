"""--tick T: the tick a run's data is counted in, given instead of inferred (train, walk-forward, sweep, foxc.data
inspect and prepare, one flag definition): instruments of different ticks train together in a tick that divides
theirs; a tick that does not divide an instrument's prices is refused naming it and its file."""
import json
import re

import pytest

from data_files import shift_prices
from foxc.data.parquet import write_parquet
from foxc.data.prepare import prepare
from foxc.data.record import PRICE_UNDEF
from foxc.data.source import load
from foxc.data.synthetic import SynthParams, generate
from foxc.data.validate import DataError
from test_data_cache import ROWS, on_day
from test_run_dirs import SIZES, cli, one_line_error

CENT = 10_000_000  # 0.01 in price units


@pytest.fixture
def es_cl(tmp_path):
    """ESM4 quoted in quarters beside CLN4 quoted in cents: ticks 0.25 and 0.01."""
    folder = tmp_path / "es_cl"
    folder.mkdir()
    write_parquet(folder / "es.parquet", generate(1000, seed=1), symbol="ESM4")
    write_parquet(folder / "cl.parquet", on_day(generate(1000, seed=2, params=SynthParams(
        tick=0.01, start_price=70.0, instrument_id=2)), 1), symbol="CLN4")
    return folder


def test_a_tick_that_divides_every_instruments_serves_them_all_and_another_is_refused(es_cl, tmp_path):
    assert load(es_cl, tick=CENT).tick == CENT
    manifest = prepare(es_cl, tmp_path / "cents", workers=1, rows=ROWS, tick=CENT)
    assert manifest["tick"] == CENT
    want = (f"{es_cl}: --tick 0.05 does not divide the prices of CLN4 (instrument_id 2): tick 0.01 in "
            f"{es_cl / 'cl.parquet'}: give a tick that divides every instrument's (theirs all divide by 0.01)")
    for read in (lambda: load(es_cl, tick=5 * CENT), lambda: prepare(es_cl, tmp_path / "c5", workers=1, rows=ROWS,
                                                                     tick=5 * CENT)):
        with pytest.raises(DataError) as err:
            read()
        assert str(err.value) == want
    assert not (tmp_path / "c5").exists()
    with pytest.raises(DataError, match=re.escape("or --tick T to count them all in a tick that divides theirs "
                                                  "(e.g. --tick 0.01)")):
        load(es_cl)


def test_train_takes_the_tick_as_part_of_the_runs_and_the_caches_identity(es_cl, tmp_path):
    from foxc.data.__main__ import main
    run = tmp_path / "run"
    done = cli("--n-steps", "2", *SIZES, "--data", str(es_cl), "--tick", "0.01", "--out", str(run))
    assert done.returncode == 0 and "tick 0.01," in done.stdout, done.stderr
    assert json.loads((run / "config.json").read_text())["config"]["tick"] == 0.01
    ckpt = str(run / "checkpoint-2.foxc")
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "1", "--tick", "0.005", "--out", str(tmp_path / "r")),
                   "tick: 0.01 in the checkpoint, 0.005 now")
    done = cli("--resume-from", ckpt, "--n-steps", "1", "--out", str(tmp_path / "r"))
    assert done.returncode == 0 and "tick 0.01," in done.stdout, done.stderr
    assert main(["prepare", str(es_cl), "--out", str(tmp_path / "cache"), "--workers", "1", "--tick", "0.01"]) == 0
    one_line_error(cli("--n-steps", "1", *SIZES, "--data", str(tmp_path / "cache"), "--tick", "0.005", "--out",
                       str(tmp_path / "c")), f"--data {tmp_path / 'cache'}: prepared in tick 0.01, not this --tick "
                   "0.005", "give --tick 0.01, or none", "--out NEWCACHE --tick 0.005")
    done = cli("--n-steps", "1", *SIZES, "--data", str(tmp_path / "cache"), "--tick", "0.01", "--out",
               str(tmp_path / "c"))
    assert done.returncode == 0 and "tick 0.01," in done.stdout, done.stderr
    one_line_error(cli("--n-steps", "1", *SIZES, "--tick", "0.01", "--out", str(tmp_path / "s")),
                   "--tick 0.01 sets the tick of --data's files: without --data (synthetic data) it would be ignored")


def test_walkforward_sweep_and_config_files_take_the_one_flag(es_cl, tmp_path, capsys):
    from foxc.cli import UserError
    from foxc.sweep.axes import grid_axis
    from foxc.trainer.config import ConfigError, ConfigFile, TrainConfig, parse_settings
    from foxc.walkforward import load_data, main as walkforward
    assert load_data(str(es_cl), 0, 0, 1, instrument=None, tick=CENT).tick == CENT
    prepare(es_cl, tmp_path / "cache", workers=1, rows=ROWS, tick=CENT)
    assert load_data(str(tmp_path / "cache"), 0, 0, 1, tick=CENT).tick == CENT
    with pytest.raises(DataError, match="prepared in tick 0.01, not this --tick 0.05"):
        load_data(str(tmp_path / "cache"), 0, 0, 1, tick=5 * CENT)
    assert walkforward(["--tick", "0.01", "--out", str(tmp_path / "wf")]) == 2
    assert "--tick 0.01 sets the tick of --data's files: without --data" in capsys.readouterr().err
    with pytest.raises(UserError, match="--grid tick: not an axis: every point must be measured on the same data"):
        grid_axis("tick=0.01,0.05")
    (tmp_path / "run.toml").write_text('data = "books/"\ntick = 0.25\n')
    file = ConfigFile.read(tmp_path / "run.toml")
    assert TrainConfig.for_backend("reference", **parse_settings(file.as_flags())).tick == 0.25
    for value, words in (("0", "must be from 1e-09"), ('"x"', "expected a number")):
        (tmp_path / "run.toml").write_text(f"tick = {value}\n")
        with pytest.raises(ConfigError, match=re.escape(f"tick = {value}: ")) as err:
            ConfigFile.read(tmp_path / "run.toml")
        assert words in str(err.value)
    with pytest.raises(ConfigError, match="--tick: must be from 1e-09"):
        TrainConfig.for_backend("reference", data="x.dbn", tick=0.0)


def test_a_resume_takes_the_tick_its_run_inferred_and_refuses_another(es_cl, tmp_path):
    """A run that inferred its tick records it with its data: a resume given that tick is the same run (an older
    checkpoint, recording none, compares --tick with the inferred run's None as before)."""
    from foxc.trainer.rundir import ResumeError, resume_settings
    run = tmp_path / "run"
    done = cli("--n-steps", "2", *SIZES, "--data", str(es_cl / "es.parquet"), "--out", str(run))
    assert done.returncode == 0 and "tick 0.25," in done.stdout, done.stderr
    record = json.loads((run / "config.json").read_text())
    assert record["config"]["tick"] is None and record["data"]["tick"] == 0.25
    ckpt = str(run / "checkpoint-2.foxc")
    done = cli("--resume-from", ckpt, "--n-steps", "1", "--tick", "0.25", "--out", str(tmp_path / "r"))
    assert done.returncode == 0 and "tick 0.25," in done.stdout, done.stderr
    one_line_error(cli("--resume-from", ckpt, "--n-steps", "1", "--tick", "0.05", "--out", str(tmp_path / "r2")),
                   "tick: 0.25 in the checkpoint, 0.05 now")
    with pytest.raises(ResumeError, match="tick: None in the checkpoint, 0.25 now"):
        resume_settings(ckpt, record["config"], {"tick": 0.25}, data={k: v for k, v in record["data"].items()
                                                                        if k != "tick"})


@pytest.fixture
def off_tick(tmp_path, monkeypatch):
    """ES in quarters but for one level of one row that the tick is not inferred from (TICK_SAMPLE 100: every
    10th of its 1000 rows is sampled), a cent above the quarter: (file, that row's ts_ns, that price)."""
    from foxc.data import market
    monkeypatch.setattr(market, "TICK_SAMPLE", 100)
    rec = generate(1000, seed=1)
    rec["ask_px"][5, 3] += CENT
    write_parquet(tmp_path / "es.parquet", rec, symbol="ESM4")
    return tmp_path / "es.parquet", int(rec["ts_ns"][5]), rec["ask_px"][5, 3]


def test_a_price_off_the_tick_in_a_row_the_tick_is_not_inferred_from_is_refused(off_tick, tmp_path):
    path, ts, price = off_tick
    want = (f"{path}: ask_px_03 {price / 1e9:.2f} at ts_ns {ts} (", ") is off the tick 0.25 (not a whole number "
            "of ticks from 4000, a price of the sampled rows): give a tick dividing both, --tick 0.01 (or a divisor of "
            "it)")
    for tick in (None, 25 * CENT):  # inferred from the sampled rows, or given
        with pytest.raises(DataError) as err:
            load(path, tick=tick)
        assert all(w in str(err.value) for w in want) and "\n" not in str(err.value), str(err.value)
        with pytest.raises(DataError) as err:
            prepare(path, tmp_path / "cache", workers=1, rows=ROWS, tick=tick)
        assert all(w in str(err.value) for w in want), str(err.value)
        assert not (tmp_path / "cache").exists()


def test_prepare_refuses_a_price_off_the_tick_in_one_line(off_tick, tmp_path, capsys):
    from foxc.data.__main__ import main
    path, ts, price = off_tick
    assert main(["prepare", str(path), "--out", str(tmp_path / "cache"), "--workers", "1", "--tick", "0.25"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in (str(path), f"ask_px_03 {price / 1e9:.2f} at ts_ns {ts}", "off the tick 0.25", "--tick 0.01"):
        assert w in err, (w, err)
    assert not (tmp_path / "cache").exists()


def test_prices_whole_ticks_apart_off_the_multiples_of_the_tick_still_load(tmp_path):
    """The tick is the step between prices (features, labels and PnL are differences of prices): a book quoted
    3 cents above the quarters is in quarters; an empty level (PRICE_UNDEF) holds no price."""
    rec = shift_prices(generate(1000, seed=1), 3 * CENT)
    rec["ask_px"][5, 9] = rec["bid_px"][7, 8:] = PRICE_UNDEF
    write_parquet(tmp_path / "es.parquet", rec, symbol="ESM4")
    assert load(tmp_path / "es.parquet").tick == 25 * CENT
    assert prepare(tmp_path / "es.parquet", tmp_path / "cache", workers=1, rows=ROWS)["tick"] == 25 * CENT


def test_the_sampled_rows_are_the_same_however_the_file_is_chunked(tmp_path, monkeypatch):
    """The rows load() infers the tick from are those tick_samples names, however the file is chunked, for the
    second segment of a file that rolls too (its first sampled row carried from the first's)."""
    import numpy as np

    from foxc.data import market, source
    from foxc.data.stream import FileStream
    monkeypatch.setattr(market, "TICK_SAMPLE", 40)  # every 7th of the instrument's 300 rows
    rec = generate(300, seed=1)
    rec["instrument_id"][120:] = 2  # a roll: two segments of one file's instrument
    write_parquet(tmp_path / "roll.parquet", rec)
    whole = np.concatenate(list(FileStream(tmp_path / "roll.parquet")))
    seen = []
    monkeypatch.setattr(source, "infer_tick", lambda where, summaries, samples, tick: seen.append(
        (summaries, samples)) or market.infer_tick(where, summaries, samples, tick))
    for rows in (5, 7, 64, 1000):
        monkeypatch.setattr(source, "FileStream", lambda *args, **kw: FileStream(*args, rows=rows, **kw))
        assert load(tmp_path / "roll.parquet").records.tobytes() == market.finish(whole.copy()).tobytes()
        parts, got = seen.pop()
        ends = np.cumsum([s.rows for s in parts])
        want = [whole[end - s.rows + first:end:step]
                for s, end, (first, step) in zip(parts, ends, market.tick_samples(parts))]
        assert [len(x) for x in got] == [18, 25]
        assert all(np.array_equal(a[["ts_ns", "bid_px", "ask_px"]], b[["ts_ns", "bid_px", "ask_px"]])
                   for a, b in zip(got, want))


@pytest.mark.parametrize("tick", [0, -1, True, 0.25, "250000000", float("nan")])
def test_a_tick_that_is_no_whole_number_of_price_units_is_refused_naming_it(tick, tmp_path):
    """load(tick=0) meant "inferred" (`if tick:`) and -1 or True were taken: None is inferred, else a whole number
    of price units >= 1; prepare() refuses it too, leaving no cache."""
    write_parquet(tmp_path / "es.parquet", generate(500, seed=1))
    for read in (lambda: load(tmp_path / "es.parquet", tick=tick),
                 lambda: prepare(tmp_path / "es.parquet", tmp_path / "cache", workers=1, rows=ROWS, tick=tick)):
        with pytest.raises(ValueError, match=re.escape(f"tick must be a whole number of price units >= 1 (price × "
                                                       f"1e9: 250_000_000 is a tick of 0.25), got {tick!r}")):
            read()
    assert not (tmp_path / "cache").exists()


def test_a_tick_of_none_is_inferred_and_a_whole_float_is_taken_as_an_int(tmp_path):
    write_parquet(tmp_path / "es.parquet", generate(500, seed=1))
    quarter = SynthParams().tick_units
    assert load(tmp_path / "es.parquet", tick=None).tick == quarter
    got = load(tmp_path / "es.parquet", tick=float(quarter)).tick
    assert got == quarter and type(got) is int
