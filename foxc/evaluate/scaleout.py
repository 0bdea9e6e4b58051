"""Running jobs (walk-forward folds, sweep runs): in this process, one process per visible GPU of this
machine, or one Ray task each.

A job is a dataclass of JSON-able fields deriving from Job (foxc.evaluate.folds.FoldSpec,
foxc.sweep.point.RunSpec); `work(job, *inputs) -> record` runs one, a failure turned into a record
with `error` (it never raises). `run_jobs` runs them as `--parallel` says (`add_runner_arguments`
adds its flags to a command line) and returns the records in the jobs' order:
- `none`: one after another in this process.
- `local`: a worker process per job, at most one per slot at a time; a slot is a GPU id, given to
  its processes as CUDA_VISIBLE_DEVICES (so each sees one GPU, as device 0). On the reference
  backend a slot is just a worker process.
- `ray`: one Ray task per job with `num_gpus` (default 1) each: Ray places the tasks on the
  cluster's GPUs (any machine) and sets CUDA_VISIBLE_DEVICES itself; large inputs travel through
  Ray's object store, so workers need no shared file system. Records come back to the head; files
  stay on the machine that wrote them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import typing
from dataclasses import asdict, replace
from pathlib import Path
from typing import ClassVar

from ..errors import UserError
from ..checkpoint.atomic import atomic_write
from ..cli import nonnegative_float, positive_int, run
from ..driver.device import device_count
from ..driver.errors import CudaError
from ..jsonfile import JsonFileError, fields_problem, read_json, shape_problem


class ScaleoutError(UserError):
    """A set-up the jobs cannot run on (Ray missing, too few GPUs); the message says what to change."""


POLL_S = 0.05
RESULT_FILE = "result.json"
WORKER_LOG = "worker.log"
PARALLEL = ("none", "local", "ray")


class Job:
    """What run_jobs needs of a job besides its dataclass fields: `key` (unique among the jobs of one
    call), `out_dir` (its directory on the machine that runs it), `failed(error)` (the record of a job
    whose worker crashed), and the worker process `python -m WORKER OUT_DIR/SPEC_FILE` (its main is
    `serve`)."""
    SPEC_FILE: ClassVar[str]
    WORKER: ClassVar[str]
    CONFIGS: ClassVar[dict[str, type]] = {}  # a field that holds a dataclass's fields (a config) -> that dataclass

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def record_shape(self, record: dict) -> dict:
        """What a record of this job holds (shape_problem's shape): a worker's result.json without it is refused."""
        return {}

    def restored(self, record: dict) -> dict:
        """A worker's record (of record_shape) as the job run here gives it (JSON has lists for tuples)."""
        return record

    @classmethod
    def read(cls, path):
        """The job of the spec file at `path`; one that is not JSON, or not this job's fields each of its type (a
        file damaged or edited by hand), is a JsonFileError naming it."""
        doc = read_json(path)
        problem = fields_problem(doc, cls)
        if problem:
            raise JsonFileError(path, f"not a {cls.SPEC_FILE} of {cls.WORKER}: {problem}")
        hints = typing.get_type_hints(cls)
        return cls(**{k: _tupled(v, hints[k]) for k, v in doc.items()})


def _tupled(value, hint):
    """A spec file's list as the tuple a field of type `hint` (or `hint | None`) holds."""
    kinds = {typing.get_origin(h) for h in (hint, *typing.get_args(hint))}
    return tuple(value) if isinstance(value, list) and tuple in kinds else value


def add_runner_arguments(ap, noun: str) -> None:
    """--parallel, --workers, --ray-address and --gpus-per-<noun>: how run_jobs runs the jobs."""
    ap.add_argument("--parallel", choices=PARALLEL, default="none",
                    help=f"{noun}s one after another (default); one process per visible GPU; one Ray task each")
    ap.add_argument("--workers", type=positive_int, default=None, metavar="N",
                    help="local: at most this many processes (GPUs)")
    ap.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="ray: the cluster to join, HOST:PORT, or auto: the one `ray start` last started on this "
                         "machine (default: $RAY_ADDRESS, else that one, else a new Ray of this machine alone)")
    ap.add_argument(f"--gpus-per-{noun}", type=nonnegative_float, default=None, metavar="G",
                    help=f"ray: GPUs each {noun}'s task asks for (default 1; 0 for CPU workers)")


