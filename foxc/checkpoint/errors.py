"""The two ways a checkpoint goes wrong: a file that cannot be trusted, and a save that failed."""
from __future__ import annotations

from ..errors import UserError


class CheckpointError(UserError):
    """A file that is not a valid FOXC checkpoint (or not one the caller can use). str() names the file, then the
    section and byte offset where the reader stopped trusting it: `a.foxc: section 'dqn_w' at byte 812: ...`."""

    def __init__(self, reason: str, *, section: str | None = None, offset: int | None = None, path=None):
        self.reason, self.section, self.offset, self.path = reason, section, offset, path and str(path)
        where = " ".join([f"section '{section}'"] * (section is not None) + [f"at byte {offset}"] * (offset is not None))
        super().__init__(f"{self.path}: " * (path is not None) + f"{where}: " * bool(where) + reason)

    def with_path(self, path) -> CheckpointError:
        """The same error naming the file it was read from (itself when it names one already)."""
        return self if self.path else CheckpointError(self.reason, section=self.section, offset=self.offset, path=path)


class CheckpointSaveError(UserError):
    """A save that did not complete (disk full, ...): what was on disk is untouched; `errno` the system's code."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno
