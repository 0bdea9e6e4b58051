"""Checkpoint save and load: time and size of a FOXC file shaped like a B=1,024, PER 65,536 run.

Host arrays to file and back (the backend only labels the figures): a replay of PER x 2 x 128 float32
observations with actions, rewards, flags and the priority tree, ~1.6 M weights with targets and AdamW
states, ISV, PRNG and simulator state per backtest.
"""
from __future__ import annotations

import hashlib
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ..checkpoint import AdamState, CheckpointSaver, encode_checkpoint, expected_from, read_checkpoint
from ..cli import PathArg, positive_int, text_table as table
from ..isv.registry import SLOTS
from . import harness
from .report import write_json

OBS, HIDDEN, ACTIONS, ATOMS = 128, 512, 3, 51
WEIGHTS = {  # name -> shape: an encoder and the heads, about 1.6 M parameters
    "encoder_w1": (OBS, HIDDEN), "encoder_b1": (HIDDEN,), "encoder_w2": (HIDDEN, HIDDEN), "encoder_b2": (HIDDEN,),
    "dqn_w": (HIDDEN, ACTIONS * ATOMS), "dqn_b": (ACTIONS * ATOMS,), "policy_w": (HIDDEN, ACTIONS),
    "policy_b": (ACTIONS,), "value_w": (HIDDEN, 1), "value_b": (1,),
}


def training_state(batch: int, per: int, seed: int = 0) -> dict:
    """A state dict with the sections and sizes a real run checkpoints."""
    rng = np.random.default_rng(seed)
    state = {"isv": np.array([s.bootstrap for s in SLOTS], np.float32)}
    for name, shape in WEIGHTS.items():
        state[name] = (rng.standard_normal(shape) * 0.05).astype(np.float32)
        n = int(np.prod(shape))
        state[f"adam_{name}"] = AdamState(rng.standard_normal(n).astype(np.float32) * 1e-3,
                                          rng.random(n, dtype=np.float32) * 1e-6, 5000, 3e-4, 0.9, 0.999, 1e-8, 0.0)
    state["dqn_w_target"] = state["dqn_w"].copy()
    state["dqn_b_target"] = state["dqn_b"].copy()
    state.update({
        "replay_obs": rng.standard_normal((per, 2, OBS)).astype(np.float32),
        "replay_action": rng.integers(0, ACTIONS, per, dtype=np.int32),
        "replay_reward": rng.standard_normal(per).astype(np.float32),
        "replay_done": rng.integers(0, 2, per, dtype=np.uint8),
        "replay_tree": rng.random(2 * per, dtype=np.float32),
        "replay_cursor": np.array([per // 3, per], np.int64),
        "prng_state": rng.integers(0, 2**32, (batch, 4), dtype=np.uint32),
        "sim_state": rng.standard_normal((batch, 32)).astype(np.float32),
        "data_cursor": rng.integers(0, 1 << 40, batch, dtype=np.int64),
        "counters": np.zeros(16, np.int64),
    })
    return state


def run(batch: int, per: int, repeats: int, directory: Path) -> list[dict]:
    state = training_state(batch, per)
    expected = expected_from(state)
    saver = CheckpointSaver(directory)
    meta = {"config": {"batch": batch, "per": per}, "data": {"source": "bench", "sha256": "0" * 64}}
    encode_t, save_t, load_t, hash_t = [], [], [], []
    for step in range(1, repeats + 1):
        t0 = time.perf_counter()
        encoded = encode_checkpoint(step, state, meta)
        encode_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        path = saver.save(step, state, meta)
        save_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ckpt = read_checkpoint(path, expected)
        load_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        hashlib.sha256(state["replay_obs"]).digest()
        hash_t.append(time.perf_counter() - t0)
    assert np.array_equal(ckpt["replay_obs"], state["replay_obs"])
    mb = encoded.size / 1e6
    replay_mb = state["replay_obs"].nbytes / 1e6

    def row(what, seconds, megabytes):
        return {"what": what, "MB": round(megabytes, 1), "ms": round(seconds * 1e3, 1),
                "MB_per_s": round(megabytes / seconds) if seconds > 0 else ""}

    median = statistics.median
    return [row("encode (layout + sha256 per section)", median(encode_t), mb),
            row("save (encode, write, fsync, rename)", median(save_t), mb),
            row("load (read, verify, decode)", median(load_t), mb),
            row("sha256 of the replay observations", median(hash_t), replay_mb)]


def main(argv=None) -> int:
    ap = harness.parser("checkpoint", __doc__)
    ap.add_argument("--n-backtests", type=positive_int, default=1024, help="backtests B (default 1024)")
    ap.add_argument("--per-capacity", type=positive_int, default=None, help="replay capacity (default 65536; 8192 on reference)")
    ap.add_argument("--repeats", type=positive_int, default=3, help="saves and loads timed; the median is shown")
    ap.add_argument("--dir", type=PathArg("a directory"),
                    help="where to write: a new or empty directory (default: a temporary directory, removed "
                         "afterwards)")
    # the saver keeps the newest two checkpoint-<n>.foxc: never among a user's files
    return harness.run(ap, argv, _main, check=lambda args: args.dir is None or harness.empty_dir("--dir", args.dir))


def _main(args, rt) -> int:
    per = args.per_capacity if args.per_capacity is not None else (65536 if rt.backend == "cuda" else 8192)
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="foxc-bench-ckpt-"))
    try:
        rows = run(args.n_backtests, per, args.repeats, directory)
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)
    print(f"backend {rt.backend}: {rt.device_name}; B={args.n_backtests}, PER={per}, file {rows[0]['MB']} MB")
    print(table(rows, ["what", "MB", "ms", "MB_per_s"]))
    write_json(args.json, "checkpoint", rt, rows, {"n_backtests": args.n_backtests, "per_capacity": per})
    print(f"summary: checkpoint of {rows[0]['MB']} MB (B={args.n_backtests}, PER={per}) saves in {rows[1]['ms']} ms, "
          f"loads in {rows[2]['ms']} ms ({rt.backend})")
    return 0
