"""A run shorter than the validation schedule's first step still chooses its policy on validation: it validates at
its last step, so an untrained agent's policy is flat, not its final weights trading on every snapshot."""
import json

from foxc import train


def test_a_run_shorter_than_the_schedule_validates_at_its_end(tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(["--backend", "reference", "--synthetic", "null", "--n-steps", "20", "--val-every", "500",
                       "--out", str(out)]) == 0
    selection = json.loads((out / "summary.json").read_text())["selection"]
    assert selection["validations"] == 1 and selection["kept"] == "flat"
    assert "policy: flat" in capsys.readouterr().out
