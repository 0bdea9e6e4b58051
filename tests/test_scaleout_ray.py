"""`--parallel ray` on a real Ray cluster, as a user runs it: `ray start --head` on this machine (two CPUs, no GPU;
tests/ray_helpers.py), then `python -m foxc.walkforward` / `python -m foxc.sweep` with `--ray-address` and
`--gpus-per-fold 0` (`--gpus-per-run 0`) on the reference backend. A walk-forward's report and a sweep's tables come
out with the same figures, bit for bit, as the same command's with `--parallel none` (a walk-forward from a prepared
cache too, its folds reading their shards where they run); a fold that raises and one whose worker process dies are
those folds' errors while the other folds finish; a fold asking for a GPU the cluster lacks is refused. Skipped only
where Ray is not installed (`pip install 'foxc[test]'`)."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow  # a real local cluster: ~45 s on two cores; CI runs it (python -m pytest -m slow)

try:
    import ray
except ImportError as e:
    pytest.skip(f"Ray is not installed ({e}): pip install 'foxc[test]' (or 'foxc[ray]')", allow_module_level=True)

from ray_helpers import ROOT, WHERE, RayCluster, env_with_tree, exit_in

from foxc import jobs
from foxc.sweep.cli import build_parser as sweep_parser, main as sweep_main, plan_sweep
from foxc.walkforward import main as walkforward_main

CLI_S = 300
# two folds of the RL trainer, tiny (as tests/test_walkforward.py's and tests/test_sweep.py's settings)
# the final weights, without the entry margin: tiny agents that trade, so each fold's figures are its own
AGENT = ["--val-frac", "0", "--set", "entry_margin=0"]
WF = ["--backend", "reference", "--synthetic-rows", "12000", "--folds", "2", "--steps-per-fold", "12",
      "--eval-backtests", "8", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--no-plots", *AGENT]
# two points of two seeds: four runs
SWEEP = ["--backend", "reference", "--steps", "12", "--n-backtests", "16", "--seq-len", "4", "--per-capacity", "16",
         "--synthetic-rows", "5000", "--eval-rows", "1000", "--log-every", "6", "--no-plots",
         "--grid", "lr_q=1e-4,3e-4", "--seeds", "2", *AGENT]
# what differs from one run of a command to the next: times, where it ran, the runner's name; every other figure
# is compared
WF_RUN_VOLATILE = {"seconds", "created", "parallel"}
# (device: how the BLAS threads were chosen; a Ray worker has OMP_NUM_THREADS=1 of Ray's, a process here has not)
FOLD_VOLATILE = {"train_seconds", "eval_seconds", "fold_dir", "checkpoint", "host", "cuda_visible_devices", "device"}
SUMMARY_VOLATILE = {"sps"}
ROW_VOLATILE = {"train_sps", "train_seconds", "eval_seconds", "seconds", "run_dir", "host"}
POINT_VOLATILE = {"train_sps", "seconds"}
SWEEP_VOLATILE = {"seconds", "parallel"}


@pytest.fixture(scope="module")
def cluster(request):
    """A real Ray cluster for this file's tests, shut down (`ray start --block` stopped, its processes ended) after
    them, passed or not."""
    started = RayCluster(num_cpus=2)
    request.addfinalizer(started.stop)
    return started


def cli(module: str, args: list, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m module args` in `cwd`, with this tree's foxc, as a user runs it."""
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd, env=env_with_tree(**env),
                          capture_output=True, text=True, timeout=CLI_S)


def without(record: dict, keys: set) -> dict:
    missing = keys - record.keys()
    assert not missing, f"no {sorted(missing)} to leave out: the list of what may differ is stale"
    return {k: v for k, v in record.items() if k not in keys}


def wf_figures(report: dict) -> dict:
    """A walk-forward report's every figure, less times and places (WF_RUN_VOLATILE, FOLD_VOLATILE)."""
    folds = [{**without(f, FOLD_VOLATILE), "train_summary": without(f["train_summary"], SUMMARY_VOLATILE)}
             for f in report["folds"]]
    return {**without(report, WF_RUN_VOLATILE), "folds": folds}


