"""python -m foxc.evaluate: a checkpoint trained here (reference backend, a few steps) evaluated on a synthetic market
and on real-format files, beside flat and the yardstick; its figures are a direct Evaluator run's; its refusals are
one line and exit status 2."""
import json
import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest

from data_files import dbn_bytes, write_lobster
from foxc import train
from foxc.checkpoint import CheckpointSaver, read_checkpoint
from foxc.data.markets import MARKETS
from foxc.data.market import MarketData
from foxc.data.parquet import write_parquet
from foxc.data.source import load
from foxc.data.synthetic import SynthParams, generate, synthetic_data
from foxc.driver import open_runtime
from foxc.evaluate import command
from foxc.evaluate.agent import AgentPolicy
from foxc.evaluate.baseline import TRAINER as BASELINE
from foxc.evaluate.optimum import market_optimum
from foxc.evaluate.runner import EvalConfig, Evaluator

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ["--backend", "reference", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--n-steps", "20",
         "--log-every", "10", "--synthetic", "easy", "--synthetic-rows", "5000", "--eval-rows", "1000"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A small agent trained on the synthetic market `easy` (seed 0), 20 steps: its figures are whatever they are;
    the evaluation must report them as the Evaluator finds them."""
    out = tmp_path_factory.mktemp("trained") / "run"
    assert train.main([*TRAIN, "--out", str(out)]) == 0
    return next(out.glob("checkpoint-*.foxc"))


def evaluate(capsys, *argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the command; argparse's refusals exit through SystemExit."""
    capsys.readouterr()
    try:
        code = command.main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def direct(records, tick, config: EvalConfig, policy_of) -> dict:
    """The figures of an Evaluator run over `records`, as the JSON holds them (its floats and ints, read back)."""
    rt = open_runtime("reference")
    with Evaluator(records, config, tick=tick, rt=rt) as evaluator:
        metrics = evaluator.run(policy_of(rt)).metrics
    return json.loads(json.dumps(metrics))


def agent(checkpoint):
    return lambda rt: AgentPolicy.from_checkpoint(rt, read_checkpoint(checkpoint))


def yardstick(fit_records, tick, folder: Path):
    """The baseline fitted on `fit_records` on its own, as the walk-forward fits its yardstick."""
    ckpt = BASELINE.train(MarketData(fit_records, "", 0, "test", [], tick), 50, folder, {})
    return lambda rt: BASELINE.load_policy(ckpt, {})


def by_role(record: dict) -> dict:
    return {p["role"]: p for p in record["policies"]}


def test_a_synthetic_market(checkpoint, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code, text, err = evaluate(capsys, checkpoint, "--synthetic", "easy", "--rows", 4000, "--n-backtests", 16,
                               "--backend", "reference", "--json", out)
    assert code == 0 and err == ""
    record = json.loads(out.read_text())
    policies = by_role(record)
    assert list(policies) == ["agent", "flat", "yardstick"]
    assert record["data"] == {"source": "synthetic", "market": "easy", "seed": 7919, "rows": 4000,
                              "evaluated_rows": 4000, "fit_seed": 7920, "fit_rows": 4000, "tick": 0.25}
    assert record["settings"] == {"fee_per_lot": 0.0, "fee_from": "the market easy's own", "lots_per_entry": 1,
                                  "lots_from": "the checkpoint's", "n_backtests": 16, "chunks": 16}
    flat = policies["flat"]
    assert flat["trades"] == 0 and flat["net_pnl"] == 0 and flat["pnl_ticks"] == 0 and flat["opt_frac"] == 0
    assert all(p["metrics"]["steps"] == 4000 for p in policies.values())

    held = synthetic_data(4000, seed=7919, params=MARKETS["easy"].params)  # the checkpoint's seed 0 + 7919
    config = EvalConfig(n_backtests=16)
    assert policies["agent"]["metrics"] == direct(held.records, held.tick, config, agent(checkpoint))
    fit = synthetic_data(4000, seed=7920, params=MARKETS["easy"].params)
    assert policies["yardstick"]["metrics"] == direct(held.records, held.tick, config,
                                                      yardstick(fit.records, fit.tick, tmp_path / "y"))
    assert record["yardstick_fit"]["rows"] == 4000 and record["yardstick_fit"]["labelled"] > 0
    optimum = market_optimum(MARKETS["easy"])
    assert record["optimum_ticks_per_snapshot"] == pytest.approx(optimum)
    for p in policies.values():
        m = p["metrics"]
        assert (p["net_pnl"], p["pnl_ticks"], p["trades"], p["win_rate"], p["t_stat"]) == \
            (m["net_pnl"] / 1e9, m["pnl_ticks"], m["trades"], m["win_rate"], m["trade_t_stat"])
        assert p["opt_frac"] == pytest.approx(m["pnl_ticks"] / optimum)
    table = text.splitlines()
    assert any(line.startswith(policies["agent"]["name"]) for line in table)  # the name of what from_checkpoint gave
    assert any(line.startswith("flat: always HOLD") and "+0.0000" in line for line in table)
    assert any(line.startswith("baseline: logistic imbalance") for line in table)
    assert "of optimum" in text and f"wrote {out}" in text


def test_fee_and_lots_are_the_flags_when_given(checkpoint, tmp_path, capsys):
    out = tmp_path / "eval.json"
    code, text, _ = evaluate(capsys, checkpoint, "--synthetic", "noisy", "--rows", 2000, "--seed", 5, "--fee", 0.05,
                             "--lots", 3, "--n-backtests", 8, "--json", out)
    assert code == 0
    record = json.loads(out.read_text())
    assert record["settings"]["fee_per_lot"] == 0.05 and record["settings"]["lots_per_entry"] == 3
    drawn = synthetic_data(2000, seed=5, params=MARKETS["noisy"].params)
    config = EvalConfig(n_backtests=8, fee_per_lot=50_000_000, lots_per_entry=3)
    assert by_role(record)["agent"]["metrics"] == direct(drawn.records, drawn.tick, config, agent(checkpoint))
    _, text, _ = evaluate(capsys, checkpoint, "--synthetic", "noisy", "--rows", 2000, "--n-backtests", 8)
    assert "fee 0.025 per lot per side (the market noisy's own), 1 lot(s) per entry (the checkpoint's)" in text


def test_the_training_draw_is_noted(checkpoint, capsys):
    code, text, _ = evaluate(capsys, checkpoint, "--synthetic", "easy", "--rows", 1000, "--seed", 0)
    assert code == 0
    assert ("note: --seed 0 drew the checkpoint's training data (its first 5,000 snapshots): the agent is evaluated "
            "on rows it trained on") in text


def parquet_file(folder: Path, rec) -> Path:
    write_parquet(folder / "day.parquet", rec)
    return folder / "day.parquet"


def lobster_file(folder: Path, rec) -> Path:
    rec = rec.copy()
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(len(rec)) * 1_000_000
    return write_lobster(folder, rec, 10)


def dbn_file(folder: Path, rec) -> Path:
    (folder / "day.dbn").write_bytes(dbn_bytes(rec))
    return folder / "day.dbn"


@pytest.mark.parametrize("write", [parquet_file, lobster_file, dbn_file], ids=["parquet", "lobster", "dbn"])
def test_a_real_format_file(checkpoint, tmp_path, capsys, write):
    path = write(tmp_path, generate(3000, seed=11))
    out = tmp_path / "eval.json"
    code, text, err = evaluate(capsys, checkpoint, "--data", path, "--fit-frac", 0.25, "--n-backtests", 8,
                               "--json", out)
    assert code == 0 and err == ""
    record = json.loads(out.read_text())
    data = load(path)
    assert {k: record["data"][k] for k in ("rows", "fit_rows", "evaluated_rows", "first_evaluated_row")} == \
        {"rows": 3000, "fit_rows": 750, "evaluated_rows": 2250, "first_evaluated_row": 750}
    assert record["data"]["tick"] == data.tick / 1e9 and record["data"]["tick_from"] == "inferred"
    assert record["settings"]["fee_per_lot"] == 0.0 and record["optimum_ticks_per_snapshot"] is None
    policies = by_role(record)
    assert policies["flat"]["trades"] == 0 and policies["flat"]["net_pnl"] == 0
    assert all(p["metrics"]["steps"] == 2250 and p["opt_frac"] is None for p in policies.values())
    config = EvalConfig(n_backtests=8)
    rest = np.ascontiguousarray(data.records[750:])
    assert policies["agent"]["metrics"] == direct(rest, data.tick, config, agent(checkpoint))
    assert policies["yardstick"]["metrics"] == direct(
        rest, data.tick, config, yardstick(np.ascontiguousarray(data.records[:750]), data.tick, tmp_path / "y"))
    assert "validation: 3000 rows read, 3000 kept" in text and "of optimum" not in text


def test_a_checkpoint_trained_on_files_lends_its_tick_and_fee(tmp_path, capsys):
    """Trained on files with --tick 0.05 and --fee 0.01: files are evaluated in that tick, at that fee; data whose
    prices the tick does not divide is refused saying the tick was the checkpoint's."""
    train_file = parquet_file(tmp_path, generate(3000, seed=4))
    run = tmp_path / "run"
    small = [a for a in TRAIN if a not in ("--synthetic", "easy", "--synthetic-rows", "5000")]
    assert train.main([*small, "--data", str(train_file), "--tick", "0.05", "--fee", "0.01", "--out", str(run)]) == 0
    ckpt = next(run.glob("checkpoint-*.foxc"))
    (tmp_path / "other").mkdir()
    other = parquet_file(tmp_path / "other", generate(2000, seed=9))
    out = tmp_path / "eval.json"
    code, text, _ = evaluate(capsys, ckpt, "--data", other, "--n-backtests", 8, "--json", out)
    assert code == 0 and "note:" not in text
    record = json.loads(out.read_text())
    assert (record["data"]["tick"], record["data"]["tick_from"]) == (0.05, "the checkpoint's --tick")
    assert (record["settings"]["fee_per_lot"], record["settings"]["fee_from"]) == (0.01, "the checkpoint's")
    rest = np.ascontiguousarray(load(other, tick=50_000_000).records[600:])
    config = EvalConfig(n_backtests=8, fee_per_lot=10_000_000)
    assert by_role(record)["agent"]["metrics"] == direct(rest, 50_000_000, config, agent(ckpt))
    code, text, _ = evaluate(capsys, ckpt, "--synthetic", "easy", "--rows", 1000)
    assert code == 0 and "fee 0 per lot per side (the market easy's own)" in text  # a fee of files, not of a market
    (tmp_path / "odd").mkdir()
    odd = parquet_file(tmp_path / "odd", generate(1000, seed=9, params=SynthParams(tick=0.03)))
    code, out, err = evaluate(capsys, ckpt, "--data", odd)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("foxc.evaluate: error: --data ") and "does not divide" in err
    assert err.endswith("(the checkpoint's --tick 0.05, which the agent was trained in; give --tick T to count this "
                        "data in another)\n")
    assert evaluate(capsys, ckpt, "--data", odd, "--tick", "0.01")[0] == 0
    code, text, _ = evaluate(capsys, ckpt, "--data", train_file, "--n-backtests", 8)  # the file it trained on
    assert code == 0 and (f"note: {train_file}: the checkpoint trained on this file (all but the rows its run held "
                          "out): the agent is evaluated on rows it trained on") in text


def test_fit_frac_0_evaluates_every_row_without_a_yardstick(checkpoint, tmp_path, capsys):
    path = parquet_file(tmp_path, generate(1500, seed=2))
    out = tmp_path / "eval.json"
    assert evaluate(capsys, checkpoint, "--data", path, "--fit-frac", 0, "--json", out)[0] == 0
    record = json.loads(out.read_text())
    assert [p["role"] for p in record["policies"]] == ["agent", "flat"] and record["yardstick_fit"] is None
    assert record["data"]["evaluated_rows"] == 1500 and record["policies"][0]["metrics"]["steps"] == 1500


def test_a_yardstick_that_cannot_be_fitted_leaves_the_other_figures(checkpoint, tmp_path, capsys):
    """Too few mid moves in the rows it is fitted on: the yardstick's row says why, the agent and flat stand."""
    path = parquet_file(tmp_path, generate(2000, seed=3))
    out = tmp_path / "eval.json"
    code, text, _ = evaluate(capsys, checkpoint, "--data", path, "--fit-frac", 0.002, "--json", out)
    assert code == 0
    yard = by_role(json.loads(out.read_text()))["yardstick"]
    assert yard["metrics"] is None and "too few mid moves" in yard["error"]
    assert "yardstick: not fitted: the training window has too few mid moves" in text


def baseline_checkpoint(folder: Path) -> Path:
    """A walk-forward's yardstick: a valid FOXC checkpoint, of no agent."""
    return CheckpointSaver(folder).save(3, {"baseline_w": np.zeros(4), "baseline_margin": np.array([0.1])},
                                        {"config": {"baseline": {}}, "policy": "baseline"})


@pytest.mark.parametrize("argv, message", [
    (["{tmp}/none.foxc", "--synthetic", "easy"], "{tmp}/none.foxc: cannot read: No such file or directory"),
    (["{tmp}", "--synthetic", "easy"], "{tmp}: a directory, not a checkpoint file (a checkpoint is a regular file)"),
    (["{tmp}/text.foxc", "--synthetic", "easy"], "{tmp}/text.foxc: at byte 0: bad magic"),
    (["{baseline}", "--synthetic", "easy"], "{baseline}: not a checkpoint of a trained agent (python -m foxc.train "
                                            "writes them): it lacks sections "),
    (["{ckpt}", "--synthetic", "hard"], "argument --synthetic: invalid choice: 'hard'"),
    (["{ckpt}"], "one of the arguments --data --synthetic is required"),
    (["{ckpt}", "--data", "{tmp}/day.parquet", "--synthetic", "easy"], "argument --synthetic: not allowed with "
                                                                      "argument --data"),
    (["", "--synthetic", "easy"], "argument CKPT: an empty path"),
    (["{ckpt}", "--data", "{tmp}/none.parquet"], "--data {tmp}/none.parquet: no such file or directory"),
    (["{ckpt}", "--data", "{tmp}/text.foxc"], "--data {tmp}/text.foxc: unknown format"),
    (["{ckpt}", "--data", "{tmp}/day.parquet", "--rows", "100"], "--rows 100 is a setting of synthetic data: beside "
                                                                 "--data {tmp}/day.parquet it would be ignored"),
    (["{ckpt}", "--data", "{tmp}/day.parquet", "--seed", "1"], "--seed 1 is a setting of synthetic data"),
    (["{ckpt}", "--synthetic", "easy", "--fit-frac", "0.5"], "--fit-frac: only with --data (the yardstick is fitted "
                                                             "on another draw"),
    (["{ckpt}", "--synthetic", "easy", "--tick", "0.25"], "--tick: only with --data (a synthetic market has its own "
                                                          "tick)"),
    (["{ckpt}", "--synthetic", "easy", "--instrument", "3"], "--instrument: only with --data"),
    (["{ckpt}", "--data", "{tmp}/day.parquet", "--fit-frac", "1"], "argument --fit-frac: must be from 0 up to 1"),
    (["{ckpt}", "--data", "{tmp}/day.parquet", "--fit-frac", "0.999"], "--data {tmp}/day.parquet: --fit-frac 0.999 "
                                                                       "of 1,000 rows leaves too few to evaluate on"),
    (["{ckpt}", "--synthetic", "easy", "--rows", "1"], "argument --rows: must be >= 2, got 1"),
    (["{ckpt}", "--synthetic", "easy", "--fee", "-1"], "argument --fee: must be >= 0, got -1"),
    (["{ckpt}", "--synthetic", "easy", "--fee", "2e7"], "--fee must be 0 to 10,000,000"),
    (["{ckpt}", "--synthetic", "easy", "--lots", "0"], "argument --lots: must be 1 to 1,000,000, got 0"),
    (["{ckpt}", "--synthetic", "easy", "--n-backtests", "0"], "argument --n-backtests: must be 1 to 65,536, got 0"),
    (["{ckpt}", "--synthetic", "easy", "--backend", "tpu"], "argument --backend: invalid choice: 'tpu'"),
    (["{ckpt}", "--synthetic", "easy", "--json", "{tmp}"], "--json {tmp}: is a directory (give a file name)"),
    (["{ckpt}", "--data", "{tmp}/none.parquet", "--json", "{tmp}/out.json"], "--data {tmp}/none.parquet: no such"),
])
def test_refusals_are_one_line_and_exit_status_2(checkpoint, tmp_path, capsys, argv, message):
    (tmp_path / "text.foxc").write_text("a text file, and no checkpoint\n")
    write_parquet(tmp_path / "day.parquet", generate(1000, seed=1))
    baseline = baseline_checkpoint(tmp_path / "yard")
    fill = lambda s: s.format(tmp=tmp_path, ckpt=checkpoint, baseline=baseline)  # noqa: E731
    code, out, err = evaluate(capsys, *map(fill, argv))
    assert code == 2 and out == ""
    assert err.startswith(f"foxc.evaluate: error: {fill(message)}") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out.json").exists()


def test_the_module_runs_as_a_command(tmp_path):
    done = subprocess.run([sys.executable, "-m", "foxc.evaluate", str(tmp_path / "none.foxc"), "--synthetic", "easy"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"foxc.evaluate: error: {tmp_path / 'none.foxc'}: cannot read: No such file or directory\n"


def test_every_console_script_names_a_main():
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli, a dependency of foxc there
        import tomli as tomllib
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["foxc-evaluate"] == "foxc.evaluate.command:main"
    for name, target in scripts.items():
        module, function = target.split(":")
        assert callable(getattr(import_module(module), function)), name
