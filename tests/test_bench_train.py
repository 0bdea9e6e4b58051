from foxc.bench import train


def test_train_benchmark_runs_small_on_reference(capsys, tmp_path):
    assert train.main(["--backend", "reference", "--n-backtests", "8", "--steps", "2", "--seq-len", "4",
                       "--per-capacity", "32", "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "summary:" in out.strip().splitlines()[-1] and "checkpoint at B=8" in out
    assert (tmp_path / "t.json").is_file()
