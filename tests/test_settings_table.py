"""The one table of training settings (foxc.trainer.config.SETTINGS): TrainConfig's fields, the flags, a --config
file's keys, a checkpoint's recorded settings and the sweep's axes all come from it, and each reads and checks a
value the same way."""
import argparse
import dataclasses

import pytest

from foxc.sweep.axes import Target
from foxc.trainer.config import (DEFAULTS, FLOAT, INT, SETTINGS, ConfigError, ConfigFile, TrainConfig,
                                 add_config_arguments, parse_settings)
from foxc.trainer.rundir import ResumeError, saved_run

# a value out of each ranged setting's range, as its flag spells it
OUT_OF_RANGE = {"n_backtests": "0", "n_steps": "-1", "seq_len": "129", "per_capacity": "1000", "synthetic_rows": "999",
                "n_step": "9", "seed": "-1", "lots_per_entry": "0", "fee_per_lot": "-1.0", "episode_steps": "-1",
                "horizons": "1,2", "log_every": "0", "checkpoint_every": "-1", "eval_every": "-1", "eval_rows": "999",
                "holdout_frac": "1.0", "val_frac": "-0.5", "val_every": "-1", "device_data_gb": "0.0",
                "rotate_every": "0", "synthetic": "bogus"}


def test_every_field_of_train_config_is_a_row_of_the_table_with_its_flag():
    assert [f.name for f in dataclasses.fields(TrainConfig)] == list(SETTINGS)
    ap = argparse.ArgumentParser()
    actions = {a.dest: a for a in add_config_arguments(ap)}
    assert actions.keys() == SETTINGS.keys()
    for name, s in SETTINGS.items():
        assert actions[name].option_strings == [s.flag]
        default = dataclasses.fields(TrainConfig)[list(SETTINGS).index(name)].default
        assert default is dataclasses.MISSING or default == s.default, name
        assert all(name in DEFAULTS[b] for b in DEFAULTS) or default is not dataclasses.MISSING, name
    assert SETTINGS["n_backtests"].help_text().endswith("(default 1024 on CUDA, 32 on the reference)")
    assert SETTINGS["horizons"].help_text().endswith("(default 10,50,100)") and SETTINGS["data"].help_text() == \
        SETTINGS["data"].help, "no default: the help says what happens"


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_a_flag_and_a_config_file_refuse_a_value_with_one_message(name, tmp_path):
    s, text = SETTINGS[name], OUT_OF_RANGE[name]
    with pytest.raises(ConfigError) as by_flag:
        TrainConfig.for_backend("reference", **parse_settings([f"{s.flag}={text}"]))
    assert str(by_flag.value).startswith(s.flag), str(by_flag.value)
    value = s.kind.parse(text) if s.kind.parse else text
    toml = f"{name} = {list(value) if isinstance(value, tuple) else repr(value) if isinstance(value, str) else value}"
    path = tmp_path / "run.toml"
    path.write_text(toml.replace("'", '"') + "\n")
    with pytest.raises(ConfigError) as by_file:
        ConfigFile.read(path)
    assert str(by_file.value).startswith(f"--config {path}: {name} = ")
    assert str(by_file.value).endswith(f": {by_flag.value}"), (str(by_file.value), str(by_flag.value))


def test_a_setting_is_read_by_its_kind_wherever_it_comes_from(tmp_path):
    for name, s in SETTINGS.items():
        if s.kind is INT:
            with pytest.raises(ConfigError, match="expected an integer"):
                s.value(8.0)
            with pytest.raises(ConfigError, match="expected an integer"):
                s.value(True)
        if s.kind is FLOAT:
            assert s.value(0) == 0.0 if s.problem(0.0) is None else True
            with pytest.raises(ConfigError, match="expected a number"):
                s.value("0.5")
    assert Target.named("n_backtests", "--grid").number == "int" and Target.named("val_frac", "--grid").number == "float"
    assert Target.named("actor", "--grid").number is None
    assert Target.named("horizons", "--grid").parse("2,3,4", "--grid") == (2, 3, 4)


def test_a_checkpoints_settings_are_checked_by_the_table_naming_the_setting():
    config = {"n_backtests": 8, "seq_len": 4, "per_capacity": 64, "synthetic_rows": 20000, "n_steps": 2}
    assert saved_run("ck.foxc", {"config": config, "data": {}})[0] == config
    for key, bad, words in (("n_backtests", "8", "expected an integer"), ("horizons", [1, 2, "x"], "list of integers"),
                            ("isv", [["lr_q"]], "[slot, value] pairs"), ("seq_len", 0, "--seq-len must be 1 to 128"),
                            ("tick", 0.0, "must be from 1e-09")):
        with pytest.raises(ResumeError) as err:
            saved_run("ck.foxc", {"config": {**config, key: bad}, "data": {}})
        assert f"the checkpoint's setting {key} = " in str(err.value) and words in str(err.value), str(err.value)


def test_too_few_rows_to_hold_out_is_a_users_mistake(tmp_path):
    """--holdout on data too short to split was a plain ValueError: a traceback, since foxc.train no longer turns
    every ValueError into one line."""
    from foxc.data.parquet import write_parquet
    from foxc.data.synthetic import generate
    from foxc.trainer.session import run_data
    path = tmp_path / "x.parquet"
    write_parquet(path, generate(50, seed=1))
    cfg = TrainConfig.for_backend("reference", data=str(path), horizons=(1, 2, 3), seq_len=2, holdout_frac=0.99)
    with pytest.raises(ConfigError, match="--holdout 0.99 of 50 rows leaves too few rows"):
        run_data(cfg)


def test_default_precision_by_backend():
    """TF32 on a GPU (bench edge learns as much as in FP32 on every market: BENCHMARKS, "Precision"); FP32 on the
    reference, where TF32 would only emulate the rounding."""
    assert TrainConfig.for_backend("cuda").precision == "tf32"
    assert TrainConfig.for_backend("reference").precision == "f32"
    assert TrainConfig.for_backend("cuda", precision="f32").precision == "f32"
