"""Periodic checkpoints in a run directory: `checkpoint-<step>.foxc`, the newest few kept."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from .adamw import integer
from .atomic import remove_stale_temp_files
from .errors import CheckpointSaveError
from .format import write_checkpoint

CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)\.foxc")


def list_checkpoints(out_dir) -> list[tuple[int, Path]]:
    """(step, path) of every `checkpoint-<step>.foxc` in `out_dir`, oldest step first.

    Temporary files of a save in progress (or of one killed midway) never match.
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    return sorted((int(match[1]), entry) for entry in out_dir.iterdir()
                  if (match := CHECKPOINT_RE.fullmatch(entry.name)) and entry.is_file())


class CheckpointSaver:
    """Saves `checkpoint-<step>.foxc` atomically into `out_dir` and keeps the newest `keep`.

    A trainer calls `save(step, state, meta)` with its state dict (numpy arrays,
    AdamState, bytes). Older checkpoints are removed only after a new one is safely
    on disk; a failed save raises CheckpointSaveError and changes nothing.
    "Newest" is by step number; the checkpoint just written is always kept.
    """

    def __init__(self, out_dir, keep: int = 2):
        if not integer(keep) or keep < 1:  # 1.5 failed in the first save's pruning, after the file was written
            raise ValueError(f"keep must be a whole number >= 1, got {keep!r}")
        self.out_dir = Path(out_dir)
        self.keep = int(keep)
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temp_files(self.out_dir, CHECKPOINT_RE)
        except OSError as exc:
            raise CheckpointSaveError(f"cannot use checkpoint directory {self.out_dir}: {exc.strerror or exc}",
                                      exc.errno) from exc

    def save(self, step: int, sections: dict, meta: dict | None = None) -> Path:
        path = write_checkpoint(self.out_dir / f"checkpoint-{int(step)}.foxc", step, sections, meta)
        self._prune(path)
        return path

    def _prune(self, newest: Path) -> None:
        """Remove all but the newest `keep` checkpoints (never `newest`); a failed removal only warns."""
        others = [path for _, path in list_checkpoints(self.out_dir) if path != newest]
        for path in others[:max(0, len(others) - (self.keep - 1))]:  # the newest keep - 1 stay beside `newest`
            try:
                path.unlink()
            except OSError as exc:
                warnings.warn(f"could not remove old checkpoint {path}: {exc.strerror or exc}", stacklevel=2)
