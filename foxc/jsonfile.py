"""One reader of the JSON users hand to foxc or a killed or edited run leaves behind, and one checker of every
structured file foxc reads (JSON, TOML, a checkpoint's meta, a cache manifest) against a declared shape.

Absurd JSON (nesting deeper than Python recurses, more digits than int() converts, bytes not UTF-8) is one
ValueError saying what is wrong, and read_json names the file. NaN and Infinity read as Python's json writes them.
A shape is a dict of key -> type ("key?" may be missing): a type, a nested shape, dict[str, X], list[X], tuple[X,
Y], a union, a dataclass, a range of integers, a frozenset of allowed values or a compiled pattern a string must
match; shape_problem says what keeps a document from it, naming the field.
"""
from __future__ import annotations

import json
import re
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
    """json.loads: text that is not JSON raises its JSONDecodeError, absurd JSON a ValueError saying why."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
    except UnicodeDecodeError:  # bytes given
        raise ValueError("not UTF-8 text") from None
    except ValueError:  # int()'s limit on digits (Python 3.11 on)
        limit = getattr(sys, "get_int_max_str_digits", lambda: None)()
        raise ValueError(f"a number of more than {limit} digits, too long to read" if limit else
                         "a number too long to read") from None


def read_json(path) -> dict:
    """The JSON object in the file at `path`; anything else is a JsonFileError naming it (an OSError as is)."""
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
        kind = {list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(doc), "number")
        raise JsonFileError(path, f"not a JSON object (a JSON {kind})")
    return doc


def is_int(value) -> bool:
    """A JSON integer: an int, not a bool (Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    return is_int(value) or isinstance(value, float)


def drawable(value) -> bool:
    """A number a plot can draw: an int or a float (not a bool) that converts to a float."""
    try:
        return is_number(value) and float(value) is not None
    except OverflowError:  # a JSON integer of hundreds of digits
        return False


def shown(value) -> str:
    """A JSON value as a message shows it: a list or object by its kind, a huge number by its digits, anything
    else as JSON (one that has none, as a msgpack meta's bytes, by its repr) cut to 40 characters."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    if is_int(value) and not drawable(value):
        return f"an integer of {len(str(abs(value)))} digits"
    text = json.dumps(value, default=repr)
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
    """What keeps object `doc` from holding `shape`'s keys ("" when nothing), each of its type ("key?": or none)."""
    for key, hint in shape.items():
        name, value = where + key.rstrip("?"), doc.get(key.rstrip("?"), MISSING)
        if value is MISSING and not key.endswith("?"):
            return f"no {name!r}"
        if value is not MISSING and (problem := _value_problem(value, hint, name)):
            return problem
    return ""


def _value_problem(value, hint, name: str) -> str:
    """What keeps `value`, at `name`, from being of `hint` ("" when nothing)."""
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
            else "one of " + ", ".join(sorted(map(json.dumps, hint))) if isinstance(hint, frozenset)
            else f"a string matching {hint.pattern}" if isinstance(hint, re.Pattern)
            else f"of type {str(hint).replace(__name__ + '.', '') if origin else hint.__name__}")  # int64, unqualified
    return f"{name} is {shown_}, not {want}"


class _Int64Type(type):
    def __instancecheck__(cls, value) -> bool:
        return is_int(value) and -2**63 <= value < 2**63


class int64(metaclass=_Int64Type):
    """A shape's type: an integer an int64 holds, as range(-2**63, 2**63) but nullable (int64 | None)."""


def _is(value, hint) -> bool:
    """Whether a value is of the type `hint`, neither a list nor a union (a float one a plot can draw)."""
    if hint is type(None):
        return value is None
    if hint is float:
        return drawable(value)
    if hint is int or isinstance(hint, range):
        return is_int(value) and (hint is int or value in hint)
    if isinstance(hint, frozenset):
        return (isinstance(value, str) or is_number(value)) and value in hint
    if isinstance(hint, re.Pattern):
        return isinstance(value, str) and hint.fullmatch(value) is not None
    return isinstance(value, hint)
