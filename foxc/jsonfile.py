"""One reader of the JSON that users hand to foxc, or that a killed or hand-edited run leaves behind: a cache's
manifest.json, a walk-forward's report.json, a run's metrics.jsonl and summary.json, a worker's spec
(fold.json, run.json) and result.json, the live ISV requests and the live trainer's marker.

json.loads on absurd input raises more than its JSONDecodeError: a RecursionError for nesting deeper than Python
recurses, int()'s own ValueError for an integer of more digits than it converts (Python 3.11 on), a
UnicodeDecodeError for bytes that are not UTF-8. Here each is one ValueError saying what is wrong, and
read_json names the file. NaN and Infinity are read as Python's json writes them (foxc's own records hold
them where a loss diverged): a reader whose values must be finite checks its fields. Ground floor: every
reader above may import it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


class JsonFileError(ValueError):
    """A file that is not the JSON document it should be: `problem` says why; str() names the file first."""

    def __init__(self, path, problem: str):
        super().__init__(path, problem)  # both, so that it pickles (a worker process's error crosses intact)
        self.path, self.problem = path, problem

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


def parse_json(text: str | bytes):
    """json.loads. Text that is not JSON (a torn line) raises its JSONDecodeError; absurd JSON (nesting deeper
    than Python recurses, an integer longer than int() converts) a ValueError saying so, never a RecursionError
    or int's own message."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    except UnicodeDecodeError:  # bytes given
        raise ValueError("not UTF-8 text") from None
    except ValueError:  # int()'s limit on digits (Python 3.11 on: sys.get_int_max_str_digits)
        limit = getattr(sys, "get_int_max_str_digits", lambda: None)()
        raise ValueError(f"a number of more than {limit} digits, too long to read" if limit else
                         "a number too long to read") from None


def read_json(path) -> dict:
    """The JSON object in the file at `path`. A file that is not UTF-8 text, not JSON (cut short, damaged), absurd
    JSON (parse_json) or not an object is a JsonFileError naming it; an OSError (no such file) is raised as is."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise JsonFileError(path, "not UTF-8 text") from None
    try:
        doc = parse_json(text)
    except json.JSONDecodeError as e:
        raise JsonFileError(path, f"not valid JSON: {e}") from None
    except ValueError as e:
        raise JsonFileError(path, str(e)) from None
    if not isinstance(doc, dict):
        raise JsonFileError(path, f"not a JSON object (a JSON {_kind(doc)})")
    return doc


def _kind(value) -> str:
    return {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
