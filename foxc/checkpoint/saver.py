"""Periodic checkpoints in a run directory: `checkpoint-<step>.foxc`, the newest few kept."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from ..numbers import whole
from .atomic import remove_stale_temp_files
from .errors import CheckpointSaveError
from .format import write_checkpoint

CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)\.foxc")


def list_checkpoints(out_dir) -> list[tuple[int, Path]]:
    """(step, path) of every `checkpoint-<step>.foxc` in `out_dir`, oldest first (temporary files never match)."""
    out_dir = Path(out_dir)
    return sorted((int(match[1]), entry) for entry in out_dir.iterdir()
                  if (match := CHECKPOINT_RE.fullmatch(entry.name)) and entry.is_file()) if out_dir.is_dir() else []


class CheckpointSaver:
    """Saves `checkpoint-<step>.foxc` atomically into `out_dir` and keeps the `keep` of the highest steps, the one
    just written always among them; older ones are removed only once a new one is on disk."""

    def __init__(self, out_dir, keep: int = 2):
        assert whole(keep) and keep >= 1, f"keep: a whole number >= 1, got {keep!r}"
        self.out_dir, self.keep = Path(out_dir), int(keep)
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temp_files(self.out_dir, CHECKPOINT_RE)
        except OSError as exc:
            raise CheckpointSaveError(f"cannot use checkpoint directory {self.out_dir}: {exc.strerror or exc}",
                                      exc.errno) from exc

    def save(self, step: int, sections: dict, meta: dict | None = None) -> Path:
        """Write the checkpoint of `step`, then prune; a failed save raises CheckpointSaveError and changes nothing."""
        path = write_checkpoint(self.out_dir / f"checkpoint-{int(step)}.foxc", step, sections, meta)
        others = [older for _, older in list_checkpoints(self.out_dir) if older != path]
        for older in others[:max(0, len(others) - (self.keep - 1))]:  # the newest keep - 1 stay beside `path`
            try:
                older.unlink()
            except OSError as exc:  # a failed removal only warns
                warnings.warn(f"could not remove old checkpoint {older}: {exc.strerror or exc}", stacklevel=2)
        return path
