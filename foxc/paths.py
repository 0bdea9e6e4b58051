"""One refusal of an empty path, for every command-line flag and library call that takes a path, and one name for
what a path that should be a regular file is instead (file_kind); whether the process a marker or a temporary
file names may still run (process_alive: foxc.checkpoint's saves and foxc.isv's live markers ask it).

`--data "$DATA"` of an unset shell variable is "": Path("") is ".", the current directory, which would be read
as the data or written into, or taken as a flag not given, silently. Here rather than in foxc.cli, whose error
path imports the modules that use it too (trainer.config's flags and settings, data.source).
"""
from __future__ import annotations

import argparse
import os
import stat

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def empty_path(path, what: str) -> str:
    """'an empty path (give WHAT)' when `path` is empty or blank, else "" (check the text as given: Path("") is
    already ".")."""
    return f"an empty path (give {what})" if path is not None and not str(path).strip() else ""


class PathArg:
    """The argparse type of every path flag, `type=PathArg(WHAT)` (as argparse.FileType): the path as `kind`
    (str or Path); an empty one is refused naming the flag ("argument --data: an empty path (give WHAT)"). A
    config file's setting recognises a path setting by it."""

    def __init__(self, what: str, kind=str):
        self.what, self.kind = what, kind

    def __call__(self, text: str):
        problem = empty_path(text, self.what)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return self.kind(text)


def file_kind(path) -> str:
    """What `path` (or an open file descriptor) is when it is not a regular file ("a FIFO", "a directory", ...), else
    "" (a regular file, or one that is not there: opening it says why). Check before opening: the open of a FIFO
    nobody writes waits for a writer, forever."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return ""
    return "" if stat.S_ISREG(mode) else next((kind for is_kind, kind in KINDS if is_kind(mode)), "not a regular file")


def process_alive(pid: int) -> bool:
    """Whether process `pid` of this machine may still run (what a marker or a temporary file names)."""
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        pass  # another user's process (or a pid too large to ask about): assume it runs
    return True
