"""Sweeps (python -m foxc.sweep) on the reference backend, tiny: axes and draws, refusals up front, runs end
to end in process and in worker processes, failed runs, the ranking; and the generalised runners."""
import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from foxc import jobs
from foxc.errors import UserError
from foxc.sweep import point as sweep_point
from foxc.sweep.axes import parse_axes, points
from foxc.sweep.cli import main
from foxc.sweep.report import mean_se, rank, ranking_table

TINY = ["--backend", "reference", "--steps", "6", "--n-backtests", "16", "--seq-len", "4", "--per-capacity", "16",
        "--synthetic-rows", "5000", "--eval-rows", "1000", "--log-every", "3", "--no-plots"]
GRID = ["--grid", "lr_q=1e-4,3e-4", "--seeds", "2"]


def sweep(argv, capsys) -> tuple[int, str, str]:
    """main(argv) -> (exit status, stdout, stderr); argparse's own errors exit through SystemExit."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def table_points(report: str) -> list[tuple[str, str]]:
    """(point, 'mean ± se' text) of each row of report.md's ranking table (one axis), in its order."""
    found = []
    for line in report.splitlines():
        if re.match(r"\| (\d+|–) \| p\d+ \|", line):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            found.append((cells[1], cells[3]))
    return found


# ------------------------------------------------------------------------------------------------ axes

def test_a_grid_is_the_product_of_its_axes_with_values_read_as_their_flags_read_them():
    axes = parse_axes(["lr_q=1e-4,3e-4", "n_backtests=8,16,32", "actor=q,policy"], [], None)
    grid = points(axes, None, 0)
    assert len(grid) == 2 * 3 * 2 and len({tuple(p.items()) for p in grid}) == 12
    assert grid[0] == {"lr_q": 1e-4, "n_backtests": 8, "actor": "q"}
    assert grid[-1] == {"lr_q": 3e-4, "n_backtests": 32, "actor": "policy"}
    assert all(isinstance(p["n_backtests"], int) and isinstance(p["lr_q"], float) for p in grid)
    horizons = parse_axes(["horizons=10,50,100;5,20,50"], [], None)
    assert [p["horizons"] for p in points(horizons, None, 0)] == [(10, 50, 100), (5, 20, 50)]
    slot = parse_axes(["isv.n_step=1,2", "n_step=3"], [], None)  # the slot and the setting of one name
    assert [(a.target.slot, a.target.setting) for a in slot] == [("n_step", None), (None, "n_step")]


def test_random_draws_are_deterministic_inside_their_ranges_and_log_uniform_with_log():
    ranges = ["lr_q=1e-5:1e-1:log", "gamma=0.9:0.99", "n_step=1:4"]
    axes = parse_axes([], ranges, 2000)
    drawn = points(axes, 2000, 7)
    assert drawn == points(axes, 2000, 7) and drawn != points(axes, 2000, 8)
    lr, gamma, n = (np.array([p[k] for p in drawn]) for k in ("lr_q", "gamma", "n_step"))
    assert lr.min() >= 1e-5 and lr.max() <= 1e-1 and gamma.min() >= 0.9 and gamma.max() <= 0.99
    # log-uniform: as many draws below the range's geometric middle (1e-3) as above; uniform would put 1 % there
    assert abs(np.mean(lr < 1e-3) - 0.5) < 0.05
    assert abs(np.mean(gamma < 0.945) - 0.5) < 0.05
    assert set(n.tolist()) == {1, 2, 3, 4} and all(np.mean(n == k) > 0.2 for k in range(1, 5))
    assert all(float(f"{v:.4g}") == v for v in lr)  # a value a flag can give again
    crossed = points(parse_axes(["actor=q,policy"], ranges, 3), 3, 7)
    assert len(crossed) == 6  # the same three draws under each grid value
    assert [{k: v for k, v in p.items() if k != "actor"} for p in crossed[:3]] == \
           [{k: v for k, v in p.items() if k != "actor"} for p in crossed[3:]] == points(axes, 3, 7)


