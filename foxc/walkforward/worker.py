"""A fold's worker process (foxc.jobs): `python -m foxc.walkforward.worker OUT/fold-<i>/fold.json`.

Its own module, which the package does not import: `python -m` of one it does would run a second copy of it."""
import sys

from ..jobs import serve
from .folds import FoldSpec, run_fold_safely


def main(argv=None) -> int:
    return serve(sys.argv[1:] if argv is None else argv, FoldSpec, run_fold_safely)


if __name__ == "__main__":
    sys.exit(main())
