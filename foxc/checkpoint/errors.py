"""The two ways a checkpoint goes wrong: a file that cannot be trusted, and a save that failed."""
from __future__ import annotations

from ..errors import UserError


class CheckpointError(UserError):
    """A file that is not a valid FOXC checkpoint (or does not fit the model).

    The message names the file (`path`, whenever a file was read), then the section and the
    byte offset where the reader stopped trusting it, whenever there is one:
    `runs/a/checkpoint-5.foxc: section 'dqn_w' at byte 812: ...`.
    """

    def __init__(self, reason: str, *, section: str | None = None, offset: int | None = None,
                 path=None):
        self.reason = reason
        self.section = section
        self.offset = offset
        self.path = None if path is None else str(path)
        super().__init__(self._render())

    def with_path(self, path) -> "CheckpointError":
        """The same error naming the file it was read from (unchanged when it already names one)."""
        if self.path is not None:
            return self
        return CheckpointError(self.reason, section=self.section, offset=self.offset, path=path)

    def _render(self) -> str:
        where = [] if self.section is None else [f"section '{self.section}'"]
        where += [] if self.offset is None else [f"at byte {self.offset}"]
        head = "" if self.path is None else f"{self.path}: "
        return head + (f"{' '.join(where)}: {self.reason}" if where else self.reason)


class CheckpointSaveError(UserError):
    """A save that did not complete (disk full, permission denied, ...).

    Whatever was on disk before is untouched and no temporary file is left
    behind. `errno` carries the operating system's code when there is one.
    """

    def __init__(self, message: str, errno: int | None = None):
        self.errno = errno
        super().__init__(message)
