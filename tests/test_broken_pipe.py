"""`COMMAND | head`: a reader that closes the pipe early ends a foxc command quietly (status 0), as it
would end `cat`, never with a BrokenPipeError traceback (cli.run holds this for every command)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


TRAIN = ["foxc.train", "--backend", "reference", "--n-steps", "1", "--synthetic-rows", "1000", "--eval-rows", "1000"]


@pytest.mark.parametrize("command", [
    ["foxc.isv", "list"], ["foxc.data", "inspect", str(ROOT / "tests/fixtures/mbp10.v3.dbn"), "--instrument", "13615"],
    TRAIN], ids=["isv-list", "data-inspect", "train"])
def test_a_reader_gone_ends_the_command_quietly(command, tmp_path):
    if command is TRAIN:  # foxc.train reports its own errors (it removes a run it began), not through cli.run
        command = [*TRAIN, "--out", str(tmp_path / "run")]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets a closed pipe
    try:
        done = subprocess.run([sys.executable, "-m", *command], stdout=write, stderr=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    finally:
        os.close(write)
    assert done.stderr.decode() == "" and done.returncode == 0, done.stderr.decode()
