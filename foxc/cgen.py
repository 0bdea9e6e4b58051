"""C headers generated from Python definitions (ISV slots, records, layouts): one way to check,
write and offer them on the command line (`python -m <module> --write|--check`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


class GeneratedHeader:
    def __init__(self, path: Path, render, module: str, source: str):
        self.path, self.render, self.module, self.source = Path(path), render, module, source

    def is_current(self, path: Path | None = None) -> bool:
        path = Path(path or self.path)
        return path.is_file() and path.read_text() == self.render()

    def write(self, path: Path | None = None) -> bool:
        """Write the header if it differs; True when it changed."""
        path = Path(path or self.path)
        if self.is_current(path):
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.render())
        return True

    def main(self, argv=None) -> int:
        ap = argparse.ArgumentParser(prog=f"python -m {self.module}",
                                     description=f"Generate {self.path.name} from {self.source}.")
        group = ap.add_mutually_exclusive_group(required=True)
        group.add_argument("--write", action="store_true", help="regenerate the header")
        group.add_argument("--check", action="store_true", help="exit 1 when the header is out of date")
        args = ap.parse_args(argv)
        if args.write:
            print(f"{self.path}: {'written' if self.write() else 'already current'}")
            return 0
        if self.is_current():
            return 0
        print(f"{self.path} is out of date with {self.source}: run python -m {self.module} --write", file=sys.stderr)
        return 1
