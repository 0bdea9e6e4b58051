"""Atomic file replacement: a reader sees the old file or the whole new one, never a part.

A temporary file in the destination's directory, fsynced, renamed over the destination, then the directory
fsynced so that the rename survives a power cut. Temporary names (`.NAME.tmp-<pid>-<random>`) match no scan for
`checkpoint-<step>.foxc`.
"""
from __future__ import annotations

import contextlib
import errno as errno_codes
import os
import re
import secrets
from pathlib import Path

from ..paths import process_alive
from .errors import CheckpointSaveError

TEMP_RE = re.compile(r"\.(?P<target>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+")


def write_all(f, chunk) -> None:
    """One buffer to the file (the seam where tests inject a full disk)."""
    f.write(chunk)


def atomic_write(path: Path, chunks, intact: str = "earlier checkpoints are untouched") -> None:
    """Write the buffers in `chunks` to `path` atomically and durably, or raise CheckpointSaveError (its message
    ends with `intact`: what a failed write left as it was)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    what = "create a temporary file"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        what = "write"
        try:
            with open(fd, "wb") as f:
                for chunk in chunks:
                    write_all(f, chunk)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        what = "fsync the directory after renaming"
        fsync_directory(path.parent)
    except OSError as exc:
        code = errno_codes.errorcode.get(exc.errno, "") if exc.errno else ""
        raise CheckpointSaveError(f"could not save {path}: {what} failed: {exc.strerror or exc}"
                                  f"{f' [{code}]' if code else ''}; {intact}", exc.errno) from exc


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno_codes.EINVAL, errno_codes.ENOTSUP):  # filesystems without directory fsync
            raise
    finally:
        os.close(fd)


def remove_stale_temp_files(directory: Path, target: re.Pattern) -> None:
    """Delete temporary files for names matching `target` left by a process that died mid-save; those of a live
    process (another save in progress) are left alone."""
    for entry in Path(directory).iterdir():
        match = TEMP_RE.fullmatch(entry.name)
        if match and target.fullmatch(match["target"]) and not process_alive(int(match["pid"])):
            with contextlib.suppress(OSError):
                entry.unlink()
