"""One error path for every foxc command line: a user's mistake ends the command with one line on stderr, exit
status 2, `<prog>: error: <message naming the flag, file or value>`, never a traceback; a bug keeps its traceback.

`ArgumentParser` does it for argparse's errors, `run(prog, body)` for those a command raises (foxc.errors.UserError,
OSError named by its file, MemoryError). A command checks its outputs before any work (`output_file`, `output_dir`),
so a refused run overwrites nothing; every path flag has `type=PathArg(WHAT)`, which refuses an empty one.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

from .driver import BACKENDS, CudaError, open_runtime as _open, select_backend
from .errors import UserError
from .paths import PathArg, empty_path  # noqa: F401 (PathArg: the argparse type of every path flag)


def one_line(message) -> str:
    """A message on one line (a multi-line text joined with single spaces)."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    return text or (type(message).__name__ if isinstance(message, BaseException) else "")


def fail(prog: str, message) -> int:
    """Print `<prog>: error: <message>` as one line on stderr; 2, for main() to return."""
    print(f"{prog.removeprefix('python -m ')}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return 2


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every foxc command: an error is one line naming the flag, exit status 2 (a subcommand's names it
    too: SubcommandParser)."""

    def error(self, message):
        if message.startswith(UNRECOGNIZED):
            message += glob_hint(message.removeprefix(UNRECOGNIZED).split())
        sys.exit(fail(self.prog, message))

    def add_subparsers(self, **kwargs):
        return super().add_subparsers(**{"parser_class": SubcommandParser, **kwargs})


class SubcommandParser(ArgumentParser):
    """A subcommand's parser: arguments it does not take are its error (argparse would hand them back to the
    command's parser, whose error would name the command alone)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, strays = super().parse_known_args(args, namespace)
        if strays:
            self.error(UNRECOGNIZED + " ".join(strays))
        return namespace, strays


UNRECOGNIZED = "unrecognized arguments: "


def glob_hint(strays: list[str]) -> str:
    """A hint when arguments no flag takes are files: the rest of a glob the shell expanded."""
    if any(not a.startswith("-") and os.path.exists(a) for a in strays):
        return " (files of an unquoted glob the shell expanded? quote it, 'DIR/*.parquet', for foxc to read them all)"
    return ""


def text_table(rows: list[dict], columns: list[str], cell=str) -> str:
    """Rows (dicts) as columns under a header and a rule: `cell` writes each value; numbers right-aligned."""
    cells = [[cell(r.get(c, "")) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]

    def aligned(text: str, width: int, raw) -> str:
        return text.rjust(width) if isinstance(raw, (int, float)) or _is_number(text) else text.ljust(width)
    body = ["  ".join(aligned(v, w, r.get(c)) for v, w, c in zip(row, widths, columns)) for row, r in zip(cells, rows)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)), "  ".join("-" * w for w in widths), *body]
    return "\n".join(line.rstrip() for line in lines)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def describe(exc: BaseException) -> str:
    """The message of a user error; an OSError names its file (`PATH: No such file or directory`)."""
    if isinstance(exc, MemoryError) and not str(exc):
        return "out of host memory"
    if isinstance(exc, OSError) and exc.strerror:
        files = [str(f) for f in (exc.filename, exc.filename2) if f is not None]
        return f"{' -> '.join(files)}: {exc.strerror}" if files else exc.strerror
    return str(exc)


def reader_gone() -> int:
    """The exit status of a command whose stdout's reader went away (`| head`): 0, and nothing more written."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at exit's flush of the rest
    return 0


def run(prog: str, body) -> int:
    """`body()`'s exit status; a user's mistake (UserError, OSError, MemoryError) prints one line and returns 2 (the
    one place foxc catches them); Ctrl-C returns 130; stdout's reader gone (`| head`) returns 0 without a word."""
    try:
        status = body()
        sys.stdout.flush()  # here, not at exit, where a closed pipe is a traceback
        return status
    except BrokenPipeError:
        return reader_gone()
    except (UserError, OSError, MemoryError) as exc:
        return fail(prog, describe(exc))
    except KeyboardInterrupt:
        print(f"{prog.removeprefix('python -m ')}: interrupted", file=sys.stderr, flush=True)
        return 130


# ------------------------------------------------------------------------------------------------
# argparse types: a bad value is refused by argparse, naming the flag ("argument --rows: ...").

def int_at_least(minimum: int, maximum: int | None = None):
    """An argparse type: an integer from minimum (to maximum, when given)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f">= {minimum}" if maximum is None else f"{minimum} to {maximum:,}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value
    parse.__name__ = f"int >= {minimum}"
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def power_of_two(maximum: int):
    """An argparse type: a power of two from 2 to maximum."""
    def parse(text: str) -> int:
        value = int_at_least(2, maximum)(text)
        if value & (value - 1):
            raise argparse.ArgumentTypeError(f"must be a power of two, got {value}")
        return value
    parse.__name__ = "power of two"
    return parse


def positive_ints(text: str) -> list[int]:
    """An argparse type: comma-separated integers >= 1 (e.g. 256,1024)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got '{text}'") from None
    bad = [v for v in values if v < 1]
    if bad:
        raise argparse.ArgumentTypeError(f"every value must be >= 1, got {bad[0]} in '{text}'")
    return values


