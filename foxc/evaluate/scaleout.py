"""Running folds: in this process, one process per visible GPU of this machine, or one Ray task per fold.

- `run_sequential`: fold after fold in this process.
- `run_local(specs, slots)`: a subprocess per fold (`python -m foxc.evaluate.folds`), at most one
  per slot at a time; a slot is a GPU id, given to its processes as CUDA_VISIBLE_DEVICES (so each
  sees one GPU, as device 0). On the reference backend a slot is just a worker process.
- `run_ray(specs, ...)`: one Ray task per fold with `num_gpus` (default 1) each: Ray places the
  tasks on the cluster's GPUs (any machine) and sets CUDA_VISIBLE_DEVICES itself; the windows
  travel through Ray's object store, so workers need no shared file system. Results (figures and
  a downsampled equity curve) come back to the head; checkpoints stay on the machine that made
  them (each record names its host and path).
Every runner returns the fold records in fold order; a failed fold gives a record with `error`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .folds import FoldSpec, failed_record, run_fold_safely


class ScaleoutError(RuntimeError):
    """A set-up the folds cannot run on (Ray missing, too few GPUs); the message says what to change."""

POLL_S = 0.05


def run_sequential(specs: list[FoldSpec], records: np.ndarray) -> list[dict]:
    return [run_fold_safely(s, records[s.train[0]:s.train[1]], records[s.eval[0]:s.eval[1]]) for s in specs]


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES if set, else every device the driver counts."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and not g.strip().startswith("-")]
    try:
        from cuda.bindings import driver
        (err,) = driver.cuInit(0)
        if err:
            return []
        err, count = driver.cuDeviceGetCount()
        return [str(i) for i in range(count)] if not err else []
    except (ImportError, RuntimeError):
        return []


def run_local(specs: list[FoldSpec], slots: list[str | None], env: dict | None = None) -> list[dict]:
    """One subprocess per fold, at most one per slot at once; `slots`: GPU ids, or None for CPU workers.

    Each spec must name `data_npy`. A worker's stdout/stderr go to `worker.log` in its fold directory."""
    if not slots:
        raise ValueError("run_local needs at least one slot")
    pending = list(specs)
    running: dict[str, tuple] = {}  # key -> (spec, process, log file, slot)
    free = list(dict.fromkeys(slots))
    results: dict[int, dict] = {}
    while pending or running:
        while pending and free:
            slot, spec = free.pop(0), pending.pop(0)
            fold_dir = Path(spec.out_dir)
            fold_dir.mkdir(parents=True, exist_ok=True)
            spec_path = fold_dir / "fold.json"
            spec_path.write_text(spec.to_json())
            child_env = {**os.environ, **(env or {})}
            if slot is not None:
                child_env["CUDA_VISIBLE_DEVICES"] = slot
            log = open(fold_dir / "worker.log", "w")
            proc = subprocess.Popen([sys.executable, "-m", "foxc.evaluate.folds", str(spec_path)],
                                    stdout=log, stderr=subprocess.STDOUT, env=child_env)
            running[str(slot) + f"#{spec.fold}"] = (spec, proc, log, slot)
        for key, (spec, proc, log, slot) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[key]
            free.append(slot)
            result_path = Path(spec.out_dir) / "result.json"
            if result_path.is_file():
                results[spec.fold] = json.loads(result_path.read_text())
            else:
                tail = (Path(spec.out_dir) / "worker.log").read_text()[-2000:]
                results[spec.fold] = failed_record(spec, f"worker exited with status {proc.returncode}:\n{tail}")
        if running:
            time.sleep(POLL_S)
    return [results[s.fold] for s in specs]


def run_ray(specs: list[FoldSpec], records: np.ndarray, *, address: str | None = None, num_gpus: float = 1,
            num_cpus: float = 1, init_kwargs: dict | None = None) -> list[dict]:
    """One Ray task per fold (`num_gpus` each); connects to `address` (or starts a local Ray) if needed."""
    try:
        import ray
    except ImportError:
        raise ScaleoutError("Ray is not installed: pip install 'foxc[ray]' (or run with --parallel local)") from None
    if not ray.is_initialized():
        ray.init(address=address, **(init_kwargs or {}))
    have = ray.cluster_resources().get("GPU", 0)
    if num_gpus > have:
        # a task asking for more GPUs than the cluster has would wait for ever
        raise ScaleoutError(f"each fold asks for {num_gpus} GPU(s) but the Ray cluster has {have:g}; "
                           "use --gpus-per-fold 0 for CPU workers (reference backend)")
    task = ray.remote(num_gpus=num_gpus, num_cpus=num_cpus)(run_fold_safely)
    windows: dict[tuple[int, int], object] = {}

    def ref(bounds):
        if bounds not in windows:
            windows[bounds] = ray.put(np.ascontiguousarray(records[bounds[0]:bounds[1]]))
        return windows[bounds]

    futures = [task.remote(s, ref(s.train), ref(s.eval)) for s in specs]
    return ray.get(futures)
