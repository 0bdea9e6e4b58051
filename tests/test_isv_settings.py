"""Settable hyperparameters: each ISV slot's range, --set, --config FILE.toml, resume with overrides
and `python -m foxc.isv`."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from foxc.checkpoint import read_checkpoint
from foxc.isv import __main__ as isv_cli
from foxc.isv.registry import N_SLOTS, SLOTS, Internal, Range, setting_problem, slot, slot_index
from foxc.trainer.config import (DEFAULTS, ConfigError, ConfigFile, TrainConfig, inline_config_file,
                                 parse_settings)

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--synthetic-rows", "20000",
         "--log-every", "4", "--eval-rows", "2000"]
# settings a controller moves as the run goes: the value set is where it starts
CONTROLLED = {"lr_encoder", "lr_q", "lr_policy", "lr_value", "lr_perception", "per_beta", "gate_threshold", "gamma",
              "tau", "per_alpha"}


def config(**given) -> TrainConfig:
    return TrainConfig.for_backend("reference", **given)


def toml(tmp_path, text: str, name: str = "run.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(call, *words):
    with pytest.raises(ConfigError) as e:
        call()
    for word in words:
        assert word in str(e.value), (word, str(e.value))
    return str(e.value)


# ------------------------------------------------------------------------------------------ ranges

def test_every_slot_is_a_setting_with_its_default_in_range_or_internal():
    for s in SLOTS:
        assert isinstance(s.valid, (Range, Internal)), s.name
        if s.settable:
            assert s.bootstrap in s.valid, f"{s.name}: the default {s.bootstrap} is outside {s.valid}"
            assert setting_problem(s.name, s.bootstrap) is None
        else:
            assert s.valid.kind in ("state", "run", "unused"), s.name
    state = {s.name for s in SLOTS if not s.settable and s.valid.kind == "state"}
    owned = {"step_lo", "step_hi", "popart_mean", "popart_var", "mean_abs_pnl_ema", "hold_frac_ema",
             "action_entropy_ema", "reward_clip_frac_ema", "reward_pos_ema", "reward_neg_ema"}
    owned |= {f"{k}_{h}" for k in ("loss_ema", "best_loss", "plateau_count") for h in ("q", "pi", "v", "bce")}
    assert owned <= state, owned - state


def _kernel_sources() -> str:
    """Every kernel source and header but the generated slot list, comments left out."""
    code = "\n".join(p.read_text() for p in sorted((ROOT / "cuda").rglob("*")) if p.suffix in (".cu", ".cuh", ".h")
                     and p.name != "isv_slots.h")
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", code, flags=re.S)


def test_what_the_kernels_write_is_state_or_a_controlled_setting():
    """A slot a kernel writes is the trainer's, unless it is a setting a controller starts from."""
    code = _kernel_sources()
    written = set(re.findall(r"isv\[(ISV_\w+)\]\s*[-+*/]?=(?!=)", code))
    written |= set(re.findall(r"ISV_\w+", " ".join(re.findall(r"plateau_head\(isv,[^;]*;", code))))
    by_macro = {s.macro: s for s in SLOTS}
    for macro in written:
        s = by_macro[macro]
        assert not s.settable or s.name in CONTROLLED, f"a kernel writes {s.name}, which a user may set"
    for s in SLOTS:
        if not s.settable and s.valid.kind == "state":
            assert s.macro in written, f"{s.name} is called state, but no kernel writes it"


def test_unused_slots_are_read_by_no_kernel():
    others = _kernel_sources()
    for s in SLOTS:
        if not s.settable and s.valid.kind == "unused":
            assert not re.search(rf"\b{s.macro}\b", others), f"{s.name} is called unused, but a kernel reads it"


def _outside(r: Range) -> list[float]:
    """Values just outside a range (at an open end, the end itself)."""
    step, values = 1 if r.integer else 1e-3, []
    if not math.isinf(r.lo):
        values.append(r.lo if r.lo_open else r.lo - step)
    if not math.isinf(r.hi):
        values.append(r.hi if r.hi_open else r.hi + step)
    return values