def finite_float(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


# ------------------------------------------------------------------------------------------------
# Outputs, checked before any work.

def _writable_parent(flag: str, path: Path) -> None:
    """The nearest existing folder above `path` must be a writable directory (the rest is created)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: {folder} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"{flag} {path}: {folder} is not writable")


def output_file(flag: str, path, *, suffixes: tuple[str, ...] = (), overwrite: bool = True,
                overwrite_flag: str | None = None) -> Path:
    """`path` (given by `flag`) as a Path, if a file of it can be written: not a directory, ending in one of
    `suffixes` (if given), in a writable folder, and (without `overwrite`) new; else a UserError naming both."""
    text = str(path)
    if problem := empty_path(text, "a file name"):
        raise UserError(f"{flag}: {problem}")
    p = Path(text)
    if text.endswith(os.sep) or p.is_dir():
        raise UserError(f"{flag} {p}: is a directory (give a file name)")
    if suffixes and not p.name.lower().endswith(suffixes):
        raise UserError(f"{flag} {p}: the file name must end in {' or '.join(suffixes)}")
    if p.exists() or p.is_symlink():
        if not overwrite:
            hint = f" (give a new name, or {overwrite_flag})" if overwrite_flag else " (give a new name)"
            raise UserError(f"{flag} {p}: the file exists{hint}")
        if not p.is_file():
            raise UserError(f"{flag} {p}: exists and is not a regular file")
        if not os.access(p, os.W_OK):
            raise UserError(f"{flag} {p}: the file is not writable")
    _writable_parent(flag, p)
    return p


def output_dir(flag: str, path) -> Path:
    """Check that the directory `path` given by `flag` can be written into (or created)."""
    text = str(path)
    if problem := empty_path(text, "a directory"):
        raise UserError(f"{flag}: {problem}")
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise UserError(f"{flag} {p}: exists and is not a directory")
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"{flag} {p}: the directory is not writable")
    else:
        _writable_parent(flag, p)
    return p


def add_run_dir_arguments(ap, kind: str) -> None:
    """--out and --overwrite of a command that writes a directory of its own (check_run_dir, open_run_dir)."""
    ap.add_argument("--out", type=PathArg("a directory", Path), default=None, metavar="DIR",
                    help=f"its directory: new or empty, unless --overwrite (default runs/{kind}-<time>-<6 hex>)")
    ap.add_argument("--overwrite", action="store_true", help=f"first remove an earlier {kind}'s outputs from --out")


def check_run_dir(out: Path | None, overwrite: bool) -> None:
    """--out of a sweep or walk-forward: a directory that can be written, new or empty unless --overwrite."""
    if out is None:
        return
    output_dir("--out", out)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise UserError(f"--out {out}: the directory holds files (give a new directory, or --overwrite)")


def default_run_dir(kind: str) -> Path:
    """A new directory's name, `runs/<kind>-<time>-<6 hex>`."""
    return Path("runs") / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def open_run_dir(out: Path, overwrite: bool, outputs: tuple[str, ...]) -> Path:
    """Create `out`; with `overwrite`, an earlier run's `outputs` there (names or glob patterns) are removed first."""
    if overwrite and out.is_dir():
        for pattern in outputs:
            for old in out.glob(pattern):
                if old.is_dir():
                    shutil.rmtree(old)
                else:
                    old.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"--out {out}: cannot create the directory: {e.strerror or e}") from None
    return out


@contextlib.contextmanager
def _backend_flag(backend: str | None):
    """A backend that cannot be used (no GPU for --backend cuda, a bad $FOXC_BACKEND) is a UserError naming it."""
    env = os.environ.get("FOXC_BACKEND")
    if not backend and env and env not in BACKENDS:
        raise UserError(f"$FOXC_BACKEND: backend must be one of {', '.join(BACKENDS)}, got '{env}'")
    try:
        yield
    except CudaError as exc:
        message = str(exc)
        raise UserError(message if message.startswith("--backend") else f"--backend {backend or 'auto'}: {message}") \
            from None


def open_runtime(backend: str | None):
    """The runtime of `--backend` (foxc.driver.open_runtime)."""
    with _backend_flag(backend):
        return _open(backend)


def backend_name(backend: str | None) -> str:
    """The backend `--backend` selects, "cuda" or "reference" (foxc.driver.select_backend)."""
    with _backend_flag(backend):
        return select_backend(backend).name
