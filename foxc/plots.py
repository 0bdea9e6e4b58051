"""What the commands' reports share: matplotlib (a dependency of foxc), a figure saved, a markdown table.

A plot raises PlotsUnavailable (with the install hint) where matplotlib is missing all the same (an install without
its dependencies); callers print it and carry on.
"""
from __future__ import annotations

from pathlib import Path


class PlotsUnavailable(RuntimeError):
    pass


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotsUnavailable("plots skipped: matplotlib is not installed, though foxc depends on it (pip install "
                               "matplotlib, or pip install 'foxc[plots]')") from None
    return plt


def save(plt, fig, path) -> Path:
    if fig.get_layout_engine() is None:  # a figure made with layout="constrained" is laid out as it is drawn
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def markdown_table(head: list[str], rows: list[list]) -> list[str]:
    """A markdown table's lines: the head, its rule, a line per row of cells."""
    return ["| " + " | ".join(map(str, cells)) + " |" for cells in (head, ["---"] * len(head), *rows)]