@pytest.mark.parametrize("s", [s for s in SLOTS if s.settable], ids=lambda s: s.name)
def test_set_refuses_a_value_outside_the_range_naming_the_slot(s):
    assert _outside(s.valid), f"{s.name} has no bound at all"
    for value in _outside(s.valid):
        refused(lambda: config(isv=[(s.name, value)], n_step=8), f"--set {s.name}:", f"must be {s.valid.requirement()} (got")
    for bad in (math.nan, math.inf):
        refused(lambda: config(isv=[(s.name, bad)]), f"--set {s.name}:", "finite")


def test_set_accepts_the_bounds_and_refuses_state_unused_and_unknown_slots():
    cfg = config(isv=[("lr_q", 1.0), ("gamma", 0.9999), ("gamma", 0.0), ("per_alpha", 1.0), ("gate_enabled", 1.0),
                      ("grad_clip_norm", 0.0), ("c51_v_min", -0.5), ("n_step", 2.0)])
    assert dict(cfg.isv) == {"lr_q": 1.0, "gamma": 0.0, "per_alpha": 1.0, "gate_enabled": 1.0,
                             "grad_clip_norm": 0.0, "c51_v_min": -0.5, "n_step": 2.0}, "one entry per slot, last wins"
    for value in (0.0, 2.5):
        refused(lambda: config(isv=[("n_step" if value else "lr_q", value)]), "must be")
    refused(lambda: config(isv=[("gate_enabled", 0.5)]), "gate_enabled", "0 or 1")
    refused(lambda: config(isv=[("popart_var", 2.0)]), "--set popart_var", "state the trainer owns")
    refused(lambda: config(isv=[("reward_clamp_lo", -7.0)]), "reward_clamp_lo", "state", "reward_clamp_min")
    refused(lambda: config(isv=[("plateau_count_q", 0.0)]), "plateau_count_q", "state the trainer owns")
    refused(lambda: config(isv=[("entropy_coef", 0.1)]), "entropy_coef", "read by no kernel")
    refused(lambda: config(isv=[("gama", 0.9)]), "--set gama", "no ISV slot named 'gama'", "did you mean gamma?")
    refused(lambda: config(isv=[("zzzz", 1.0)]), "zzzz", "python -m foxc.isv lists them")


def test_slots_are_checked_against_the_settings_they_depend_on():
    refused(lambda: config(isv=[("n_step", 5.0)]), "n_step = 5", "--n-step 3", "give --n-step 5")
    assert config(n_step=5, isv=[("n_step", 5.0)]).n_step == 5
    refused(lambda: config(isv=[("reward_clamp_min", 12.0)]), "reward_clamp_min = 12", "reward_clamp_max = 10")
    assert config(isv=[("reward_clamp_min", 12.0), ("reward_clamp_max", 12.0)])


def test_a_switch_and_its_slot_are_one_setting_recorded_as_it_runs(tmp_path):
    refused(lambda: config(gate="on", isv=[("gate_enabled", 0.0)]), "ISV gate_enabled = 0 contradicts --gate on",
            "gate_enabled = 1", "give one of them")
    refused(lambda: config(loss_clamp="symmetric", isv=[("reward_clamp_mode", 1.0)]),
            "ISV reward_clamp_mode = 1 contradicts --loss-clamp symmetric")
    cfg = config(isv=[("gate_enabled", 1.0), ("reward_clamp_mode", 1.0)])  # a --set alone: the switch follows it
    assert (cfg.gate, cfg.loss_clamp) == ("on", "seed") and config(**cfg.as_dict()) == cfg
    assert config(gate="off", isv=[("gate_enabled", 0.0)]).gate == "off"
    assert dict(config(gate="on").isv_overrides())["gate_enabled"] == 1.0
    path = toml(tmp_path, 'gate = "on"\n')  # the flag from a file, the slot from --set: the error names the file
    file = ConfigFile.read(path)
    given = {"isv": (("gate_enabled", 0.0),)}
    with pytest.raises(ConfigError) as e:
        config(**file.under(given))
    assert str(file.blame(e.value, given)).startswith(f"--config {path}: ISV gate_enabled = 0 contradicts --gate on")
    assert file.blame(e.value, {**given, "gate": "on"}) is e.value, "the flag on the command line is at fault"
    from foxc.trainer.rundir import saved_run  # a checkpoint of earlier code recorded both: the slot is what ran
    saved = {"n_backtests": 8, "seq_len": 4, "per_capacity": 64, "synthetic_rows": 20000, "n_steps": 2, "gate": "on",
             "isv": [["gate_enabled", 0.0]]}
    assert saved_run("ckpt.foxc", {"config": saved, "data": {}})[0] == saved


