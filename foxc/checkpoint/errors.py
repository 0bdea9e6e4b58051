"""The two ways a checkpoint goes wrong: a file that cannot be trusted, and a save that failed."""
from __future__ import annotations


class CheckpointError(Exception):
    """A file that is not a valid FOXC checkpoint (or does not fit the model).

    The message names the section and the byte offset where the reader stopped
    trusting the file, whenever there is one.
    """

    def __init__(self, reason: str, *, section: str | None = None, offset: int | None = None):
        self.reason = reason
        self.section = section
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.section is not None:
            where.append(f"section '{self.section}'")
        if self.offset is not None:
            where.append(f"at byte {self.offset}")
        return f"{' '.join(where)}: {self.reason}" if where else self.reason


class CheckpointSaveError(Exception):
    """A save that did not complete (disk full, permission denied, ...).

    Whatever was on disk before is untouched and no temporary file is left
    behind. `errno` carries the operating system's code when there is one.
    """

    def __init__(self, message: str, errno: int | None = None):
        self.errno = errno
        super().__init__(message)
