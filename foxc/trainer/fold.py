"""The RL agent as a walk-forward fold trainer (foxc.walkforward.folds): train the integrated
trainer on a fold's window, and evaluate the agent its checkpoint holds with learning off."""
from __future__ import annotations

from contextlib import closing
from pathlib import Path

from ..checkpoint import read_checkpoint
from ..data.labels import LabelConfig, compute_labels
from ..data.source import labelled_need
from ..data.validate import DataError
from ..driver import open_runtime
from ..evaluate.agent import AgentPolicy
from ..evaluate.baseline import no_room_in_fold
from .config import TrainConfig, parse_settings
from .heldout import validation_split
from .run import Trainer, write_json

NAME = "rl: foxc integrated trainer"


class RlFoldTrainer:
    name = NAME
    is_baseline = False

    def train(self, window, steps: int, out_dir: Path, config: dict) -> Path:
        given = parse_settings(list(config.get("train_args", [])), "walk-forward training flags")
        given.pop("data", None)  # a fold trains on its window
        rt = open_runtime(config.get("backend"))
        given.update(n_steps=int(steps), seed=int(config.get("seed", 0)) + int(config.get("fold", 0)))
        cfg = TrainConfig.for_backend(rt.backend, **given)
        window, val = validation_split(cfg, window)  # the policy is chosen on the window's end (selection)
        try:
            labels = compute_labels(window.records, window.tick, LabelConfig(horizons=cfg.horizons))
        except MemoryError:
            raise no_room_labelling(window, len(cfg.horizons), config) from None
        out_dir = Path(out_dir)
        try:  # closed however it ends, so that the next fold in this process has its memory
            with closing(Trainer(rt, cfg, window, labels, out_dir, data_meta={"source": window.source,
                                                                              "fold": config.get("fold")},
                                 val=val)) as trainer:
                summary = trainer.train_logged(label=f"fold {config.get('fold')}")
                write_json(out_dir / "summary.json", summary)  # the fold's record quotes its training (run_fold)
                return trainer.save()
        except MemoryError:  # the host's, or the device's (DeviceOutOfMemory)
            raise no_room_training(window, cfg, config) from None

    def load_policy(self, checkpoint: Path, config: dict, rt) -> AgentPolicy:
        """The run's policy the checkpoint holds (the weights its validation kept, or flat), on the evaluation's
        runtime."""
        return AgentPolicy.from_checkpoint(rt, read_checkpoint(checkpoint))


TRAINER = RlFoldTrainer()


def no_room_labelling(window, horizons: int, config: dict) -> DataError:
    """A fold's training window whose label planes do not fit in memory: what it needed, and the remedy for the
    walk-forward's data (no_room_in_fold)."""
    return no_room_in_fold("labelling its training window", "each fold labels its training window whole",
                           labelled_need(window.n_rows, horizons), window.source, config, "--train-days")


def no_room_training(window, cfg: TrainConfig, config: dict) -> DataError:
    """A fold's training that does not fit in memory (its window and labels, the replay, the backtests' arrays): what
    it needed, and the remedy: fewer backtests, a smaller replay or a shorter window (no_room_in_fold)."""
    need = (f"{labelled_need(window.n_rows, len(cfg.horizons))}, with a replay of --per-capacity {cfg.per_capacity:,} "
            f"transitions and the arrays of --n-backtests {cfg.n_backtests:,} backtests")
    return no_room_in_fold("training on its training window", "each fold trains on its training window whole", need,
                           window.source, config, "--train-days",
                           smaller="fewer --n-backtests or a smaller --per-capacity, or ")