# ------------------------------------------------------------------------------------ --config FILE

GOOD = """# a run
n_backtests = 16
synthetic = "easy"
horizons = [5, 10, 20]
fee_per_lot = 0          # an integer where a number is wanted
gate = "on"

[isv]
lr_q = 3e-4
gamma = 0.98
"""


def test_a_config_file_gives_settings_under_the_command_line(tmp_path):
    path = toml(tmp_path, GOOD)
    settings = parse_settings(["--config", str(path), "--n-backtests", "4", "--set", "lr_q=1e-3",
                               "--set", "tau=0.01"])
    cfg = config(**settings)
    assert (cfg.n_backtests, cfg.synthetic, cfg.horizons, cfg.fee_per_lot, cfg.gate) == (4, "easy", (5, 10, 20),
                                                                                         0.0, "on")
    assert cfg.isv == (("lr_q", 1e-3), ("gamma", 0.98), ("tau", 0.01)), "--set over the file's [isv]"
    assert cfg.seq_len == DEFAULTS["reference"]["seq_len"] and cfg.n_step == 3, "the defaults under both"
    assert ConfigFile.read(path).as_dict() == {
        "path": str(path.resolve()), "isv": {"lr_q": 3e-4, "gamma": 0.98},
        "settings": {"n_backtests": 16, "synthetic": "easy", "horizons": [5, 10, 20], "fee_per_lot": 0.0,
                     "gate": "on"}}


def test_a_config_file_inlined_as_flags_means_the_same(tmp_path):
    path = toml(tmp_path, GOOD)
    argv = ["--n-step", "2", "--config", str(path), "--set", "gamma=0.9"]
    flags = inline_config_file(argv)
    assert "--config" not in " ".join(flags) and flags[-4:] == ["--n-step", "2", "--set", "gamma=0.9"]
    assert config(**parse_settings(flags)) == config(**parse_settings(argv))
    assert config(**parse_settings(flags)).isv == (("lr_q", 3e-4), ("gamma", 0.9))
    refused(lambda: inline_config_file(["--config", str(path)], {"synthetic": "--synthetic"}),
            str(path), "synthetic", "--synthetic")
    assert inline_config_file(["--n-step", "2"]) == ["--n-step", "2"]


@pytest.mark.parametrize("text, words", [
    ("n_backtests = 8\nseq_len = \n", ["not valid TOML", "line 2"]),
    ("n_backtest = 8\n", ["unknown setting 'n_backtest'", "did you mean n_backtests?"]),
    ("lots = 2\n", ["unknown setting 'lots'", "--lots", "lots_per_entry"]),
    ("n-backtests = 2\n", ["unknown setting 'n-backtests'", "n_backtests"]),
    ("out = \"runs/x\"\n", ["unknown setting 'out'", "[isv]"]),
    ("n_backtests = \"8\"\n", ["n_backtests = \"8\"", "expected an integer"]),
    ("n_backtests = 8.0\n", ["n_backtests", "expected an integer"]),
    ("holdout_frac = true\n", ["holdout_frac = true", "expected a number"]),
    ("gate = true\n", ["gate = true", "one of \"on\", \"off\""]),
    ("precision = \"f16\"\n", ["precision", "\"f32\""]),
    ("horizons = \"10,50,100\"\n", ["horizons", "a list of integers"]),
    ("n_backtests = 0\n", ["n_backtests = 0", "--n-backtests must be 1 to 65536"]),
    ("synthetic = \"bogus\"\n", ["synthetic = \"bogus\"", "must be one of"]),
    ("data = \"\"\n", ["data = \"\"", "--data: an empty path (give a file, directory, glob or prepared cache"]),
    ("data = 3\n", ["data = 3", "expected a string"]),
    ("isv = 3\n", ["isv must be a table"]),
    ("[isv]\nlr_q = \"fast\"\n", ["[isv] lr_q = \"fast\"", "expected a number"]),
    ("[isv]\nlr_q = 2\n", ["[isv] lr_q:", "must be in (0, 1] (got 2)"]),
    ("[isv]\nlr_q = nan\n", ["[isv] lr_q:", "finite"]),
    ("[isv]\npopart_mean = 1\n", ["[isv] popart_mean:", "state the trainer owns"]),
    ("[isv]\nlr_qq = 1e-3\n", ["[isv] lr_qq:", "did you mean lr_q?"]),
    ("[isv.lr_q]\nx = 1\n", ["[isv] lr_q", "expected a number"]),
])
def test_a_bad_config_file_is_refused_naming_the_file_and_the_key(tmp_path, text, words):
    path = toml(tmp_path, text)
    message = refused(lambda: ConfigFile.read(path), f"--config {path}:", *words)
    assert "\n" not in message


