"""One reader of the JSON that users hand to foxc, or that a killed or hand-edited run leaves behind: a cache's
manifest.json, a walk-forward's report.json, a run's metrics.jsonl and summary.json, a worker's spec
(fold.json, run.json) and result.json, the live ISV requests and the live trainer's marker.

json.loads on absurd input raises more than its JSONDecodeError: a RecursionError for nesting deeper than Python
recurses, int()'s own ValueError for an integer of more digits than it converts (Python 3.11 on), a
UnicodeDecodeError for bytes that are not UTF-8. Here each is one ValueError saying what is wrong, and
read_json names the file. NaN and Infinity are read as Python's json writes them (foxc's own records hold
them where a loss diverged): a reader whose values must be finite checks its fields. Each reader states what it
reads as a shape (a dict of key -> type, nested dicts, dict[str, X], a dataclass, a range of integers) and
shape_problem says what keeps a document from it, naming the field and its value (shown). Ground floor: every reader
above may import it.
"""
from __future__ import annotations

import json
import sys
import types
import typing
from dataclasses import MISSING, fields, is_dataclass
from pathlib import Path
from .errors import UserError


class JsonFileError(UserError):
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


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def drawable(value) -> bool:
    """A number a plot can draw: an int or a float, not a bool, that converts to a float (a JSON integer of
    hundreds of digits does not: matplotlib's OverflowError)."""
    if not is_number(value):
        return False
    try:
        float(value)
    except OverflowError:
        return False
    return True


def shown(value) -> str:
    """A JSON value as a message shows it, never the whole of a long one: a list or object by its kind, a number
    too large to draw by its digits, anything else as JSON cut to 40 characters."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    if isinstance(value, int) and not isinstance(value, bool) and not drawable(value):
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def fields_problem(doc: dict, cls, where: str = "") -> str:
    """What keeps `doc` from being the fields of dataclass `cls` ("" when nothing): one missing (without a default),
    unknown or of another type; a field `cls.CONFIGS` names holds the fields of its dataclass in turn."""
    unknown = sorted(doc.keys() - {f.name for f in fields(cls)})
    if unknown:
        return f"no field {where + unknown[0]!r}"
    hints, configs = typing.get_type_hints(cls), getattr(cls, "CONFIGS", {})
    return shape_problem(doc, {f.name + "?" * (f.default is not MISSING or f.default_factory is not MISSING):
                               configs.get(f.name, hints[f.name]) for f in fields(cls)}, where)


def shape_problem(doc: dict, shape: dict, where: str = "") -> str:
    """What keeps JSON object `doc` from holding `shape`'s keys ("" when nothing), each of its type (_value_problem);
    a key ending in "?" may be missing."""
    for key, hint in shape.items():
        name, value = where + key.rstrip("?"), doc.get(key.rstrip("?"), MISSING)
        if value is MISSING and not key.endswith("?"):
            return f"no {name!r}"
        if value is not MISSING and (problem := _value_problem(value, hint, name)):
            return problem
    return ""


def _value_problem(value, hint, name: str) -> str:
    """What keeps JSON `value`, at `name`, from being of `hint` ("" when nothing): a type (a tuple or a list as a
    list, item by item; a float one a plot can draw), a shape (a dict: shape_problem), a dataclass (its fields) or
    a mapping (dict[str, X]: an object of any keys, each value an X)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    shaped, listed = isinstance(hint, dict) or is_dataclass(hint) or origin is dict, origin in (list, tuple)
    if shaped and isinstance(value, dict):
        if origin is dict:
            return next(filter(None, (_value_problem(v, args[1], f"{name}.{k}") for k, v in value.items())), "")
        return (shape_problem if isinstance(hint, dict) else fields_problem)(value, hint, name + ".")
    if listed and isinstance(value, list):
        items = args[:1] * len(value) if origin is list or args[-1:] == (Ellipsis,) else args
        if len(items) == len(value):
            return next(filter(None, map(_value_problem, value, items, [f"{name}[{i}]" for i in range(len(value))])),
                        "")
    elif origin in (types.UnionType, typing.Union):
        if any(not _value_problem(value, a, name) for a in args):
            return ""
    elif not shaped and not listed and _is(value, hint):
        return ""
    shown_ = f"a list of {len(value)}" if isinstance(value, list) else shown(value)
    want = ("an object" if shaped else f"an integer from {hint.start} to {hint.stop - 1}" if isinstance(hint, range)
            else f"of type {str(hint).replace(__name__ + '.', '') if origin else hint.__name__}")  # int64, unqualified
    return f"{name} is {shown_}, not {want}"


class _Int64Type(type):
    def __instancecheck__(cls, value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


class int64(metaclass=_Int64Type):
    """A shape's type: a JSON integer that an int64 (a parquet or numpy column) holds, as range(-2**63, 2**63) but
    nullable, int64 | None (Python 3.10's typing refuses Optional[range(...)])."""


def _is(value, hint) -> bool:
    """Whether a JSON value is of the type `hint`, neither a list nor a union (a float one a plot can draw)."""
    if hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return drawable(value)
    if isinstance(hint, range):
        return isinstance(value, int) and not isinstance(value, bool) and value in hint
    return isinstance(value, hint)
