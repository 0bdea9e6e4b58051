"""Every command and flag the README and the guide show still exists: each `python -m foxc.X [SUBCOMMAND] ... --flag`
in their code, and each flag of the guide's flag tables, is in that command's `--help`. (Restructuring must keep
them, or name the replacement in the docs at the same time.)"""
import importlib.util
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md"))]
SUBCOMMANDS = {"foxc.data": ("inspect", "synth", "prepare"), "foxc.isv": ("list", "show", "set"),
               "foxc.bench": ("train", "edge", "data", "replay", "learn", "evaluate", "checkpoint", "lobsim", "driver")}
TABLES = {"training.md": "foxc.train", "sweeps.md": "foxc.sweep", "evaluation.md": "foxc.walkforward"}
COMMAND = re.compile(r"python -m (foxc(?:\.[a-z_]+)+)((?: +[^ `|]+)*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def code_spans(text: str):
    """The fenced blocks' lines and the inline code spans of a Markdown text."""
    fenced = re.findall(r"```[^\n]*\n(.*?)```", text, re.S)
    yield from (line for block in fenced for line in block.splitlines())
    yield from re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))


def documented() -> dict[tuple[str, str], set[str]]:
    uses: dict[tuple[str, str], set[str]] = {}
    for doc in DOCS:
        text = doc.read_text()
        for span in code_spans(text):
            for module, rest in COMMAND.findall(span.split(" #")[0]):  # not a shell comment's words
                words = rest.split()
                sub = words[0] if words and words[0] in SUBCOMMANDS.get(module, ()) else ""
                uses.setdefault((module, sub), set()).update(FLAG.findall(rest))
        if doc.name in TABLES:
            for row in re.findall(r"^\| `(--[a-z][a-z0-9-]*)", text, re.M):
                uses.setdefault((TABLES[doc.name], ""), set()).add(row)
    return uses


@lru_cache(maxsize=None)
def help_text(module: str, sub: str) -> str:
    argv = [sys.executable, "-m", module, *([sub] if sub else []), "--help"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, f"{' '.join(argv[1:])}: exit {done.returncode}: {done.stderr.strip()[-500:]}"
    return done.stdout


USES = documented()


def test_the_docs_show_commands():
    assert len(USES) >= 15 and sum(map(len, USES.values())) >= 100, USES


@pytest.mark.slow
@pytest.mark.parametrize("module, sub", sorted(USES), ids=[" ".join(filter(None, k)) for k in sorted(USES)])
def test_every_documented_flag_is_accepted(module, sub):
    if not USES[(module, sub)]:  # a worker's entry point (`python -m foxc.sweep.point RUN.json`): the module exists
        assert importlib.util.find_spec(module) is not None, module
        return
    text = help_text(module, sub)
    missing = sorted(f for f in USES[(module, sub)] if not re.search(re.escape(f) + r"(?![\w-])", text))
    assert not missing, f"python -m {module} {sub}: the docs show {missing}, its --help has not"
