"""What tests/test_scaleout_ray.py runs on a real Ray cluster: the cluster itself (`ray start --head --block` on
this machine, in a temporary directory and a process group of its own, stopped by its id), and fold trainers that
fail in a Ray worker (`--trainer ray_helpers:FAILING`: the workers import this module, so it is on their
PYTHONPATH)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # this tree's foxc: the workers import it, not another checkout's
TESTS = Path(__file__).resolve().parent
START_S = 120  # a cold `ray start` on two busy cores takes some seconds
WHERE = "worker.json"  # what a FailFolds fold saw in its worker (FailFolds.train)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_with_tree(**extra: str) -> dict:
    """This process's environment with this tree's foxc and these helpers first on PYTHONPATH, and no RAY_ADDRESS
    (which would send a run to another cluster)."""
    path = [str(ROOT), str(TESTS), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return {**env, "PYTHONPATH": os.pathsep.join(path), "RAY_USAGE_STATS_ENABLED": "0", **extra}


def ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")  # the ray of this interpreter's environment
    return str(beside) if beside.is_file() else (shutil.which("ray") or "ray")


class RayCluster:
    """A one-node Ray cluster of `num_cpus` CPUs and no GPU, as a user starts one (`ray start --head`), with its
    own temporary directory and ports (another cluster on this machine is left alone). Its workers run in that
    directory, not the test's: a path a job leaves relative lands there."""

    def __init__(self, num_cpus: int = 2):
        # short: Ray's unix socket paths (under --temp-dir) have a length limit
        self.dir = Path(tempfile.mkdtemp(prefix="foxc-ray-", dir="/tmp"))
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        # a command run with these finds this cluster as the one `ray start` last started on this machine (Ray looks
        # for it under $RAY_TMPDIR/ray): --ray-address auto, or none
        self.env = {"RAY_TMPDIR": str(self.dir)}
        self.log_path = self.dir / "head.log"
        cmd = [ray_cli(), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
               f"--num-cpus={num_cpus}", "--num-gpus=0", "--disable-usage-stats", "--include-dashboard=false",
               f"--temp-dir={self.dir / 'ray'}", f"--dashboard-port={free_port()}",
               f"--dashboard-agent-listen-port={free_port()}"]
        with self.log_path.open("w") as log:
            # a session of its own: every process of the cluster is in its process group, which stop() ends
            self.proc = subprocess.Popen(cmd, cwd=self.dir, env=env_with_tree(), stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + START_S
        while "Ray runtime started" not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log_path.read_text(errors="replace")
                self.stop()
                raise RuntimeError(f"ray start --head did not start:\n{log[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM to `ray start --block`, which drains and ends the processes it started; what is left of its
        process group after a minute is killed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group is the cluster's alone (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class FailFolds:
    """The baseline trainer, except that fold `raises` raises and fold `exits` ends its worker process at once
    (os._exit, as the kernel's OOM killer or a segfault would: no record, no traceback). Every fold first writes
    what its worker saw (WHERE): its pid, the foxc it imported, $FOXC_BACKEND, its working directory."""
    name, is_baseline = "baseline: failing folds (tests/ray_helpers.py)", True

    def __init__(self, raises: int, exits: int):
        self.raises, self.exits = raises, exits

    def train(self, window, steps, out_dir, config):
        import foxc
        from foxc.evaluate.baseline import TRAINER
        (Path(out_dir) / WHERE).write_text(json.dumps({"pid": os.getpid(), "foxc": foxc.__file__, "cwd": os.getcwd(),
                                                       "FOXC_BACKEND": os.environ.get("FOXC_BACKEND")}))
        if config["fold"] == self.raises:
            raise RuntimeError(f"fold {self.raises} broke in its trainer")
        if config["fold"] == self.exits:
            os._exit(17)
        return TRAINER.train(window, steps, out_dir, config)

    def load_policy(self, checkpoint, config, rt=None):
        from foxc.evaluate.baseline import TRAINER
        return TRAINER.load_policy(checkpoint, config)


FAILING = FailFolds(raises=0, exits=1)  # of three folds: the third finishes


def exit_in(key):
    """A sweep's Ray task (run_ray's `work`) that ends its worker process in the run of `key`, and otherwise runs the
    run as the sweep does."""
    def work(spec, *inputs):
        if spec.key == key:
            os._exit(17)
        from foxc.sweep.point import run_point_safely
        return run_point_safely(spec, *inputs)
    return work
