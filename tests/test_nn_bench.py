"""`python -m foxc.bench learn` runs on the reference backend (tiny shapes) and writes its JSON."""
import json

from foxc.bench import learn


def test_learn_bench_smoke(tmp_path, capsys):
    out = tmp_path / "learn.json"
    assert learn.main(["--backend", "reference", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.strip().splitlines()[-1].startswith("summary:")
    record = json.loads(out.read_text())
    assert {r["precision"] for r in record["rows"]} == {"f32", "tf32"}
    assert set(record["peak_tflops"]) == {"f32", "tf32"}


def test_profile_flags_without_the_profile_are_refused(tmp_path, capsys):
    """--out and --precision set what --profile (--precision: or --profile-steps) runs; without it the benchmark
    times both precisions and writes no profile.json: refused, not ignored."""
    for argv, flag in ((["--out", str(tmp_path)], "--out"), (["--precision", "tf32"], "--precision"),
                       (["--profile-steps", "0:1", "--out", str(tmp_path)], "--out")):
        assert learn.main(["--backend", "reference", *argv]) == 2
        err = capsys.readouterr().err
        assert f"{flag} " in err and "only with --profile" in err and len(err.splitlines()) == 1
    assert learn.main(["--backend", "reference", "--profile-steps", "0:1", "--precision", "tf32"]) == 0
