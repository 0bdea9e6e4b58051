"""Walk-forward validation: `python -m foxc.walkforward [--data …] (--folds F | --train-days N --eval-days M) …`.

The data (in time order) is cut into F+1 consecutive windows, or into rolling folds by dates (`windows`); fold i
trains on its training window and evaluates on the next with learning off (`folds`), run one after another, one
process per GPU or one Ray task each (foxc.jobs); `report` judges every fold and writes report.json, report.md and
the plots. Training is pluggable (`--trainer`: rl, baseline or package.module:attribute); flags the command does not
know are passed to the trainer.
"""
from .command import main, walk_forward
from .windows import CachedData, load_data, split_windows

__all__ = ["CachedData", "load_data", "main", "split_windows", "walk_forward"]
