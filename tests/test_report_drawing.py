"""How training.png is drawn: the figure's title clear of the panels' titles, a series of one point visible, NaN
and infinite values counted on their panel."""
import json
import math
from pathlib import Path

import pytest

from foxc.report import training_curves
from foxc.walkforward.report import walkforward_plots

FIXTURE = Path(__file__).parent / "fixtures" / "metrics.jsonl"


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plots save, kept open to be looked at: plt.close(fig), after the PNG is written, keeps it."""
    plt = pytest.importorskip("matplotlib.pyplot")
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)
    return figures


def metrics_file(tmp_path) -> Path:
    """The fixture's training records, one held-out evaluation at the last step (eval_pnl: one point), and a loss
    that diverged at two steps (NaN, Infinity: as Python's json writes them)."""
    lines = FIXTURE.read_text().splitlines()
    records = [json.loads(line) for line in lines[:-1]]  # the last line is torn
    records[4]["l_v"], records[7]["l_v"] = math.nan, math.inf
    records[-1].update(eval_pnl=0.012, eval_trades=40)
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def panel(fig, title):
    return next(ax for ax in fig.axes if ax.get_title() == title)


@pytest.mark.parametrize("extra", [0, 20], ids=["10 panels", "30 panels"])
def test_the_figure_title_clears_the_panel_titles(tmp_path, drawn, extra):
    """A run's metrics.jsonl has some 30 fields (eight rows of panels): the figure's title was drawn over the first
    row's titles."""
    records = [json.loads(line) for line in FIXTURE.read_text().splitlines()[:-1]]
    for r in records:
        r.update({f"field_{i:02d}": r["step"] * i for i in range(extra)})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    training_curves(tmp_path / "metrics.jsonl", tmp_path / "training.png", "training curves: a run")
    fig = drawn[0]
    renderer = fig.canvas.get_renderer()
    top = fig._suptitle.get_window_extent(renderer)  # the figure's title (no public getter of its artist)
    titles = [ax.title.get_window_extent(renderer) for ax in fig.axes if ax.get_title()]
    assert len(titles) == 10 + extra
    assert all(t.y1 <= top.y0 for t in titles), (top, max(t.y1 for t in titles))


def test_one_point_is_drawn_as_a_point(tmp_path, drawn):
    training_curves(metrics_file(tmp_path), tmp_path / "training.png")
    line, = panel(drawn[0], "eval_pnl").get_lines()
    assert list(line.get_ydata()) == [0.012] and line.get_marker() == "o" and line.get_markersize() > 0
    many, = panel(drawn[0], "l_q").get_lines()
    assert len(many.get_xdata()) == 20


def test_non_finite_values_are_counted_on_their_panel(tmp_path, drawn):
    training_curves(metrics_file(tmp_path), tmp_path / "training.png")
    ax = panel(drawn[0], "l_v")
    assert ax.get_xlabel() == "2 non-finite values not drawn"
    ys = ax.get_lines()[0].get_ydata()
    assert len(ys) == 18 and all(math.isfinite(y) for y in ys)
    assert panel(drawn[0], "l_q").get_xlabel() == ""
    assert (tmp_path / "training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def fold_record(i: int, net_pnl: float, passed: bool, yardstick: float) -> dict:
    """What walkforward_plots reads of a walk-forward's fold."""
    return {"fold": i, "metrics": {"net_pnl": net_pnl}, "passed_by": {"edge": passed},
            "yardstick": {"net_pnl": yardstick}, "equity_curve": [[1_700_000_000_000_000_000 + i, 0]]}


def test_net_pnl_says_which_colour_is_which_and_shows_a_fold_of_zero(tmp_path, drawn):
    """The legend's one 'agent' patch took the first bar's colour (red, a failed fold of no trades, whose bar of 0
    does not show) beside a green bar; each colour the bars have is named now, and each bar's figure is written."""
    from matplotlib.colors import to_hex
    report = {"trainer": "rl", "folds": [fold_record(0, 0, False, 9.9e11), fold_record(1, 8.2175e11, True, 1.03e12)]}
    walkforward_plots(report, tmp_path)
    ax = drawn[1].axes[0]
    legend = ax.get_legend()
    named = dict(zip([t.get_text() for t in legend.get_texts()], [to_hex(p.get_facecolor()) for p in
                                                                  legend.get_patches()]))
    assert named == {"agent, edge rule passed": to_hex("tab:green"), "agent, edge rule failed": to_hex("tab:red")}
    assert [t.get_text() for t in legend.get_texts()][-1] == "logistic yardstick"
    assert [t.get_text() for t in ax.texts] == ["0.00", "821.75"]
