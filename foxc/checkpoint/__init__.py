"""FOXC v1 checkpoints (docs/internals/checkpoint-format.md): `CheckpointSaver(out_dir).save(step, state, meta)`
writes a trainer's state dict (numpy arrays, AdamState, bytes) atomically; `read_checkpoint(path,
expected_from(state)).sections` reads it back, verified as hostile input."""
from .adamw import AdamState, unpack_adamw
from .errors import CheckpointError, CheckpointSaveError
from .format import Checkpoint, encode_checkpoint, parse_checkpoint, read_checkpoint, write_checkpoint
from .meta import config_differences, expected_from
from .saver import CheckpointSaver, list_checkpoints

__all__ = ["AdamState", "Checkpoint", "CheckpointError", "CheckpointSaveError", "CheckpointSaver", "config_differences",
           "encode_checkpoint", "expected_from", "list_checkpoints", "parse_checkpoint", "read_checkpoint",
           "unpack_adamw", "write_checkpoint"]