def test_a_config_files_data_is_a_path_setting(tmp_path):
    """--data's type is a path flag's (foxc.paths.PathArg), no longer a plain string: the file's data still reads."""
    assert ConfigFile.read(toml(tmp_path, "data = \"books/*.dbn\"\n")).as_dict()["settings"] == {"data": "books/*.dbn"}


def test_a_missing_or_unreadable_config_file_is_refused_naming_it(tmp_path):
    refused(lambda: ConfigFile.read(tmp_path / "none.toml"), "--config", "none.toml", "no such file")
    refused(lambda: ConfigFile.read(tmp_path), "--config", "is a directory")
    (tmp_path / "latin1.toml").write_bytes(b"synthetic = \"\xe9\"\n")
    refused(lambda: ConfigFile.read(tmp_path / "latin1.toml"), "latin1.toml", "UTF-8")


def test_a_slot_of_the_file_at_odds_with_a_flag_names_the_file(tmp_path):
    path = toml(tmp_path, "[isv]\nn_step = 5\n")
    file = ConfigFile.read(path)
    with pytest.raises(ConfigError) as e:
        config(**file.under({}))
    assert str(file.blame(e.value, {})).startswith(f"--config {path}: [isv] n_step = 5 is above --n-step 3")
    assert file.blame(e.value, {"isv": (("n_step", 5.0),)}) is e.value, "a --set of the slot is the one at fault"
    assert config(**file.under({"n_step": 5})).isv == (("n_step", 5.0),)


def test_synthetic_settings_beside_data_are_refused_naming_both_and_the_file(tmp_path):
    from foxc.trainer.config import check_synthetic_beside_data as check
    refused(lambda: check({"data": "a.parquet", "synthetic_rows": 5000}), "--synthetic-rows 5000", "--data a.parquet")
    refused(lambda: check({"data": "a.parquet", "synthetic_segments": 2}), "--synthetic-segments 2")
    path = toml(tmp_path, 'data = "a.parquet"\n')
    file = ConfigFile.read(path)
    given = {"synthetic": "easy"}
    refused(lambda: check(file.under(given), file.sources(given)), "--synthetic easy is a setting of synthetic data",
            f"--data a.parquet (from --config {path})")
    check({"synthetic": "easy", "synthetic_rows": 5000})  # synthetic data: nothing to refuse
    check({"data": "a.parquet", "synthetic": None})  # a walk-forward's flag not given


def test_a_walk_forward_gives_its_folds_the_files_settings(tmp_path):
    from foxc import walkforward
    path = toml(tmp_path, "n_backtests = 8\nseq_len = 4\nper_capacity = 64\nlog_every = 6\n"
                          "[isv]\nexplore_hold_steps = 4\ngamma = 0.98\n")
    out = tmp_path / "wf"
    rc = walkforward.main(["--backend", "reference", "--folds", "2", "--steps-per-fold", "6", "--synthetic-rows",
                           "30000", "--out", str(out), "--no-plots", "--config", str(path), "--set", "gamma=0.95"])
    assert rc in (0, 1)
    report = json.loads((out / "report.json").read_text())
    assert not [a for a in report["train_args"] if "config" in a], "a fold elsewhere could not read the file"
    for fold in (0, 1):
        meta = read_checkpoint(out / f"fold-{fold}" / "checkpoint-6.foxc").config
        assert (meta["n_backtests"], meta["seq_len"]) == (8, 4)
        assert meta["isv"] == [["explore_hold_steps", 4.0], ["gamma", 0.95]]