def differences(a, b, at: str = "") -> list[str]:
    """Where `a` and `b` differ (a JSON path each), so a failure names the figure, not two long reprs."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [f"{at}.{k}: only one has it" for k in a.keys() ^ b.keys()] + [
            d for k in a.keys() & b.keys() for d in differences(a[k], b[k], f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{at}[{i}]")]
    return [] if type(a) is type(b) and a == b else [f"{at}: {a!r} != {b!r}"]


def assert_same(a, b) -> None:
    diffs = differences(a, b)
    assert not diffs, "\n".join(diffs[:20])


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_a_walk_forward_on_ray_is_bit_identical_to_in_process(cluster, tmp_path):
    # --ray-address auto, as the README's example; a relative --out, as by default (runs/...): the Ray workers run in
    # the cluster's directory, not this one
    ran = cli("foxc.walkforward", [*WF, "--out", "wf-ray", "--parallel", "ray", "--ray-address", "auto",
                                   "--gpus-per-fold", "0"], cwd=tmp_path, **cluster.env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert walkforward_main([*WF, "--out", str(tmp_path / "wf-none")]) == 0
    on_ray, here = (json.loads((tmp_path / out / "report.json").read_text()) for out in ("wf-ray", "wf-none"))
    assert on_ray["parallel"] == "ray" and here["parallel"] == "none"
    assert len(on_ray["folds"]) == 2 and all("error" not in f for f in on_ray["folds"]), on_ray["folds"]
    assert on_ray["folds"][0]["metrics"] != on_ray["folds"][1]["metrics"]  # each fold's own result came back
    assert_same(wf_figures(on_ray), wf_figures(here))
    for fold in on_ray["folds"]:  # its files where its record says, on this machine, and the same bits
        fold_dir = tmp_path / "wf-ray" / f"fold-{fold['fold']}"
        assert Path(fold["fold_dir"]).is_absolute() and Path(fold["fold_dir"]) == fold_dir
        assert Path(fold["checkpoint"]).is_file() and Path(fold["checkpoint"]).parent == fold_dir
        for name in ("equity.npy", "trades.npy"):
            assert np.array_equal(np.load(fold_dir / name), np.load(tmp_path / "wf-none" / fold_dir.name / name))
    assert not (cluster.dir / "wf-ray").exists(), "a fold wrote into the Ray workers' directory"


def test_a_sweep_on_ray_is_bit_identical_to_in_process(cluster, tmp_path):
    ran = cli("foxc.sweep", [*SWEEP, "--out", "sweep-ray", "--parallel", "ray", "--ray-address", cluster.address,
                             "--gpus-per-run", "0"], cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sweep_main([*SWEEP, "--out", str(tmp_path / "sweep-none")]) == 0
    on_ray, here = tmp_path / "sweep-ray", tmp_path / "sweep-none"
    rows = read_csv(on_ray / "sweep.csv")
    assert [(r["point"], r["seed"], r["status"]) for r in rows] == [
        ("p00", "0", "ok"), ("p00", "1", "ok"), ("p01", "0", "ok"), ("p01", "1", "ok")]
    assert len({r["eval_pnl"] for r in rows}) > 1  # each run's own result came back
    assert_same([without(r, ROW_VOLATILE) for r in rows],
                [without(r, ROW_VOLATILE) for r in read_csv(here / "sweep.csv")])
    tables = [pq.read_table(out / "sweep.parquet").to_pylist() for out in (on_ray, here)]
    assert_same([without(r, ROW_VOLATILE) for r in tables[0]], [without(r, ROW_VOLATILE) for r in tables[1]])
    a, b = (json.loads((out / "sweep.json").read_text()) for out in (on_ray, here))
    assert a["sweep"]["parallel"] == "ray"
    assert_same(without(a["sweep"], SWEEP_VOLATILE), without(b["sweep"], SWEEP_VOLATILE))
    assert_same([without(p, POINT_VOLATILE) for p in a["points"]], [without(p, POINT_VOLATILE) for p in b["points"]])
    assert_same([without(r, ROW_VOLATILE) for r in a["runs"]], [without(r, ROW_VOLATILE) for r in b["runs"]])
    for r in rows:  # each run's files where its row says, on this machine
        assert Path(r["run_dir"]) == on_ray / "points" / f"{r['point']}-seed{r['seed']}"
        assert (Path(r["run_dir"]) / "summary.json").is_file() and (Path(r["run_dir"]) / "train.log").is_file()
    assert not (cluster.dir / "sweep-ray").exists(), "a run wrote into the Ray workers' directory"


def test_a_sweep_on_ray_reads_its_data_file_by_the_path_given_here(cluster, tmp_path):
    """--data given relative, as a user in the data's directory gives it: the runs' workers, in the cluster's
    directory, read it by its absolute path (each run's row as in process, not 'no such file or directory')."""
    from foxc.data.parquet import write_parquet
    from foxc.data.synthetic import generate
    write_parquet(tmp_path / "es.parquet", generate(6000, seed=1))
    sweep = ["--backend", "reference", "--steps", "6", "--n-backtests", "16", "--seq-len", "4", "--per-capacity", "16",
             "--data", "es.parquet", "--log-every", "3", "--no-plots", "--grid", "lr_q=1e-4,3e-4", "--seeds", "1"]
    ran = cli("foxc.sweep", [*sweep, "--out", "sweep-ray", "--parallel", "ray", "--ray-address", cluster.address,
                             "--gpus-per-run", "0"], cwd=tmp_path)
    here = cli("foxc.sweep", [*sweep, "--out", "sweep-none"], cwd=tmp_path)
    rows = read_csv(tmp_path / "sweep-ray" / "sweep.csv")
    assert [r["status"] for r in rows] == ["ok", "ok"], [r["error"] for r in rows]
    assert ran.returncode == here.returncode == 0, ran.stdout + ran.stderr
    assert_same([without(r, ROW_VOLATILE) for r in rows],
                [without(r, ROW_VOLATILE) for r in read_csv(tmp_path / "sweep-none" / "sweep.csv")])
    a, b = (json.loads((tmp_path / out / "sweep.json").read_text())["sweep"] for out in ("sweep-ray", "sweep-none"))
    assert a["data"] == b["data"] and a["data"].startswith("es.parquet, ")  # the report names it as given


def test_a_walk_forward_from_a_cache_on_ray_reads_the_shards_where_its_folds_run(cluster, tmp_path):
    """From a prepared cache nothing travels through the object store: each fold's task reads its shards by the
    cache's absolute path (given relative here, where the workers do not run); its folds by dates are those of
    --parallel none."""
    from foxc.data.parquet import write_parquet
    from foxc.data.prepare import prepare
    from foxc.data.synthetic import generate
    from foxc.walkforward.windows import DAY_NS
    (tmp_path / "days").mkdir()
    for day in range(4):  # a file a day: 2024-01-02 .. 01-05
        rec = generate(1500, seed=day)
        rec["ts_ns"] += day * DAY_NS
        write_parquet(tmp_path / "days" / f"day{day}.parquet", rec)
    prepare(tmp_path / "days", tmp_path / "cache")
    wf = ["--data", "cache", "--backend", "reference", "--trainer", "baseline", "--train-days", "2", "--eval-days", "1",
          "--steps-per-fold", "10", "--eval-backtests", "8", "--no-plots"]
    ran = cli("foxc.walkforward", [*wf, "--out", "wf-ray", "--parallel", "ray", "--ray-address", cluster.address,
                                   "--gpus-per-fold", "0"], cwd=tmp_path)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr  # 1: a fold the criteria fail; none may have an error
    here = cli("foxc.walkforward", [*wf, "--out", "wf-none"], cwd=tmp_path)
    assert here.returncode == ran.returncode, here.stdout + here.stderr
    on_ray, in_process = (json.loads((tmp_path / out / "report.json").read_text()) for out in ("wf-ray", "wf-none"))
    assert len(on_ray["folds"]) == 2 and all("error" not in f for f in on_ray["folds"]), on_ray["folds"]
    assert on_ray["data"]["cache"] and on_ray["folds"][0]["train_days"] == ["2024-01-02", "2024-01-03"]
    assert_same(*({**without(r, WF_RUN_VOLATILE), "folds": [without(f, FOLD_VOLATILE) for f in r["folds"]]}
                  for r in (on_ray, in_process)))


def test_a_fold_that_raises_or_whose_worker_dies_is_its_error_and_the_others_finish(cluster, tmp_path):
    """Of three folds on Ray, fold 0's trainer raises and fold 1's worker process dies (os._exit, as the OOM killer
    would end it); both are those folds' errors in the report and fold 2 finishes with the figures it has in process.
    The backend comes from $FOXC_BACKEND (no --backend), as a worker process of --parallel local is given it; with no
    --ray-address the folds run on the cluster `ray start` started on this machine (not a new local one)."""
    wf = ["--synthetic-rows", "16000", "--folds", "3", "--steps-per-fold", "5", "--eval-backtests", "8", "--no-plots"]
    ran = cli("foxc.walkforward", [*wf, "--trainer", "ray_helpers:FAILING", "--out", "wf", "--parallel", "ray",
                                   "--gpus-per-fold", "0"], cwd=tmp_path, FOXC_BACKEND="reference", **cluster.env)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    folds = json.loads((tmp_path / "wf" / "report.json").read_text())["folds"]
    assert [f["fold"] for f in folds] == [0, 1, 2]
    assert folds[0]["error"].startswith("Traceback")
    assert "RuntimeError: fold 0 broke in its trainer" in folds[0]["error"]
    assert "worker died" in folds[1]["error"] and "WorkerCrashedError" in folds[1]["error"], folds[1]["error"]
    assert "metrics" not in folds[1] and folds[1]["fold_dir"] == str(tmp_path / "wf" / "fold-1")
    assert "error" not in folds[2], folds[2]["error"]
    assert "fold 0: FAILED" in ran.stdout and "fold 1: FAILED" in ran.stdout and "fold 2: " in ran.stdout
    assert walkforward_main([*wf, "--backend", "reference", "--trainer", "baseline", "--out",
                             str(tmp_path / "here")]) == 0
    here = json.loads((tmp_path / "here" / "report.json").read_text())["folds"][2]
    assert folds[2]["metrics"] == here["metrics"] and folds[2]["equity_curve"] == here["equity_curve"]
    for fold in range(3):  # each fold ran in a Ray worker of the cluster (in its directory) on this tree's foxc
        where = json.loads((tmp_path / "wf" / f"fold-{fold}" / WHERE).read_text())
        assert where == {**where, "foxc": str(ROOT / "foxc" / "__init__.py"), "cwd": str(cluster.dir),
                         "FOXC_BACKEND": "reference"}


def test_a_sweep_run_whose_worker_dies_is_its_failed_row(cluster, tmp_path):
    """The sweep's runs on Ray (jobs.run_jobs, as foxc.sweep.cli.run_all calls it), one of whose worker process
    dies: that run's failed row, the other three rows as they are."""
    plan = plan_sweep(sweep_parser().parse_args([*SWEEP, "--out", str(tmp_path / "s"), "--parallel", "ray",
                                                 "--ray-address", cluster.address, "--gpus-per-run", "0"]))
    try:
        rows = jobs.run_jobs(plan.specs, "ray", here=None, remote=exit_in("p01-seed0"), backend="reference",
                                 noun="run", ray_address=cluster.address, gpus=0)
    finally:
        ray.shutdown()  # this process's connection; the cluster stays for the other tests
    assert [(r["point"], r["seed"], r["status"]) for r in rows] == [
        ("p00", 0, "ok"), ("p00", 1, "ok"), ("p01", 0, "failed"), ("p01", 1, "ok")]
    assert "WorkerCrashedError" in rows[2]["error"] and rows[2]["lr_q"] == 3e-4 and rows[2]["eval_pnl"] is None
    assert all(r["eval_pnl"] is not None for i, r in enumerate(rows) if i != 2)


@pytest.mark.parametrize("gpus", [[], ["--gpus-per-fold", "0.5"]], ids=["default", "half"])
def test_a_fold_asking_for_a_gpu_the_cluster_lacks_is_refused_not_left_waiting(cluster, tmp_path, gpus):
    ran = cli("foxc.walkforward", [*WF, "--out", "wf", "--parallel", "ray", "--ray-address", cluster.address, *gpus],
              cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    asked = gpus[1] if gpus else "1"  # as given, not 1.0
    assert ran.stderr.endswith(f"foxc.walkforward: error: each fold asks for {asked} GPU(s) but the Ray cluster has "
                               "0; use --gpus-per-fold 0 for CPU workers (reference backend)\n"), ran.stderr
