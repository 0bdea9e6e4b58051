"""Training bits of a foxc tree, as hashes: two trees that print the same lines train to the same bits.

    PYTHONPATH=$PWD python3 tools/fingerprint.py [cuda|reference]

Five short runs (B = 16; B = 1,024, K = 32; B = 256 with the gate, the seed clamp, the plateau and
PopArt on; B = 1,024 and B = 256 in TF32), each printing a hash of the exported trainer state and one
of its diagnostics frames (the device clock `t_ns` left out), and the frame count. Run it from the root of each tree in one
device command (an old revision: `git archive REV foxc tests | tar -x -C exp/old`, then
`cd exp/old && PYTHONPATH=$PWD python3 /path/to/tools/fingerprint.py cuda`): equal lines mean a
kernel change kept every bit, so the learning benchmark's figures stand as they were.
"""
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path.cwd() / "tests"))
from foxc.driver.backend import open_runtime  # noqa: E402
from foxc.trainer.run import Trainer  # noqa: E402
from foxc.trainer.state import export_state  # noqa: E402
from trainer_cases import config, market  # noqa: E402

RUNS = [
    ("b16_graph", dict(graph="on", n_backtests=16), 40),
    ("b1024_graph", dict(graph="on", n_backtests=1024, seq_len=32, per_capacity=4096), 60),
    ("b256_gate_seedclamp", dict(n_backtests=256, per_capacity=1024, graph="on", gate="on", loss_clamp="seed", isv=(
        ("lr_plateau_patience", 2.0), ("lr_warmup_steps", 0.0), ("popart_rate", 0.01))), 60),
    ("b1024_tf32_graph", dict(graph="on", n_backtests=1024, seq_len=32, per_capacity=4096, precision="tf32"), 60),
    # the unfused encoder, whose 8,192-row input projection takes TF32 dW and FP32 db split passes
    ("b256_tf32_graph", dict(graph="on", n_backtests=256, seq_len=32, per_capacity=1024, precision="tf32"), 40),
]


def state_hash(t: Trainer) -> str:
    h = hashlib.sha256()
    for name, value in sorted(export_state(t.ts).items()):
        h.update(name.encode())
        for part in ((value.m, value.v, str(value.step).encode()) if hasattr(value, "m") else (value,)):
            h.update(part if isinstance(part, bytes) else np.asarray(part).tobytes())
    return h.hexdigest()[:16]


def main(backend: str) -> None:
    rt = open_runtime(backend)
    for name, settings, steps in RUNS:
        cfg = config(**settings)
        t = Trainer(rt, cfg, *market(cfg.synthetic_rows, cfg.seed), None)
        frames, poll = [], t.ts.diagnostics.poll

        def keep(poll=poll, frames=frames):
            got = poll()
            frames.extend(got)
            return got
        t.ts.diagnostics.poll = keep
        t.train(steps)
        without_clock = [{k: x for k, x in f.items() if k != "t_ns"} for f in frames]
        frame_hash = hashlib.sha256(json.dumps(without_clock).encode()).hexdigest()[:16]
        print(name, state_hash(t), frame_hash, len(frames), flush=True)
        t.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cuda")
