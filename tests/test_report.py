"""Plots: training curves from metrics.jsonl, walk-forward plots, and the message without matplotlib."""
import json
import shutil
import sys
from pathlib import Path

import pytest

from foxc import report as report_cli
from foxc.data.synthetic import synthetic_data
from foxc.report import read_metrics
from foxc.evaluate.runner import EvalConfig
from foxc.walkforward import walk_forward
from test_jsonfile import ABSURD, IDS

FIXTURE = Path(__file__).parent / "fixtures" / "metrics.jsonl"


def test_read_metrics_skips_a_torn_last_line():
    records, skipped, superseded = read_metrics(FIXTURE)
    assert superseded == [] and len(records) == 20 and records[-1]["step"] == 10_000 and skipped == [21]
    assert {"step", "sps", "l_q", "l_pi", "l_v", "l_bce", "wr", "pnl", "hold_frac", "entropy", "lr_q"} <= set(records[0])


def test_training_curves_png(tmp_path):
    pytest.importorskip("matplotlib")
    shutil.copy(FIXTURE, tmp_path / "metrics.jsonl")
    assert report_cli.main([str(tmp_path)]) == 0
    png = tmp_path / "training.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # 5-8 s on two cores: in CI's slow pass
def test_walkforward_plots_and_report_cli(tmp_path):
    pytest.importorskip("matplotlib")
    data = synthetic_data(8_000, seed=4)
    report = walk_forward(data, folds=2, steps=5, out=tmp_path, eval_config=EvalConfig(4, backend="reference"),
                          log=lambda *a: None)
    assert {Path(p).name for p in report["plots"]} == {"equity.png", "net_pnl.png"}
    shutil.copy(FIXTURE, tmp_path / "fold-1" / "metrics.jsonl")  # a fold whose trainer wrote curves
    (tmp_path / "equity.png").unlink()
    assert report_cli.main([str(tmp_path)]) == 0
    assert (tmp_path / "equity.png").is_file() and (tmp_path / "fold-1" / "training.png").is_file()
    assert "![equity](equity.png)" in (tmp_path / "report.md").read_text()


def test_without_matplotlib_plots_are_skipped_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    shutil.copy(FIXTURE, tmp_path / "metrics.jsonl")
    assert report_cli.main([str(tmp_path)]) == 1
    assert "pip install 'foxc[plots]'" in capsys.readouterr().err
    data = synthetic_data(8_000, seed=4)
    messages = []
    report = walk_forward(data, folds=2, steps=5, out=tmp_path / "wf", eval_config=EvalConfig(4, backend="reference"),
                          log=messages.append)
    assert "plots" not in report and any("matplotlib is not installed" in m for m in messages)
    assert json.loads((tmp_path / "wf" / "report.json").read_text())["folds"]


def test_report_cli_refuses_an_empty_directory(tmp_path):
    assert report_cli.main([str(tmp_path)]) == 2
    assert report_cli.main([str(tmp_path / "nope")]) == 2