@pytest.mark.parametrize("argv, names", [
    (["--grid", "lr_qq=1e-4"], ["--grid lr_qq", "lr_q"]),                      # unknown, with the close name
    (["--grid", "lr_q=1e-4,2"], ["--grid lr_q=2", "(0, 1]"]),                  # out of the slot's range
    (["--grid", "n_backtests=8,0"], ["--grid n_backtests=0", "--n-backtests"]),  # out of the setting's range
    (["--grid", "n_backtests=8,x"], ["--grid n_backtests", "'x'"]),
    (["--grid", "actor=q,pi"], ["--grid actor", "'pi'"]),
    (["--grid", "lr_q="], ["--grid lr_q", "no values"]),                        # empty
    (["--grid", "lr_q=1e-4,,2e-4"], ["--grid lr_q", "empty value"]),
    (["--grid", "lr_q=1e-4,0.0001"], ["--grid lr_q", "twice"]),
    (["--grid", "lr_q=1e-4", "--grid", "lr_q=2e-4"], ["--grid lr_q", "second axis"]),  # duplicate
    (["--grid", "lr_q=1e-4", "--random", "2", "--range", "isv.lr_q=1e-5:1e-3"], ["--range isv.lr_q", "second axis"]),
    (["--grid", "seed=1,2"], ["--grid seed", "--seeds"]),
    (["--grid", "data=a,b"], ["--grid data", "same data"]),
    (["--grid", "instrument=5482,13615"], ["--grid instrument", "same data"]),
    (["--grid", "lr_q=1e-4", "--instrument", "5482"], ["--instrument 5482", "without --data", "ignored"]),
    (["--grid", "step_lo=1,2"], ["--grid step_lo", "state"]),
    (["--grid", "n_step=1,2", "--set", "n_step=3"], ["--grid n_step=1", "ISV n_step"]),  # a point with the flags
    (["--grid", "gate_enabled=0,1", "--gate", "on"], ["--grid gate_enabled=0", "contradicts --gate on"]),
    (["--grid", "lr_q=1e-4", "--data", "book.parquet"], ["--synthetic-rows 5000", "--data book.parquet", "ignored"]),
    (["--random", "2", "--range", "lr_q=1e-3:1e-5"], ["--range lr_q", "below"]),
    (["--random", "2", "--range", "lr_q=0:1e-3:log"], ["--range lr_q", "LO > 0"]),
    (["--random", "2", "--range", "lr_q=1e-5:2"], ["--range lr_q=2", "(0, 1]"]),
    (["--random", "2", "--range", "actor=q:policy"], ["--range actor", "--grid"]),
    (["--range", "lr_q=1e-5:1e-3:log"], ["--range lr_q", "--random"]),
    (["--random", "2"], ["--random", "--range"]),
    ([], ["nothing to sweep"]),
    (["--grid", "lr_q=1e-4", "--seed", "1"], ["--seed", "--seeds"]),
    (["--grid", "lr_q=1e-4", "--n-steps", "5"], ["--n-steps", "--steps"]),
    (["--grid", "lr_q=1e-4", "--n-backtests", "0"], ["--n-backtests"]),
    (["--grid", "lr_q=1e-4", "--seeds", "0"], ["--seeds"]),
    (["--grid", "lr_q=1e-4", "--steps", "100000000000000000000"], ["--steps", "100000000000000000000"]),
    (["--grid", "lr_q=1e-4", "--workers", "2"], ["--workers", "--parallel local"]),  # would be ignored
    (["--grid", "lr_q=1e-4", "--parallel", "local", "--gpus-per-run", "0"], ["--gpus-per-run", "--parallel ray"]),
    (["--random", "100000000000", "--range", "lr_q=1e-5:1e-3"], ["--random 100,000,000,000", "runs"]),
    (["--grid", "lr_q=1e-4,2e-4", "--seeds", "100000000000"], ["2 point(s) of --grid", "--seeds 100,000,000,000", "runs"]),
])
def test_bad_axes_and_flags_are_refused_up_front_in_one_line_and_nothing_is_written(tmp_path, capsys, argv, names):
    out = tmp_path / "sweep"
    code, stdout, err = sweep([*TINY, *argv, "--out", out], capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("foxc.sweep: error: ") and err.count("\n") == 1, err
    assert all(name in err for name in names), err
    assert not out.exists()


def test_a_config_file_may_not_set_what_the_sweep_sets(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text("seed = 3\n")
    code, _, err = sweep([*TINY, *GRID, "--config", config, "--out", tmp_path / "s"], capsys)
    assert code == 2 and f"--config {config}: seed" in err and "--seeds" in err


def test_a_slot_of_the_config_file_at_odds_with_a_flag_names_the_file(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text("[isv]\nn_step = 5\n")
    code, _, err = sweep([*TINY, *GRID, "--n-step", "3", "--config", config, "--out", tmp_path / "s"], capsys)
    assert code == 2 and f"--config {config}: [isv] n_step = 5 is above --n-step 3" in err, err


def test_data_a_config_file_gives_is_read_from_the_current_directory_and_the_refusal_names_the_file(
        tmp_path, capsys, monkeypatch):
    from foxc.data.parquet import write_parquet
    from foxc.data.synthetic import generate
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "c.toml").write_text('data = "book.parquet"\n')
    write_parquet(tmp_path / "cfg" / "book.parquet", generate(3000, 1))  # beside the file, not where the sweep runs
    monkeypatch.chdir(tmp_path)
    tiny = TINY[:TINY.index("--synthetic-rows")] + TINY[TINY.index("--synthetic-rows") + 2:]
    code, _, err = sweep([*tiny, *GRID, "--config", "cfg/c.toml", "--out", tmp_path / "s"], capsys)
    assert code == 2 and "--data book.parquet: no such file or directory (--config cfg/c.toml gave it" in err, err
    assert not (tmp_path / "s").exists()


def test_a_directory_that_holds_files_is_refused_without_overwrite(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = sweep([*TINY, *GRID, "--out", tmp_path], capsys)
    assert code == 2 and "--overwrite" in err and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


# ----------------------------------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory):
    """2 points × 2 seeds, in process."""
    out = tmp_path_factory.mktemp("sweep") / "none"
    code = main([str(a) for a in [*TINY, *GRID, "--out", out]])
    return code, out


def test_a_small_sweep_writes_one_row_per_run_and_ranks_the_points_by_their_mean(small_sweep):
    code, out = small_sweep
    assert code == 0
    rows = read_csv(out / "sweep.csv")
    assert [(r["point"], r["seed"], r["lr_q"]) for r in rows] == \
           [("p00", "0", "0.0001"), ("p00", "1", "0.0001"), ("p01", "0", "0.0003"), ("p01", "1", "0.0003")]
    assert all(r["status"] == "ok" and r["error"] == "" and r["steps"] == "6" for r in rows)
    table = pq.read_table(out / "sweep.parquet").to_pylist()
    assert [(t["point"], t["seed"], t["eval_opt_frac"]) for t in table] == \
           [(r["point"], int(r["seed"]), float(r["eval_opt_frac"])) for r in rows]
    for r in rows:  # each run is a training run's directory, with the point's setting and its seed
        run_dir = out / "points" / f"{r['point']}-seed{r['seed']}"
        config = json.loads((run_dir / "config.json").read_text())["config"]
        assert config["seed"] == int(r["seed"]) and config["isv"] == [["lr_q", float(r["lr_q"])]]
        assert config["n_steps"] == 6 and config["eval_every"] == 6 and config["checkpoint_every"] == 0
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["evaluation"]["eval_opt_frac"] == pytest.approx(float(r["eval_opt_frac"]))
        assert (run_dir / "metrics.jsonl").is_file() and (run_dir / "checkpoint-6.foxc").is_file()
    means = {}
    for p in ("p00", "p01"):
        values = [float(r["eval_opt_frac"]) for r in rows if r["point"] == p]
        means[p] = (np.mean(values), np.std(values, ddof=1) / math.sqrt(2))
    report = (out / "report.md").read_text()
    ranked = table_points(report)
    assert [p for p, _ in ranked] == sorted(means, key=lambda p: -means[p][0])
    for p, text in ranked:
        assert text == f"{means[p][0]:.3f} ± {means[p][1]:.3f}"
    assert "held-out fraction of the optimum" in report and "2 points × 2 seeds" in report
    saved = json.loads((out / "sweep.json").read_text())
    assert [p["point"] for p in saved["points"]] == [p for p, _ in ranked] and len(saved["runs"]) == 4


def test_local_worker_processes_give_the_same_rows_as_in_process(small_sweep, tmp_path):
    _, none = small_sweep
    local = tmp_path / "local"
    assert main([str(a) for a in [*TINY, *GRID, "--out", local, "--parallel", "local", "--workers", "2"]]) == 0
    same = ["point", "seed", "lr_q", "status", "eval_opt_frac", "eval_pnl", "eval_pnl_se", "eval_trades", "eval_wr",
            "eval_time_in_market", "eval_rows", "steps"]
    a, b = read_csv(none / "sweep.csv"), read_csv(local / "sweep.csv")
    assert [[r[k] for k in same] for r in a] == [[r[k] for k in same] for r in b]
    assert all((local / "points" / f"p0{p}-seed{s}" / "worker.log").is_file() for p in (0, 1) for s in (0, 1))


def test_a_tuple_axis_comes_back_from_a_worker_as_in_process(tmp_path):
    """horizons is a tuple: a worker's row (JSON) held a list, written "[2, 3, 4]" to sweep.csv where a run in process
    writes "(2, 3, 4)", and unhashable for the plot's grouping by the other axes."""
    grid = ["--grid", "lr_q=1e-4", "--grid", "horizons=2,3,4;3,4,5", "--seeds", "1"]
    runs = {p: tmp_path / p for p in ("none", "local")}
    for parallel, out in runs.items():
        assert main([str(a) for a in [*TINY, *grid, "--out", out, "--parallel", parallel]]) == 0
    a, b = (read_csv(out / "sweep.csv") for out in runs.values())
    assert a[0]["horizons"] == "(2, 3, 4)" and [r["horizons"] for r in b] == [r["horizons"] for r in a]


def test_a_failed_run_is_a_failed_row_and_the_others_finish(tmp_path, capsys, monkeypatch):
    real = sweep_point.run_point

    def flaky(spec, rt=None):
        if spec.key == "p01-seed0":
            raise RuntimeError("boom in the run")
        return real(spec, rt)
    monkeypatch.setattr(sweep_point, "run_point", flaky)
    out = tmp_path / "s"
    (out / "points" / "p07-seed0").mkdir(parents=True)  # an earlier sweep's, which --overwrite removes
    (out / "report.md").write_text("old")
    (out / "notes.txt").write_text("mine")
    code, stdout, _ = sweep([*TINY, *GRID, "--out", out, "--overwrite"], capsys)
    assert code == 1
    rows = read_csv(out / "sweep.csv")
    assert [r["status"] for r in rows] == ["ok", "ok", "failed", "ok"]
    assert "RuntimeError: boom in the run" in rows[2]["error"] and rows[2]["eval_opt_frac"] == ""
    report = (out / "report.md").read_text()
    assert "## Failed runs" in report and "| p01-seed0 | RuntimeError: boom in the run |" in report
    ranked = dict(table_points(report))
    assert ranked["p01"].endswith("(n=1, no error bar)") and float(ranked["p01"].split()[0]) == \
        pytest.approx(float(rows[3]["eval_opt_frac"]), abs=5e-4)
    assert "p01-seed0 (lr_q=0.0003): FAILED: RuntimeError: boom in the run" in stdout
    assert not (out / "points" / "p07-seed0").exists() and (out / "points" / "p01-seed1" / "summary.json").is_file()
    assert (out / "notes.txt").read_text() == "mine"


# -------------------------------------------------------------------------------------- the ranking

def test_mean_and_standard_error_over_seeds():
    assert mean_se([]) == (None, None) and mean_se([0.5]) == (0.5, None)
    mean, se = mean_se([1.0, 2.0, 4.0])
    assert mean == pytest.approx(7 / 3) and se == pytest.approx(np.std([1, 2, 4], ddof=1) / math.sqrt(3))


def fake_rows() -> list[dict]:
    rows = []
    for point, lr, gamma, fracs in (("p00", 1e-4, 0.99, [0.2, 0.4]), ("p01", 3e-4, 0.99, [0.7, None]),
                                    ("p02", 1e-4, 0.995, [None, None]), ("p03", 3e-4, 0.995, [0.5, 0.6])):
        for seed, frac in enumerate(fracs):
            rows.append({"point": point, "seed": seed, "lr_q": lr, "gamma": gamma,
                         "status": "ok" if frac is not None else "failed", "eval_opt_frac": frac,
                         "eval_pnl": None if frac is None else frac * 0.03, "eval_trades": 10, "train_sps": 100.0,
                         "seconds": 1.0, "error": None if frac is not None else "Traceback ...\nValueError: x"})
    return rows


def test_ranking_puts_the_best_mean_first_and_points_without_a_result_last():
    points_ = rank(fake_rows(), ["lr_q", "gamma"], "eval_opt_frac")
    assert [(p["point"], p["rank"], p["n"], p["runs"]) for p in points_] == \
           [("p01", 1, 1, 2), ("p03", 2, 2, 2), ("p00", 3, 2, 2), ("p02", None, 0, 2)]
    assert points_[0]["failed"] == ["p01-seed1"] and points_[1]["se"] == pytest.approx(0.05)
    lines = ranking_table(points_, ["lr_q", "gamma"], "eval_opt_frac")
    assert "0.700 (n=1, no error bar)" in lines[2] and "0.550 ± 0.050" in lines[3] and "no result" in lines[5]


def test_the_plot_draws_the_target_against_the_first_axis(tmp_path):
    pytest.importorskip("matplotlib")
    from foxc.sweep.report import sweep_plot
    points_ = rank(fake_rows(), ["lr_q", "gamma"], "eval_opt_frac")
    png = tmp_path / "sweep.png"
    assert sweep_plot(points_, ["lr_q", "gamma"], "of optimum", png) == [png]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    categories = rank([dict(r, lr_q="q" if r["lr_q"] < 2e-4 else "policy") for r in fake_rows()], ["lr_q", "gamma"],
                      "eval_opt_frac")
    assert sweep_plot(categories, ["lr_q", "gamma"], "of optimum", png) == [png]


# ------------------------------------------------------------------------------------------- runners

@dataclass
class CrashingJob:
    """A job whose worker process exits without a record (its module does not exist)."""
    key: str
    out_dir: str
    SPEC_FILE = "job.json"
    WORKER = "foxc.no_such_worker"

    def to_json(self) -> str:
        return "{}"

    def failed(self, error: str) -> dict:
        return {"key": self.key, "error": error}


def test_two_slots_of_one_gpu_run_two_workers_at_once(tmp_path, monkeypatch):
    """--workers 2 on one GPU: two processes share it (slots by position; the same id twice was one slot, so the
    workers ran one after another, and so did two CPU workers)."""
    procs, started = [], []

    class Proc:
        def __init__(self):
            self.polls, self.done, self.returncode = 0, False, 0

        def poll(self):
            self.polls += 1
            self.done = self.polls > 1
            return 0 if self.done else None

    class Log:
        def close(self):
            pass

    def start(job, slot, env):
        started.append((job.key, slot, sum(not p.done for p in procs)))  # workers still running when it starts
        procs.append(Proc())
        return procs[-1], Log()
    monkeypatch.setattr(jobs, "_start_worker", start)
    monkeypatch.setattr(jobs, "_worker_record", lambda job, rc: {"key": job.key})
    monkeypatch.setattr(jobs, "POLL_S", 0)
    crashing = [CrashingJob(str(i), str(tmp_path / str(i))) for i in range(3)]
    assert [r["key"] for r in jobs.run_local(crashing, ["0", "0"])] == ["0", "1", "2"]
    assert [(key, slot) for key, slot, _ in started] == [("0", "0"), ("1", "0"), ("2", "0")]
    assert started[1][2] == 1, "the second worker started while the first still ran"


def test_a_worker_that_dies_without_a_record_gives_a_failed_record(tmp_path):
    crashing = [CrashingJob(str(i), str(tmp_path / str(i))) for i in range(3)]
    seen = []
    records = jobs.run_local(crashing, [None, None], on_result=lambda job, r: seen.append(job.key))
    assert [r["key"] for r in records] == ["0", "1", "2"] and sorted(seen) == ["0", "1", "2"]
    assert all(r["error"].startswith("worker exited with status 1:") and "foxc.no_such_worker" in r["error"]
               for r in records)


def a_run_row(spec) -> dict:
    """A finished run's row, as its worker writes it."""
    return spec.row(status="ok", eval_opt_frac=0.5, eval_pnl=0.01, eval_pnl_se=0.002, eval_trades=4, eval_wr=0.5,
                    eval_time_in_market=0.3, eval_rows=1000, train_sps=50.0, train_seconds=1.0, eval_seconds=0.5,
                    seconds=2.0, steps=6)


def test_a_workers_figure_that_is_an_integer_is_a_float(tmp_path):
    """A figure written as an integer of 2**63 or more (a hand edit) passed as a float, then broke sweep.parquet."""
    from foxc.sweep.report import write_tables
    spec = sweep_point.RunSpec("p00", 0, {"lr_q": 1e-4}, {}, "reference", str(tmp_path / "p00-seed0"))
    result = Path(spec.out_dir) / jobs.RESULT_FILE
    result.parent.mkdir()
    result.write_text(json.dumps({**a_run_row(spec), "eval_pnl_se": 2**64}))
    row = jobs._worker_record(spec, 0)
    assert row["status"] == "ok" and type(row["eval_pnl_se"]) is float
    write_tables([row], ["lr_q"], tmp_path)
    assert read_csv(tmp_path / "sweep.csv")[0]["eval_pnl_se"] == "1.8446744073709552e+19"


@pytest.mark.parametrize("row, problem", [
    ({}, "no 'point'"),
    (lambda r: {k: v for k, v in r.items() if k != "status"}, "no 'status'"),
    (lambda r: {**r, "eval_opt_frac": "0.5"}, 'eval_opt_frac is "0.5", not of type float | None'),
    (lambda r: {**r, "seed": 1.5}, "seed is 1.5, not of type int64"),
    (lambda r: {**r, "seed": 2**63}, "seed is 9223372036854775808, not of type int64"),
    (lambda r: {**r, "eval_trades": -2**63 - 1}, "eval_trades is -9223372036854775809, not of type int64"),
    (lambda r: {**r, "status": "failed", "steps": 2**64}, "steps is 18446744073709551616, not of type int64 | None"),
    (lambda r: {**r, "lr_q": "big"}, 'lr_q is "big", not of type float'),
    (lambda r: {**r, "eval_time_in_market": None}, "eval_time_in_market is null, not of type float"),
    (lambda r: {**r, "status": "failed", "error": 7}, "error is 7, not of type str | None"),
], ids=["empty", "no-status", "str-target", "float-seed", "int64-seed", "int64-evaluated", "int64-steps", "str-axis",
        "null-printed", "int-error"])
def test_a_workers_row_that_is_no_run_row_is_a_failed_run(tmp_path, capsys, row, problem):
    """A result.json that is JSON but no run's row ({}, a key missing or of another type) ended the sweep in a
    KeyError or TypeError traceback as it printed the run's line, ranked the rows or wrote the tables (an integer
    column of 2**63 or more: sweep.parquet's OverflowError); it is that run's failure, naming the file and what is
    wrong."""
    from foxc.sweep.cli import announce, write_outputs
    spec = sweep_point.RunSpec("p00", 0, {"lr_q": 1e-4}, {}, "reference", str(tmp_path / "p00-seed0"))
    result, good = Path(spec.out_dir) / jobs.RESULT_FILE, {**a_run_row(spec), "extra": 1}
    result.parent.mkdir()
    result.write_text(json.dumps(good))
    assert jobs._worker_record(spec, 0) == good  # a key the tables have no column for is left out of them
    result.write_text(json.dumps(row(good) if callable(row) else row))
    (result.parent / jobs.WORKER_LOG).write_text("")
    failed = jobs._worker_record(spec, 0)
    error = f"worker exited with status 0 and its record is unreadable ({result}: not a record of foxc.sweep.point: "
    assert failed["status"] == "failed" and failed["error"] == f"{error}{problem}):\n"
    announce(spec, failed)
    meta = {"axis_names": ["lr_q"], "axes": ["lr_q=0.0001"], "target": "eval_opt_frac", "runs": "1 point × 2 seeds",
            "seeds": 2, "backend": "reference", "parallel": "local", "data": "synthetic", "settings": "", "seconds": 1}
    write_outputs(meta, [failed, {**good, "seed": 1}], tmp_path, plots=False)
    assert f"p00-seed0 (lr_q=0.0001): FAILED: {error}{problem}):" in capsys.readouterr().out
    assert [r["status"] for r in read_csv(tmp_path / "sweep.csv")] == ["failed", "ok"]
    assert "| 1 | p00 | 0.0001 | 0.500 (n=1, no error bar) | 1/2 |" in (tmp_path / "report.md").read_text()


def test_walk_forward_folds_still_run_in_worker_processes(tmp_path):
    from foxc.data.synthetic import synthetic_data
    from foxc.evaluate.runner import EvalConfig
    from foxc.walkforward import walk_forward
    data = synthetic_data(12_000, seed=3)
    kw = dict(folds=2, steps=10, trainer="baseline", eval_config=EvalConfig(n_backtests=8, backend="reference"),
              plots=False, log=lambda *a: None)
    here = walk_forward(data, out=tmp_path / "none", **kw)
    local = walk_forward(data, out=tmp_path / "local", parallel="local", workers=2, **kw)
    assert all("error" not in f for f in local["folds"]), [f.get("error") for f in local["folds"]]
    assert [f["metrics"] for f in local["folds"]] == [f["metrics"] for f in here["folds"]]
    assert (tmp_path / "local" / "fold-1" / "fold.json").is_file() and not (tmp_path / "local" / "data.npy").exists()


def test_local_slots_are_cpu_workers_on_the_reference_backend_and_visible_gpus_with_cuda(monkeypatch):
    assert jobs.local_slots("reference", 2, 5) == [None, None]
    assert jobs.local_slots("reference", None, 1) == [None]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert jobs.local_slots("cuda", None, 4) == ["3", "5"] and jobs.local_slots("auto", 1, 4) == ["3"]
    assert jobs.local_slots("cuda", 3, 4) == ["3", "5", "3"]  # --workers above the GPUs: they share them
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UserError, match="no visible GPU"):
        jobs.local_slots("cuda", None, 2)