def check_runner_arguments(args, noun: str) -> None:
    """A runner's flag given with another --parallel is refused (it would be ignored without a word);
    --gpus-per-<noun> defaults to 1."""
    gpus = f"gpus_per_{noun}"
    for flag, value, runner in (("--workers", args.workers, "local"), ("--ray-address", args.ray_address, "ray"),
                                (f"--gpus-per-{noun}", getattr(args, gpus), "ray")):
        if value is not None and args.parallel != runner:
            raise ScaleoutError(f"{flag}: only with --parallel {runner} (not --parallel {args.parallel}, which "
                                "would ignore it)")
    if getattr(args, gpus) is None:
        setattr(args, gpus, 1.0)


def run_jobs(jobs: list, parallel: str, *, here, remote, backend: str | None, noun: str, workers: int | None = None,
             ray_address: str | None = None, gpus: float = 1.0, inputs=None, on_result=None, log=print) -> list[dict]:
    """Every job's record, in the jobs' order: `here(job)` in this process (`parallel` "none"), a worker
    process per job (local) or `remote(job, *inputs(job, put))` as a Ray task (see run_ray).
    `on_result(job, record)` is called as each job ends (after all of them with Ray)."""
    def ended(job, record: dict) -> dict:
        if on_result is not None:
            on_result(job, record)
        return record

    if parallel == "none":
        return [ended(job, here(job)) for job in jobs]
    if parallel == "local":
        slots = local_slots(backend, workers, len(jobs))
        log(f"local workers: {len(slots)} ({'GPUs ' + ','.join(slots) if slots[0] is not None else 'CPU'})")
        return run_local(jobs, slots, {"FOXC_BACKEND": backend} if backend else {}, on_result)
    if parallel == "ray":
        # a Ray worker has its node's environment, not this process's: it is told the backend (--backend, else
        # $FOXC_BACKEND here) as a local worker inherits it
        chosen = backend or os.environ.get("FOXC_BACKEND")
        records = run_ray(jobs, remote, inputs=inputs, address=ray_address, num_gpus=gpus, noun=noun,
                          env={"FOXC_BACKEND": chosen} if chosen else None)
        return [ended(job, record) for job, record in zip(jobs, records)]
    raise ValueError(f"parallel must be none, local or ray, got '{parallel}'")


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else every device the driver counts."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and not g.strip().startswith("-")]
    try:
        return [str(i) for i in range(device_count())]
    except CudaError:  # no usable driver: no GPU to hand out
        return []


def local_slots(backend: str | None, workers: int | None, jobs: int) -> list[str | None]:
    """GPU ids for one process each (`workers` above the GPUs share them, in turn), or CPU worker slots (None) on
    the reference backend."""
    backend = backend or os.environ.get("FOXC_BACKEND") or "auto"
    gpus = [] if backend == "reference" else visible_gpus()
    if gpus:
        return [gpus[i % len(gpus)] for i in range(workers)] if workers else gpus
    if backend == "cuda":
        raise ScaleoutError("--parallel local with --backend cuda: no visible GPU")
    return [None] * max(1, min(jobs, workers or os.cpu_count() or 1))


def run_local(jobs: list, slots: list[str | None], env: dict | None = None, on_result=None) -> list[dict]:
    """A worker process per job, at most one per slot at once; `slots`: GPU ids (one GPU may be several slots:
    processes sharing it), or None for CPU workers.

    A worker's stdout/stderr go to `worker.log` in the job's directory; `on_result(job, record)` is
    called as each job ends."""
    if not slots:
        raise ValueError("run_local needs at least one slot")
    pending, free = list(jobs), list(range(len(slots)))  # slots by position: a GPU named twice is two
    running: list[tuple] = []  # (job, process, log file, slot)
    results: dict = {}
    while pending or running:
        while pending and free:
            slot, job = free.pop(0), pending.pop(0)
            running.append((job, *_start_worker(job, slots[slot], env), slot))
        for entry in [r for r in running if r[1].poll() is not None]:
            job, proc, log, slot = entry
            log.close()
            running.remove(entry)
            free.append(slot)
            results[job.key] = _worker_record(job, proc.returncode)
            if on_result is not None:
                on_result(job, results[job.key])
        if running:
            time.sleep(POLL_S)
    return [results[job.key] for job in jobs]


def _start_worker(job, slot: str | None, env: dict | None):
    """`python -m job.WORKER SPEC` on `slot`; (the process, its open log file)."""
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / job.SPEC_FILE
    spec_path.write_text(job.to_json())
    child_env = {**os.environ, **(env or {})}
    if slot is not None:
        child_env["CUDA_VISIBLE_DEVICES"] = slot
    log = open(out / WORKER_LOG, "w")
    return subprocess.Popen([sys.executable, "-m", job.WORKER, str(spec_path)], stdout=log,
                            stderr=subprocess.STDOUT, env=child_env), log


