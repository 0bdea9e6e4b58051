"""One mechanism for a user's mistake.

`UserError` is raised for a user's mistake only (a flag's value, a file, market data, a checkpoint), its
message naming the flag, file or value. The one command-line entry path, `foxc.cli.run`, catches it (and
`OSError`, `MemoryError`) once and prints one line, exit status 2. Anything else is a bug in foxc and keeps
its traceback; misuse of an internal function is an `assert` or a plain `TypeError`/`ValueError`.
Subclasses exist only where a caller tells them apart (`DataError`, `CheckpointError`, ...).

It is a `ValueError` so that Python callers that catch a bad value keep catching it.
"""


class UserError(ValueError):
    """A user's mistake; the message names the flag, file or value."""
