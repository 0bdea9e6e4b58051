"""Learning, measured against what is achievable: the exact optimum of a synthetic market.

A policy that never trades earns 0 of the optimum and fails the first test; one that trades
on noise pays the spread and fails the second.
"""
import pytest

from foxc.bench.edge import run_one
from foxc.driver import open_runtime

SMALL = dict(n_backtests=32, seq_len=8, per_capacity=1024, eval_rows=16_384, synthetic_rows=100_000)


@pytest.mark.slow  # a training run to its edge: tens of seconds on two cores
@pytest.mark.parametrize("precision", ["f32", "tf32"])
def test_agent_learns_the_easy_markets_edge(precision):
    """Trained 3,000 steps on `easy` (B=32, K=8), the greedy agent earns at least half of the
    market's exact optimum on held-out rows drawn with another seed; in TF32 too (the references
    round the products' operands as the tensor cores do)."""
    row = run_one(open_runtime("reference"), "easy", 0, 3000, precision=precision, **SMALL)
    print(f"easy: {row['opt_frac']:.3f} of the optimum ({row['pnl_ticks']:.4f} ± {row['pnl_se']:.4f} ticks per "
          f"snapshot, optimum {row['optimum']:.4f}), {row['trades']} trades")
    assert row["opt_frac"] >= 0.5


@pytest.mark.slow  # a training run to its edge: tens of seconds on two cores
def test_agent_stays_out_of_a_market_without_edge():
    """On `null` (no signal) the greedy agent trades at most once per 2,000 snapshots per backtest."""
    row = run_one(open_runtime("reference"), "null", 0, 1000, **SMALL)
    print(f"null: {row['trades_per_2000']:.3f} trades per 2,000 snapshots, PnL {row['pnl_ticks']:.5f} ticks")
    assert row["trades_per_2000"] <= 1.0
    assert abs(row["pnl_ticks"]) <= 3 * row["pnl_se"] + 1e-12


def test_edge_benchmark_cli_smoke(tmp_path, capsys):
    """`python -m foxc.bench edge` on the reference backend: a table, a JSON, a verdict per run."""
    import json

    from foxc.bench import edge
    out = tmp_path / "edge.json"
    assert edge.main(["--backend", "reference", "--markets", "null,easy", "--seeds", "1", "--steps",
                      "null=20,easy=20", "--n-backtests", "8", "--seq-len", "4", "--eval-rows", "2048",
                      "--set", "lr_q=2e-4", "--precision", "tf32", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("summary:") and "settings [('lr_q', 0.0002)]; precision tf32" in "\n".join(lines)
    record = json.loads(out.read_text())
    rows = record["rows"]
    assert record["precision"] == "tf32"
    assert [r["market"] for r in rows] == ["null", "easy"] and all(r["goal"] in ("pass", "fail") for r in rows)
    assert rows[1]["optimum"] > 0.19 and rows[0]["optimum"] == 0.0


def test_edge_steps_of_a_market_not_run_is_refused(monkeypatch, capsys):
    """`--markets easy --steps null=20`: the steps would be ignored and easy run at its default budget (3,000
    steps on the CPU); refused naming both flags before any run."""
    from foxc.bench import edge

    def ran(*args, **kwargs):
        raise AssertionError("a run started")
    monkeypatch.setattr(edge, "run_one", ran)
    assert edge.main(["--backend", "reference", "--markets", "easy", "--steps", "null=20", "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert "--steps null=20" in err and "--markets" in err and len(err.splitlines()) == 1


def test_edge_market_or_steps_given_twice_is_refused(monkeypatch, capsys):
    """--markets easy,easy ran every seed of easy twice; --steps easy=4,easy=40 kept the last silently."""
    from foxc.bench import edge
    monkeypatch.setattr(edge, "run_one", lambda *a, **k: (_ for _ in ()).throw(AssertionError("a run started")))
    for argv, named in ((["--markets", "easy,easy"], "--markets"), (["--steps", "easy=4,easy=40"], "--steps")):
        with pytest.raises(SystemExit) as exit_:
            edge.main(["--backend", "reference", *argv])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and named in err and "easy given twice" in err
