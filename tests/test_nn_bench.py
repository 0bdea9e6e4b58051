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
