"""FOXC v1 checkpoints: the file format, atomic saving, and the hostile reader.

A trainer saves its state dict (numpy arrays, AdamState, bytes) with
`CheckpointSaver(out_dir).save(step, state, meta)` and restores it with
`read_checkpoint(path, expected_from(state)).sections`. docs/checkpoint-format.md
describes the bytes. A FOXC v1 file from another writer (no `meta`, no `checksum`:
the Rust trainer's layout, seed_layout.py) reads too, with `Checkpoint.notes`, but
is refused for resuming.
"""
from .adamw import AdamState, unpack_adamw
from .errors import CheckpointError, CheckpointSaveError
from .format import Checkpoint, encode_checkpoint, parse_checkpoint, read_checkpoint, write_checkpoint
from .meta import config_differences, expected_from
from .saver import CheckpointSaver, list_checkpoints

__all__ = ["AdamState", "Checkpoint", "CheckpointError", "CheckpointSaveError", "CheckpointSaver", "config_differences",
           "encode_checkpoint", "expected_from", "list_checkpoints", "parse_checkpoint", "read_checkpoint",
           "unpack_adamw", "write_checkpoint"]
