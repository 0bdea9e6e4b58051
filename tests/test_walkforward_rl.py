"""Walk-forward with the integrated RL trainer (the default) on the reference backend, tiny."""
import json

from foxc import walkforward


def test_rl_folds_train_evaluate_and_report(tmp_path):
    out = tmp_path / "wf"
    rc = walkforward.main(["--backend", "reference", "--folds", "2", "--steps-per-fold", "12",
                           "--synthetic-rows", "30000", "--out", str(out), "--no-plots",
                           "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--log-every", "6"])
    assert rc in (0, 1)  # 1: not every fold passes its criteria, which an untrained agent need not
    report = json.loads((out / "report.json").read_text())
    assert [f["fold"] for f in report["folds"]] == [0, 1]
    for fold in report["folds"]:
        assert "error" not in fold or not fold["error"], fold
        assert (out / f"fold-{fold['fold']}" / "metrics.jsonl").is_file()
    assert "rl: foxc integrated trainer" in (out / "report.md").read_text()