# ------------------------------------------------------------------------ the CLI: record and resume

def train(*args):
    return subprocess.run([sys.executable, "-m", "foxc.train", "--backend", "reference", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def bus(path, name):
    return float(read_checkpoint(path)["isv"][slot_index(name)])


def test_overrides_are_recorded_kept_on_resume_and_set_on_top(tmp_path):
    cfg_file = toml(tmp_path, "seq_len = 4\n[isv]\nexplore_hold_steps = 8\ngamma = 0.98\n")
    run = tmp_path / "run"
    done = train("--n-steps", "4", *SMALL, "--config", str(cfg_file), "--set", "gamma=0.97", "--out", str(run))
    assert done.returncode == 0, done.stderr
    record = json.loads((run / "config.json").read_text())
    assert record["config"]["isv"] == [["explore_hold_steps", 8.0], ["gamma", 0.97]]
    assert record["config_file"] == {"path": str(cfg_file.resolve()), "settings": {"seq_len": 4},
                                     "isv": {"explore_hold_steps": 8.0, "gamma": 0.98}}
    first = run / "checkpoint-4.foxc"
    assert read_checkpoint(first).config["isv"] == record["config"]["isv"]
    assert bus(first, "explore_hold_steps") == 8.0 and bus(first, "gamma") == pytest.approx(0.97)

    kept = train("--resume-from", str(first), "--n-steps", "2")  # no overrides: the checkpoint's are kept
    assert kept.returncode == 0, kept.stderr
    assert "ISV " not in kept.stdout, "nothing was set on resuming"
    assert json.loads((run / "config.json").read_text())["config"]["isv"] == record["config"]["isv"]
    assert bus(run / "checkpoint-6.foxc", "explore_hold_steps") == 8.0

    done = train("--resume-from", str(run / "checkpoint-6.foxc"), "--n-steps", "2", "--set", "explore_hold_steps=16",
                 "--set", "lr_q=5e-4")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("resumed from"))
    assert lines[at + 1:at + 3] == ["ISV explore_hold_steps: 8 → 16 (set on resuming)",
                                    "ISV lr_q: 0.0001 → 0.0005 (set on resuming)"], lines
    record = json.loads((run / "config.json").read_text())
    merged = [["explore_hold_steps", 16.0], ["gamma", 0.97], ["lr_q", 5e-4]]
    assert record["config"]["isv"] == merged and record["resumed_from"].endswith("checkpoint-6.foxc")
    assert record["isv_set_on_resume"][0] == {"slot": "explore_hold_steps", "old": 8.0, "new": 16.0}
    last = run / "checkpoint-8.foxc"
    assert read_checkpoint(last).config["isv"] == merged
    assert bus(last, "explore_hold_steps") == 16.0 and bus(last, "gamma") == pytest.approx(0.97)


def test_the_gate_flag_and_its_slot_cannot_disagree_and_config_json_records_the_gate_that_ran(tmp_path):
    done = train("--n-steps", "2", *SMALL, "--gate", "on", "--set", "gate_enabled=0", "--out", str(tmp_path / "no"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "ISV gate_enabled = 0 contradicts --gate on" in done.stderr and not (tmp_path / "no").exists()
    run = tmp_path / "run"
    done = train("--n-steps", "2", *SMALL, "--set", "gate_enabled=1", "--checkpoint-every", "0", "--out", str(run))
    assert done.returncode == 0, done.stderr
    assert json.loads((run / "config.json").read_text())["config"]["gate"] == "on"
    assert bus(run / "checkpoint-2.foxc", "gate_enabled") == 1.0
    done = train("--resume-from", str(run / "checkpoint-2.foxc"), "--n-steps", "2", "--set", "gate_enabled=0")
    assert done.returncode == 0, done.stderr
    record = json.loads((run / "config.json").read_text())["config"]
    assert (record["gate"], record["isv"]) == ("off", [["gate_enabled", 0.0]]), "set on resuming: the gate is off"
    assert bus(run / "checkpoint-4.foxc", "gate_enabled") == 0.0


def test_resume_still_refuses_other_shapes_and_bad_overrides(tmp_path):
    run = tmp_path / "run"
    assert train("--n-steps", "2", *SMALL, "--checkpoint-every", "0", "--out", str(run)).returncode == 0
    ckpt = str(run / "checkpoint-2.foxc")
    shape = toml(tmp_path, "seq_len = 8\n")
    for argv, words in ((["--config", str(shape)], ["seq_len", "4", "8", f"--config {shape}"]),
                        (["--set", "popart_var=2"], ["--set popart_var", "state"]),
                        (["--set", "n_step=4"], ["n_step = 4", "--n-step 3"])):
        done = train("--resume-from", ckpt, "--n-steps", "1", *argv)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert all(w in done.stderr for w in words), (words, done.stderr)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2.foxc"], "a refused resume ran"


def test_a_checkpoints_setting_no_longer_accepted_leaves_only_the_record():
    from foxc.train import kept_isv
    lines = []
    kept = kept_isv([["lr_q", 2e-4], ["entropy_coef", 0.05], ["gamma", 1.0]], lines.append)
    assert kept == (("lr_q", 2e-4),)
    assert len(lines) == 2 and "entropy_coef = 0.05" in lines[0] and "gamma = 1" in lines[1]
    assert all(line.startswith("note: the checkpoint's ISV setting") for line in lines)


# ------------------------------------------------------------------------------- python -m foxc.isv

def isv(*args):
    return subprocess.run([sys.executable, "-m", "foxc.isv", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


def test_the_listing_shows_every_slot_with_its_default_range_and_meaning():
    done = isv()
    assert done.returncode == 0 and not done.stderr, done.stderr
    rows = [line for line in done.stdout.splitlines() if re.match(r"\s*\d+  ", line)]
    assert len(rows) == N_SLOTS
    for s, row in zip(SLOTS, rows):
        index, name, default, rest = row.split(None, 3)
        assert (int(index), name, float(default)) == (s.index, s.name, float(f"{s.bootstrap:g}"))
        assert rest.startswith(str(s.valid)) and s.doc in rest, row
    assert isv("list").stdout == done.stdout
    gamma = rows[slot_index("gamma")]
    assert "[0, 0.9999]" in gamma and "popart_var" in rows[16] and " state " in rows[16]


def test_the_json_listing_round_trips_the_registry():
    doc = json.loads(isv("--json").stdout)
    assert [r["name"] for r in doc["slots"]] == [s.name for s in SLOTS]
    by = {r["name"]: r for r in doc["slots"]}
    assert by["lr_q"]["settable"] and (by["lr_q"]["lo"], by["lr_q"]["hi"], by["lr_q"]["lo_open"]) == (0.0, 1.0, True)
    assert by["c51_v_max"]["hi"] is None and by["n_step"]["integer"] and not by["popart_mean"]["settable"]
    assert by["entropy_coef"]["range"] == "unused" and by["step_lo"]["range"] == "state"


def test_show_one_slot_and_refuse_an_unknown_name():
    done = isv("tau")
    assert done.returncode == 0 and done.stdout == isv("show", "tau").stdout
    assert "tau (slot 8, ISV_TAU)" in done.stdout and "(0, 1]" in done.stdout and "--set tau=VALUE" in done.stdout
    assert json.loads(isv("show", "n_step", "--json").stdout)["range"] == "1..8"
    assert "no: state the trainer owns" in isv("popart_mean").stdout
    bad = isv("gama")
    assert bad.returncode == 2 and bad.stderr.strip() == \
        "foxc.isv: error: no ISV slot named 'gama' (did you mean gamma?)"


def test_the_command_defaults_leave_room_for_more_commands():
    assert isv_cli.with_command([]) == ["list"]
    assert isv_cli.with_command(["--json"]) == ["list", "--json"]
    assert isv_cli.with_command(["lr_q"]) == ["show", "lr_q"]
    assert isv_cli.with_command(["show", "lr_q"]) == ["show", "lr_q"]
    assert set(isv_cli.COMMANDS) == {"list", "show", "set"}
    assert isv_cli.with_command(["set", "runs/a", "lr_q=1e-3"]) == ["set", "runs/a", "lr_q=1e-3"]
    assert slot("lr_q").settable
