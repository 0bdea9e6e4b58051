"""TensorBoard scalars of a run, beside metrics.jsonl (optional: pip install 'foxc[tensorboard]').

Every numeric field of each metrics record goes under `train/` (the greedy evaluation's `eval_*`
fields under `eval/`), live ISV changes under `isv_set/` at the step they took effect, and the ISV
slots a kernel reads under `isv/`, as the bus was last published when the record was written (the
device is then at most the ring's lead ahead of the record's step). Written with tensorboardX into
RUN_DIR/tensorboard/: `tensorboard --logdir RUN_DIR/tensorboard`. A resumed run purges the events a
stopped run wrote past its checkpoint (tensorboardX's `purge_step`), as metrics.jsonl moves their records aside.
"""
from __future__ import annotations

from pathlib import Path

from ..isv.registry import SLOTS

INSTALL = "pip install 'foxc[tensorboard]'"


def _writer_class():
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter


def available() -> bool:
    return _writer_class() is not None


class TensorBoardLog:
    def __init__(self, run_dir, isv=None, start_step: int = 0):
        """`isv`: the run's IsvBus, whose slots are logged with each record (None: not logged). `start_step`: the
        step a resumed run starts from; TensorBoard hides the events of later steps logged before (it logs them
        again)."""
        writer = _writer_class()
        if writer is None:
            raise ImportError(f"--tensorboard needs tensorboardX: {INSTALL}")
        purge = start_step + 1 if start_step else None  # events from this step on are hidden
        self.writer = writer(logdir=str(Path(run_dir) / "tensorboard"), purge_step=purge)
        self.isv = isv
        self.slots = [s.name for s in SLOTS if s.read]

    def write(self, record: dict):
        step = int(record["step"])
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                tag = f"eval/{key.removeprefix('eval_')}" if key.startswith("eval_") else f"train/{key}"
                self.writer.add_scalar(tag, value, step)
        for change in record.get("isv_changes", ()):
            self.writer.add_scalar(f"isv_set/{change['name']}", change["value"], change["step"])
        if self.isv is not None:
            values = self.isv.as_dict()
            for name in self.slots:
                self.writer.add_scalar(f"isv/{name}", values[name], step)
        self.writer.flush()

    def close(self):
        self.writer.close()
