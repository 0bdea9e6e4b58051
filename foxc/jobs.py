"""Jobs (walk-forward folds, sweep runs) run as `--parallel` says: `none`, one after another in this process;
`local`, a worker process per job, at most one per slot (a GPU id given as CUDA_VISIBLE_DEVICES; on the reference
backend just a process); `ray`, one Ray task per job with `--gpus-per-<noun>` GPUs, large inputs through Ray's object
store (no shared file system needed; records come back, files stay where they were written).

A job is a dataclass of JSON-able fields deriving from Job; `work(job, *inputs) -> record` never raises (a failure
is a record with `error`).
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

from .checkpoint.atomic import atomic_write
from .cli import nonnegative_float, positive_int, run
from .driver.device import device_count
from .driver.errors import CudaError
from .errors import UserError
from .jsonfile import JsonFileError, fields_problem, read_json, shape_problem

POLL_S = 0.05
RESULT_FILE = "result.json"
WORKER_LOG = "worker.log"


class Job:
    """A job's `key` (unique in one call), `out_dir`, `failed(error)` (the record of a crashed worker), and its worker
    process `python -m WORKER OUT_DIR/SPEC_FILE` (whose main is `serve`)."""
    SPEC_FILE: ClassVar[str]
    WORKER: ClassVar[str]
    CONFIGS: ClassVar[dict[str, type]] = {}  # a field that holds a dataclass's fields -> that dataclass

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    def record_shape(self, record: dict) -> dict:
        """What a worker's record must hold (shape_problem's shape); a result.json without it is refused."""
        return {}

    def restored(self, record: dict) -> dict:
        """A worker's record as the job run here gives it."""
        return record

    @classmethod
    def read(cls, path):
        """The job of a spec file; one not of this job's fields, each of its type, is a JsonFileError naming it."""
        doc = read_json(path)
        if problem := fields_problem(doc, cls):
            raise JsonFileError(path, f"not a {cls.SPEC_FILE} of {cls.WORKER}: {problem}")
        hints = typing.get_type_hints(cls)
        return cls(**{k: tuple(v) if isinstance(v, list) and tuple in {typing.get_origin(h) for h in (
            hints[k], *typing.get_args(hints[k]))} else v for k, v in doc.items()})


def add_runner_arguments(ap, noun: str) -> None:
    ap.add_argument("--parallel", choices=("none", "local", "ray"), default="none",
                    help=f"{noun}s one after another (default); one process per visible GPU; one Ray task each")
    ap.add_argument("--workers", type=positive_int, default=None, metavar="N",
                    help="local: at most this many processes (GPUs)")
    ap.add_argument("--ray-address", default=None, metavar="ADDR",
                    help="ray: the cluster to join, HOST:PORT, or auto: the one `ray start` last started on this "
                         "machine (default: $RAY_ADDRESS, else that one, else a new Ray of this machine alone)")
    ap.add_argument(f"--gpus-per-{noun}", type=nonnegative_float, default=None, metavar="G",
                    help=f"ray: GPUs each {noun}'s task asks for (default 1; 0 for CPU workers)")


def check_runner_arguments(args, noun: str) -> None:
    """A runner's flag beside another --parallel is refused (it would be ignored); --gpus-per-<noun> defaults to 1."""
    gpus = f"gpus_per_{noun}"
    for flag, value, runner in (("--workers", args.workers, "local"), ("--ray-address", args.ray_address, "ray"),
                                (f"--gpus-per-{noun}", getattr(args, gpus), "ray")):
        if value is not None and args.parallel != runner:
            raise UserError(f"{flag}: only with --parallel {runner} (not --parallel {args.parallel}, which "
                            "would ignore it)")
    if getattr(args, gpus) is None:
        setattr(args, gpus, 1.0)