def _worker_record(job, returncode: int) -> dict:
    """The record the worker wrote, or a failed one with the end of its log."""
    result_path = Path(job.out_dir) / RESULT_FILE
    unread = ""
    if result_path.is_file():
        try:
            record = read_json(result_path)
            if problem := shape_problem(record, job.record_shape(record)):  # JSON, but not what the report reads
                raise JsonFileError(result_path, f"not a record of {job.WORKER}: {problem}")
            return job.restored(record)
        except (OSError, JsonFileError) as e:  # a worker killed while writing it leaves it torn
            unread = f" and its record is unreadable ({e})"
    tail = (Path(job.out_dir) / WORKER_LOG).read_text(errors="replace")[-2000:]
    return job.failed(f"worker exited with status {returncode}{unread}:\n{tail}")


def serve(argv: list[str], job_type: type[Job], work) -> int:
    """A worker process's main: read the job's spec file argv names, `work(job)`, write its record as
    result.json in the job's directory; exit status 1 when the record is a failure."""
    if len(argv) != 1:
        print(f"usage: python -m {job_type.WORKER} {job_type.SPEC_FILE}", file=sys.stderr)
        return 2
    return run(f"python -m {job_type.WORKER}", lambda: _serve(job_type.read(argv[0]), work))


def _serve(job, work) -> int:
    record = work(job)
    Path(job.out_dir).mkdir(parents=True, exist_ok=True)
    # atomically: a worker killed while writing leaves no torn record for the parent to misread
    atomic_write(Path(job.out_dir) / RESULT_FILE, [(json.dumps(record) + "\n").encode()], intact="no record written")
    if record.get("error"):
        print(record["error"], file=sys.stderr)
        return 1
    return 0


def require_ray():
    """The ray module, or a ScaleoutError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ScaleoutError("Ray is not installed: pip install 'foxc[ray]' (or run with --parallel local)") from None
    return ray


def run_ray(jobs: list, work, *, inputs=None, address: str | None = None, num_gpus: float = 1,
            noun: str = "job", env: dict | None = None) -> list[dict]:
    """One Ray task per job (`num_gpus` each) running `work(job, *inputs(job, put))`: `put(key, make)`
    puts make() into the object store once per key, so an input several jobs share travels once.
    Connects to `address` if needed (None: as ray.init, $RAY_ADDRESS, else the cluster `ray start` last
    started on this machine, else a new local Ray); `noun` names the job and its flag
    --gpus-per-NOUN in the error of a cluster with too few GPUs; `env`: environment variables set in
    each task's worker (which otherwise has its node's environment, not this process's)."""
    ray = require_ray()
    if not ray.is_initialized():
        ray.init(address=address)
    have = ray.cluster_resources().get("GPU", 0)
    if num_gpus > have:
        # a task asking for more GPUs than the cluster has would wait for ever
        raise ScaleoutError(f"each {noun} asks for {num_gpus:g} GPU(s) but the Ray cluster has {have:g}; "
                            f"use --gpus-per-{noun} 0 for CPU workers (reference backend)")
    task = ray.remote(num_gpus=num_gpus, num_cpus=1, **({"runtime_env": {"env_vars": dict(env)}} if env else {}))(work)
    # a Ray worker runs in its node's directory, not this one: a relative out_dir (the default runs/...) would put
    # the job's files there, not where its record says
    jobs = [replace(job, out_dir=str(Path(job.out_dir).absolute())) for job in jobs]
    refs: dict = {}

    def put(key, make):
        if key not in refs:
            refs[key] = ray.put(make())
        return refs[key]

    futures = [task.remote(job, *(inputs(job, put) if inputs else ())) for job in jobs]
    return [_ray_record(ray, job, future) for job, future in zip(jobs, futures)]


def _ray_record(ray, job, future) -> dict:
    """A Ray task's record, or the job's failed one where Ray could not run the task to its end: its worker process
    died (the OOM killer, a crash, its node lost; after Ray's retries), or the task could not start there. One
    ray.get of every task raised at the first such task, and the other jobs' records were lost."""
    try:
        return ray.get(future)
    except ray.exceptions.RayError as e:
        return job.failed(f"Ray task failed: {type(e).__name__}: {e}")