def test_evaluate_bench_smoke(tmp_path, capsys):
    from foxc.bench import evaluate as bench
    out = tmp_path / "e.json"
    assert bench.main(["--backend", "reference", "--rows", "1000", "--chunks", "8", "--json", str(out)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("summary: evaluation at")
    record = json.loads(out.read_text())
    assert record["benchmark"] == "evaluate" and record["rows"][0]["snapshots"] == 1000


def fake_walkforward(run_dir: Path, fold_dir: str) -> None:
    """A walk-forward's directory: report.json with one fold whose `fold_dir` is `fold_dir` as recorded, and
    RUN_DIR/fold-0/metrics.jsonl."""
    fold = {"fold": 0, "fold_dir": fold_dir, "metrics": {"net_pnl": 5}, "passed_by": {"edge": True},
            "equity_curve": [[1_700_000_000_000_000_000, 0], [1_700_000_060_000_000_000, 5]]}
    (run_dir / "fold-0").mkdir(parents=True)
    shutil.copy(FIXTURE, run_dir / "fold-0" / "metrics.jsonl")
    (run_dir / "report.json").write_text(json.dumps({"folds": [fold]}))


def recorded_plots(monkeypatch) -> list:
    """Replace the plots with a record of the files they would write (no matplotlib needed)."""
    calls = []
    monkeypatch.setattr(report_cli, "walkforward_plots", lambda report, out: [])
    monkeypatch.setattr(report_cli, "training_curves", lambda metrics, png, title="": calls.append((metrics, png))
                        or [png])
    return calls


def test_fold_curves_are_found_and_written_under_run_dir_and_out(tmp_path, monkeypatch):
    """report.json records each fold's directory as the walk-forward was given it (relative to where it ran):
    the folds' curves are RUN_DIR/fold-<i>'s wherever foxc.report runs, written there or under --out, never
    into the directory of another run (a copy's original)."""
    original, copy = tmp_path / "wf", tmp_path / "copy"
    fake_walkforward(original, "wf/fold-0")
    shutil.copytree(original, copy)
    monkeypatch.chdir(tmp_path)  # where the walk-forward ran: wf/fold-0 is the original's fold
    calls = recorded_plots(monkeypatch)
    assert report_cli.main([str(copy)]) == 0
    assert calls == [(copy / "fold-0" / "metrics.jsonl", copy / "fold-0" / "training.png")]
    calls.clear()
    monkeypatch.chdir(copy)  # elsewhere: wf/fold-0 names nothing
    assert report_cli.main([str(original)]) == 0
    assert calls == [(original / "fold-0" / "metrics.jsonl", original / "fold-0" / "training.png")]
    calls.clear()
    assert report_cli.main([str(original), "--out", str(tmp_path / "plots")]) == 0
    assert calls == [(original / "fold-0" / "metrics.jsonl", tmp_path / "plots" / "fold-0" / "training.png")]
    assert (tmp_path / "plots" / "fold-0").is_dir()


def test_a_folds_damaged_metrics_is_refused_before_any_plot(tmp_path, monkeypatch, capsys):
    """A fold that finished but whose metrics.jsonl is damaged or empty: one line naming it, exit 2, nothing
    drawn; a fold that failed before its first record is noted and left without curves, the rest drawn."""
    fake_walkforward(tmp_path / "wf", "wf/fold-0")
    calls = recorded_plots(monkeypatch)
    for damage in (b"", b"\xff\xfe not text"):
        (tmp_path / "wf" / "fold-0" / "metrics.jsonl").write_bytes(damage)
        assert report_cli.main([str(tmp_path / "wf")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("foxc.report: error: ") and "fold-0/metrics.jsonl" in err and len(err.splitlines()) == 1
    assert calls == []
    report = json.loads((tmp_path / "wf" / "report.json").read_text())
    failed = {"fold": 1, "error": "RuntimeError: boom", "fold_dir": "wf/fold-1"}
    (tmp_path / "wf" / "report.json").write_text(json.dumps({"folds": [report["folds"][0], failed]}))
    shutil.copy(FIXTURE, tmp_path / "wf" / "fold-0" / "metrics.jsonl")
    (tmp_path / "wf" / "fold-1").mkdir()
    (tmp_path / "wf" / "fold-1" / "metrics.jsonl").write_bytes(b"")  # it stopped before its first record
    assert report_cli.main([str(tmp_path / "wf")]) == 0
    out = capsys.readouterr().out
    assert [png for _, png in calls] == [tmp_path / "wf" / "fold-0" / "training.png"]
    assert "note: " in out and "fold 1 failed" in out and "fold-1/metrics.jsonl" in out


@pytest.mark.parametrize("damage, named", [
    (lambda f: f["metrics"].update(net_pnl="x"), "metrics.net_pnl"),
    (lambda f: f["metrics"].update(net_pnl=None), "metrics.net_pnl"),
    (lambda f: f["passed_by"].update(edge="yes"), "passed_by.edge"),
    (lambda f: f.update(fold=[1]), "fold"),
    (lambda f: f.update(fold=True), "fold"),
    (lambda f: f.update(equity_curve=[[1]]), "equity_curve"),
    (lambda f: f.update(equity_curve="abc"), "equity_curve"),
    (lambda f: f.update(equity_curve=[[10**30, 1]]), "equity_curve"),
    (lambda f: f.update(yardstick=[1]), "yardstick"),
    (lambda f: f.update(yardstick={"net_pnl": "x"}), "yardstick"),
])
def test_a_damaged_report_is_one_line_naming_the_field(tmp_path, capsys, damage, named):
    """A report.json edited by hand or damaged: the fold record and the field the plots cannot read, exit 2,
    before any plot (not a TypeError or OverflowError from matplotlib's side)."""
    fake_walkforward(tmp_path / "wf", "wf/fold-0")
    report = json.loads((tmp_path / "wf" / "report.json").read_text())
    damage(report["folds"][0])
    (tmp_path / "wf" / "report.json").write_text(json.dumps(report))
    assert report_cli.main([str(tmp_path / "wf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("foxc.report: error: ") and "report.json" in err and "fold record 0" in err
    assert named in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "wf").iterdir()) == ["fold-0", "report.json"]


def test_an_empty_path_is_refused_not_read_as_here(tmp_path, monkeypatch, capsys):
    """RUN_DIR "" or --out "" (an unset shell variable) was Path("") = ".": the current directory plotted, or
    the plots written into it silently; refused as an empty path, nothing written."""
    shutil.copy(FIXTURE, tmp_path / "metrics.jsonl")
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    recorded_plots(monkeypatch)
    for argv, flag in (([""], "RUN_DIR"), ([str(tmp_path), "--out", ""], "--out")):
        with pytest.raises(SystemExit) as exit_:
            report_cli.main(argv)
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and f"{flag}: an empty path" in err and len(err.splitlines()) == 1
    assert list(here.iterdir()) == []


GOOD = '{"step": 1, "l_q": 1.5, "sps": null, "phase": "train"}\n{"step": 2, "l_q": 1.25, "sps": 3.0}\n'


@pytest.mark.parametrize("line, said", [
    ('{"step": 3, "l_q": %s}' % ("9" * 400), "'l_q' is an integer of 400 digits, too large to draw"),
    ('{"step": %s}' % ("9" * 400), "'step' is an integer of 400 digits, too large to draw"),
    ('{"step": 3, "l_q": %s}' % ("9" * 5000), "a number of more than 4300 digits, too long to read"
     if sys.version_info >= (3, 11) else "'l_q' is an integer of 5000 digits, too large to draw"),
    ('{"step": 3, "x": %s%s}' % ("[" * 100_000, "]" * 100_000), "JSON nested too deeply to read"),
    ('[1, 2]', "not a JSON object"),
    ('"text"', "not a JSON object"),
    ('{"step": 3, "l_q": "abc"}', "'l_q' is \"abc\", not a number or null"),
    ('{"step": 3, "l_q": true}', "'l_q' is true, not a number or null"),
    ('{"step": 3, "l_q": [1]}', "'l_q' is a list, not a number or null"),
    ('{"step": "3", "l_q": 1.0}', "'step' is \"3\", not a number"),
    ('{"step": null}', "'step' is null, not a number"),
    ('{"l_q": 1.0}', "no 'step'"),
])
def test_an_absurd_metrics_line_is_one_line_naming_the_file_and_line(tmp_path, monkeypatch, capsys, line, said):
    """A metrics.jsonl line that is JSON but not a record the plots can draw (a number matplotlib cannot convert,
    nesting deeper than the parser recurses, a string where a curve or the step needs a number) was a traceback
    or a silently dropped record; refused before any plot, naming the file, the line and what is wrong, in the
    run's metrics.jsonl and in a finished fold's alike."""
    calls = recorded_plots(monkeypatch)
    for run_dir, metrics in ((tmp_path / "run", tmp_path / "run" / "metrics.jsonl"),
                             (tmp_path / "wf", tmp_path / "wf" / "fold-0" / "metrics.jsonl")):
        if run_dir.name == "wf":
            fake_walkforward(run_dir, "wf/fold-0")
        run_dir.mkdir(exist_ok=True)
        metrics.write_text(GOOD + line + "\n")
        assert report_cli.main([str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert err == f"foxc.report: error: {metrics}, line 3: {said}\n"
    assert calls == []


def test_lines_that_are_not_json_are_skipped_and_counted(tmp_path, monkeypatch, capsys):
    """A killed run's torn record (a resume goes on after it) is skipped, never silently: a note names the file,
    how many lines and which."""
    calls = recorded_plots(monkeypatch)
    (tmp_path / "metrics.jsonl").write_text(GOOD + '{"step": 3, "l_q"\n{"step": 4}\nnot json\n')
    assert report_cli.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [str(tmp_path / "training.png"), f"note: {tmp_path / 'metrics.jsonl'}: 2 lines are not JSON, "
                   "skipped (lines 3, 5; a killed run leaves a torn record)"]
    assert read_metrics(tmp_path / "metrics.jsonl")[0][-1] == {"step": 4} and len(calls) == 1


@pytest.mark.parametrize("raw, problem", ABSURD, ids=IDS)
def test_a_report_json_that_is_no_json_object_names_the_file_and_why(tmp_path, capsys, raw, problem):
    """Read by foxc.jsonfile as every JSON file: bytes that are not UTF-8 said 'not JSON: 'utf-8' codec can't
    decode…', a list 'no folds list'."""
    fake_walkforward(tmp_path / "wf", "wf/fold-0")
    (tmp_path / "wf" / "report.json").write_bytes(raw)
    assert report_cli.main([str(tmp_path / "wf")]) == 2
    assert capsys.readouterr().err == (f"foxc.report: error: {tmp_path / 'wf' / 'report.json'}: not a walk-forward "
                                       f"report ({problem})\n")


def test_the_last_record_of_each_step_is_drawn_and_the_rest_noted(tmp_path, monkeypatch, capsys):
    """A run of steps 4..16 resumed from step 4 by a foxc that appended its records after the old ones (today a
    resume moves those aside), then killed while writing step 16: the curve folded back from step 16 to 8; the
    resumed history is drawn (its steps 8 and 12, no step 16 it has not logged), what it superseded is noted."""
    calls = recorded_plots(monkeypatch)
    lines = [{"step": s, "l_q": 1.0} for s in (4, 8, 12, 16)] + [{"step": s, "l_q": 2.0} for s in (8, 12)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"step": 16, "l\n')
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    assert metrics.records == [{"step": 4, "l_q": 1.0}, {"step": 8, "l_q": 2.0}, {"step": 12, "l_q": 2.0}]
    assert metrics.superseded == [2, 3, 4] and metrics.skipped == [7]
    assert report_cli.main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        f"note: {tmp_path / 'metrics.jsonl'}: a line is not JSON, skipped (line 7; a killed run leaves a torn record)",
        f"note: {tmp_path / 'metrics.jsonl'}: 3 records are of steps logged again later, not drawn (lines 2, 3, 4; a "
        "run resumed by an earlier foxc logged them again: the last record of each step is drawn)"]
    assert len(calls) == 1


def test_an_absurd_report_json_is_one_line(tmp_path, capsys):
    """report.json nested deeper than the parser recurses, or a net PnL too large to draw: one line, exit 2."""
    fake_walkforward(tmp_path / "wf", "wf/fold-0")
    for text, said in (("[" * 100_000, "not a walk-forward report (JSON nested too deeply to read)"),
                       ('{"folds": [{"fold": 0, "metrics": {"net_pnl": %s}, "passed_by": {"edge": true}}]}'
                        % ("9" * 400), "fold record 0: metrics.net_pnl is an integer of 400 digits, not of type float")):
        (tmp_path / "wf" / "report.json").write_text(text)
        assert report_cli.main([str(tmp_path / "wf")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("foxc.report: error: ") and said in err and len(err.splitlines()) == 1