def run_jobs(jobs: list, parallel: str, *, here, remote, backend: str | None, noun: str, workers: int | None = None,
             ray_address: str | None = None, gpus: float = 1.0, inputs=None, on_result=None, log=print) -> list[dict]:
    """Every job's record, in order: `here(job)` in this process, a worker process each (local) or
    `remote(job, *inputs(job, put))` as a Ray task (run_ray); `on_result(job, record)` as each ends (after all, Ray)."""
    assert parallel in ("none", "local", "ray"), parallel
    if parallel == "local":
        slots = local_slots(backend, workers, len(jobs))
        log(f"local workers: {len(slots)} ({'GPUs ' + ','.join(slots) if slots[0] is not None else 'CPU'})")
        return run_local(jobs, slots, {"FOXC_BACKEND": backend} if backend else {}, on_result)
    if parallel == "none":
        records = (here(job) for job in jobs)
    else:  # a Ray worker has its node's environment, not this process's: it is told the backend
        chosen = backend or os.environ.get("FOXC_BACKEND")
        records = run_ray(jobs, remote, inputs=inputs, address=ray_address, num_gpus=gpus, noun=noun,
                          env={"FOXC_BACKEND": chosen} if chosen else None)
    out = []
    for job, record in zip(jobs, records):
        if on_result is not None:
            on_result(job, record)
        out.append(record)
    return out


def local_slots(backend: str | None, workers: int | None, jobs: int) -> list[str | None]:
    """GPU ids, one process each (`workers` above the GPUs share them in turn): CUDA_VISIBLE_DEVICES, else every
    device; CPU worker slots (None) on the reference backend."""
    backend = backend or os.environ.get("FOXC_BACKEND") or "auto"
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = []
    if backend != "reference" and env is not None:
        gpus = [g.strip() for g in env.split(",") if g.strip() and not g.strip().startswith("-")]
    elif backend != "reference":
        try:
            gpus = [str(i) for i in range(device_count())]
        except CudaError:  # no usable driver: no GPU to hand out
            pass
    if gpus:
        return [gpus[i % len(gpus)] for i in range(workers)] if workers else gpus
    if backend == "cuda":
        raise UserError("--parallel local with --backend cuda: no visible GPU")
    return [None] * max(1, min(jobs, workers or os.cpu_count() or 1))


def run_local(jobs: list, slots: list[str | None], env: dict | None = None, on_result=None) -> list[dict]:
    """A worker process per job, at most one per slot at once (a GPU named twice is two slots); its output goes to
    `worker.log` in the job's directory."""
    assert slots
    pending, free, running, results = list(jobs), list(range(len(slots))), [], {}
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
    """`python -m job.WORKER SPEC` on `slot`: (the process, its open log file)."""
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / job.SPEC_FILE
    spec_path.write_text(job.to_json())
    child_env = {**os.environ, **(env or {}), **({"CUDA_VISIBLE_DEVICES": slot} if slot is not None else {})}
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
    """A worker process's main: `work(job)` of the spec file argv names, its record written as result.json; exit
    status 1 when the record is a failure."""
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
    try:
        import ray
    except ImportError:
        raise UserError("Ray is not installed: pip install 'foxc[ray]' (or run with --parallel local)") from None
    return ray


def run_ray(jobs: list, work, *, inputs=None, address: str | None = None, num_gpus: float = 1,
            noun: str = "job", env: dict | None = None) -> list[dict]:
    """One Ray task per job (`num_gpus` each) running `work(job, *inputs(job, put))`: `put(key, make)` puts make()
    into the object store once per key. `address`: as ray.init's; `env`: set in each task's worker."""
    ray = require_ray()
    if not ray.is_initialized():
        ray.init(address=address)
    have = ray.cluster_resources().get("GPU", 0)
    if num_gpus > have:  # a task asking for more GPUs than the cluster has would wait for ever
        raise UserError(f"each {noun} asks for {num_gpus:g} GPU(s) but the Ray cluster has {have:g}; "
                        f"use --gpus-per-{noun} 0 for CPU workers (reference backend)")
    task = ray.remote(num_gpus=num_gpus, num_cpus=1, **({"runtime_env": {"env_vars": dict(env)}} if env else {}))(work)
    # a Ray worker runs in its node's directory: a relative out_dir would put the job's files there
    jobs = [replace(job, out_dir=str(Path(job.out_dir).absolute())) for job in jobs]
    refs: dict = {}

    def put(key, make):
        if key not in refs:
            refs[key] = ray.put(make())
        return refs[key]

    futures = [task.remote(job, *(inputs(job, put) if inputs else ())) for job in jobs]
    records = []
    for job, future in zip(jobs, futures):
        try:  # one ray.get of every task raised at the first that died, and the others' records were lost
            records.append(ray.get(future))
        except ray.exceptions.RayError as e:  # its worker died (OOM killer, node lost), or it could not start
            records.append(job.failed(f"Ray task failed: {type(e).__name__}: {e}"))
    return records
