"""The two ways a checkpoint goes wrong: a file that cannot be trusted, and a save that failed."""
from __future__ import annotations

from ..errors import UserError


class CheckpointError(UserError):
    """A file that is not a valid FOXC checkpoint (or not one the caller can use). str() names the file, then the
    section and byte offset where the reader stopped trusting it: `a.foxc: section 'dqn_w' at byte 812: ...`."""

    def __init__(self, reason: str, *, section: str | None = None, offset: int | None = None, path=None):
        self.reason, self.section, self.offset = reason, section, offset
        self.path = None if path is None else str(path)
        where = " ".join(([] if section is None else [f"section '{section}'"]) +
                         ([] if offset is None else [f"at byte {offset}"]))
        head = "" if path is None else f"{self.path}: "
        super().__init__(head + (f"{where}: {reason}" if where else reason))

    def with_path(self, path) -> CheckpointError:
        """The same error naming the file it was read from (itself when it names one already)."""
        if self.path is not None:
            return self
        return CheckpointError(self.reason, section=self.section, offset=self.offset, path=path)


class CheckpointSaveError(UserError):
    """A save that did not complete (disk full, ...): what was on disk is untouched; `errno` the system's code."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno
