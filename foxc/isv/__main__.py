"""`python -m foxc.isv`: the ISV slots, their defaults, the values a user may set and what they mean.

    python -m foxc.isv [list] [--json]                           # every slot (the default command)
    python -m foxc.isv [show] NAME [--json]                      # one slot
    python -m foxc.isv set RUN_DIR NAME=VALUE [NAME=VALUE ...]   # change slots of a running trainer
"""
from __future__ import annotations

import json
import math
import sys

from ..cli import ArgumentParser, PathArg, UserError, run
from .live import request
from .registry import SLOTS, Slot, isv_setting, slot, unknown_slot

PROG = "python -m foxc.isv"


def as_record(s: Slot) -> dict:
    """A slot for --json: bounds as numbers (null when unbounded), `settable` false for internal slots."""
    record = {"index": s.index, "name": s.name, "default": s.bootstrap, "settable": s.settable,
              "range": str(s.valid), "doc": s.doc, "why": s.valid.why}
    if s.settable:
        bound = lambda v: None if math.isinf(v) else v  # noqa: E731 (JSON has no infinity)
        record.update(lo=bound(s.valid.lo), hi=bound(s.valid.hi), lo_open=s.valid.lo_open,
                      hi_open=s.valid.hi_open, integer=s.valid.integer)
    return record


def table(slots) -> str:
    """Index, name, default, valid settings ("(0, 1]", "1..8", "0 or 1", ">= 0", or state/unused) and the doc,
    with the reason for the range when it is not plain from the doc."""
    rows = [("#", "name", "default", "range", "meaning")] + [
        (str(s.index), s.name, f"{s.bootstrap:g}", str(s.valid), s.doc + (f" [{s.valid.why}]" if s.valid.why else ""))
        for s in slots]
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join(f"{r[0]:>{w[0]}}  {r[1]:<{w[1]}}  {r[2]:>{w[2]}}  {r[3]:<{w[3]}}  {r[4]}" for r in rows)


def cmd_list(args) -> int:
    if args.json:
        print(json.dumps({"slots": [as_record(s) for s in SLOTS]}, indent=1))
        return 0
    print(table(SLOTS))
    print("\nrange: what --set NAME=VALUE and a --config file's [isv] table may give the slot; state: the "
          "trainer's controllers own it; unused: no kernel reads it.")
    return 0


def cmd_show(args) -> int:
    try:
        s = slot(args.name)
    except KeyError:
        raise UserError(unknown_slot(args.name)) from None
    if args.json:
        print(json.dumps(as_record(s), indent=1))
        return 0
    how = (f"--set {s.name}=VALUE, or {s.name} = VALUE under [isv] in a --config file" if s.settable else
           {"state": "no: state the trainer owns", "unused": "no: no kernel reads it"}[s.valid.kind])
    lines = [f"{s.name} (slot {s.index}, {s.macro})", f"  default   {s.bootstrap:g}", f"  range     {s.valid}",
             f"  settable  {how}", f"  meaning   {s.doc}"]
    print("\n".join(lines + ([f"  why       {s.valid.why}"] if s.valid.why else [])))
    return 0


def cmd_set(args) -> int:
    path = request(args.run_dir, args.settings)
    print(f"requested: {path} (the trainer applies it before its next step and records it in metrics.jsonl; "
          f"it moves the file to {path.parent.name}/applied/, or rejected/ with a warning)")
    return 0


COMMANDS = {"list": cmd_list, "show": cmd_show, "set": cmd_set}


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog=PROG, description="The ISV slots (hyperparameters and controller state).",
                        epilog="Without a command: list; with a slot's name: show it.")
    sub = ap.add_subparsers(dest="command", metavar="{list,show,set}")
    ls = sub.add_parser("list", help="every slot: index, name, default, range, meaning (the default)")
    ls.add_argument("--json", action="store_true", help="as JSON, for programs")
    show = sub.add_parser("show", help="one slot (python -m foxc.isv NAME says the same)")
    show.add_argument("name", help="the slot's name, e.g. lr_q")
    show.add_argument("--json", action="store_true", help="as JSON, for programs")
    live = sub.add_parser("set", help="change slots of a trainer running in RUN_DIR, at its next step")
    live.add_argument("run_dir", metavar="RUN_DIR", type=PathArg("the running trainer's --out directory"),
                      help="the running trainer's --out directory")
    live.add_argument("settings", nargs="+", type=isv_setting, metavar="NAME=VALUE", help="e.g. lr_q=3e-4")
    return ap


def with_command(argv: list[str]) -> list[str]:
    """argv with its command made explicit: none is `list`, a slot's name alone is `show NAME`."""
    if argv[:1] in (["-h"], ["--help"]):
        return argv
    return ["list", *argv] if not argv or argv[0].startswith("-") else argv if argv[0] in COMMANDS else ["show", *argv]


def main(argv=None) -> int:
    args = build_parser().parse_args(with_command(list(sys.argv[1:] if argv is None else argv)))
    return run(PROG, lambda: COMMANDS[args.command](args))


if __name__ == "__main__":
    sys.exit(main())
