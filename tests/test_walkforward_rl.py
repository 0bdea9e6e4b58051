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
        records = [json.loads(line) for line in (out / f"fold-{fold['fold']}" / "metrics.jsonl").open()]
        assert [r["steps"] for r in records if "steps" in r] == [6, 6]  # every record exactly --log-every steps
        trained = fold["train_summary"]
        assert trained["steps"] == 12 and trained["frames"] == 12 and trained["frames_dropped"] == 0
    assert "rl: foxc integrated trainer" in (out / "report.md").read_text()
