"""The one reader of JSON files a user hands to foxc (foxc/jsonfile.py): absurd input is one ValueError naming the
file, never a RecursionError, int()'s digit limit or a UnicodeDecodeError. ABSURD is what every reader's test
feeds its file."""
import json
import pickle
import sys

import pytest

from foxc.jsonfile import JsonFileError, parse_json, read_json

DIGITS = sys.get_int_max_str_digits()
ABSURD = [  # (the file's bytes, the problem read_json names)
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply to read"),
    (b'{"a": %s}' % (b"9" * (DIGITS + 700)), f"a number of more than {DIGITS} digits, too long to read"),
    (b"[1, 2]", "not a JSON object (a JSON list)"),
    (b"NaN", "not a JSON object (a JSON number)"),
    (b"\xff\xfe{}", "not UTF-8 text"),
    (b'{"a": ', "not valid JSON: Expecting value: line 1 column 7 (char 6)"),  # cut short
]
IDS = ["nested", "digits", "list", "nan", "bytes", "torn"]


@pytest.mark.parametrize("raw, problem", ABSURD, ids=IDS)
def test_absurd_json_is_one_error_naming_the_file(tmp_path, raw, problem):
    path = tmp_path / "doc.json"
    path.write_bytes(raw)
    with pytest.raises(JsonFileError) as err:
        read_json(path)
    assert str(err.value) == f"{path}: {problem}" and err.value.problem == problem
    again = pickle.loads(pickle.dumps(err.value))  # a worker process's error crosses intact
    assert str(again) == str(err.value)


def test_parse_json_keeps_text_that_is_not_json_apart_from_absurd_json():
    """A torn metrics.jsonl line is skipped (JSONDecodeError); absurd JSON is refused (a ValueError saying why)."""
    with pytest.raises(json.JSONDecodeError):
        parse_json('{"step": 3, "l_q"')
    with pytest.raises(ValueError, match="^JSON nested too deeply to read$"):
        parse_json("[" * 100_000)
    assert parse_json('{"step": 1, "l_q": NaN, "x": 1e999}')["x"] == float("inf")  # as Python's json writes them


def test_a_missing_file_is_an_os_error_as_is(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "none.json")
