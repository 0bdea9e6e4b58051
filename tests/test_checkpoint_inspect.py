"""foxc-ckpt-inspect: tables, ISV, sections, diffs, verification, JSON, and one clean line for bad files."""
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from checkpoint_helpers import sample_state
from foxc.checkpoint import write_checkpoint
from foxc.checkpoint.inspect_cli import array_stats, main, max_abs_diff
from foxc.isv.registry import SLOTS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def saved(tmp_path, rng):
    state = sample_state(rng)
    state["dqn_w"][0, 0] = np.nan
    state["dqn_w"][1, 1] = -np.inf
    path = write_checkpoint(tmp_path / "checkpoint-7.foxc", 7, state,
                            {"config": {"batch": 8}, "data": {"source": "book.parquet", "sha256": "ab" * 32}})
    return path, state


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_table(saved, capsys):
    path, state = saved
    code, out, _ = run(capsys, path)
    assert code == 0
    assert f"{path}: FOXC v1, step 7, 10 sections" in out and "data: source book.parquet" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()[3:]}
    assert lines["dqn_w"][1:4] == ["96", "<f4", "[4,"] and lines["dqn_w"][-2:] == ["1", "1"]
    assert lines["adam_dqn_w.m"][2:5] == ["adamw", "step", "17"] and "adam_dqn_w.v" in lines
    assert lines["empty"][-6:] == ["-", "-", "-", "-", "0", "0"]


def test_json_table(saved, capsys):
    path, state = saved
    code, out, _ = run(capsys, path, "--json")
    record = json.loads(out)
    assert code == 0 and record["step"] == 7 and record["config"] == {"batch": 8}
    rows = {row["name"]: row for row in record["section_table"]}
    finite = state["dqn_w"][np.isfinite(state["dqn_w"])]
    assert rows["dqn_w"]["nan"] == 1 and rows["dqn_w"]["inf"] == 1
    assert rows["dqn_w"]["min"] == pytest.approx(float(finite.min()))
    assert rows["dqn_w"]["std"] == pytest.approx(float(finite.astype(np.float64).std()))
    assert rows["prng"]["max"] == int(state["prng"].max())


def test_adamw_table(saved, capsys):
    path, state = saved
    code, out, _ = run(capsys, path)
    lines = out.splitlines()
    at = lines.index("AdamW states (wire format: n, step, lr, beta1, beta2, eps, wd; L2 norms of m and v):")
    assert lines[at + 1].split() == ["name", "n", "step", "lr", "beta1", "beta2", "eps", "wd", "m_norm", "v_norm"]
    assert lines[at + 3].split()[:8] == ["adam_dqn_w", "24", "17", "0.0001", "0.9", "0.999", "1e-08", "0.01"]
    record = json.loads(run(capsys, path, "--json")[1])
    assert record["has_meta"] is True and record["sealed"] is True and record["notes"] == []
    (adam,) = record["adamw"]
    assert adam["n"] == 24 and adam["m_norm"] == pytest.approx(float(np.linalg.norm(state["adam_dqn_w"].m)), rel=1e-6)
    v_row = next(row for row in record["section_table"] if row["name"] == "adam_dqn_w.v")
    assert v_row["bytes"] is None and v_row["shape"] is None, "a field is a number or null, never ''"


def test_array_stats():
    stats = array_stats(np.array([1.0, np.nan, np.inf, 3.0], np.float32))
    assert stats == {"nan": 1, "inf": 1, "min": 1.0, "max": 3.0, "mean": 2.0, "std": 1.0}
    assert array_stats(np.array([True, False]))["max"] is True


def test_isv(saved, capsys):
    path, _ = saved
    code, out, _ = run(capsys, path, "--isv")
    assert code == 0 and len(out.splitlines()) == 2 + len(SLOTS)
    assert out.splitlines()[2 + 7].split() == ["7", "gamma", "0.99"]
    values = json.loads(run(capsys, path, "--isv", "--json")[1])["isv"]
    assert values["gamma"] == pytest.approx(0.99) and list(values) == [s.name for s in SLOTS]


def test_section(saved, capsys):
    path, state = saved
    code, out, _ = run(capsys, path, "--section", "adam_dqn_w")
    assert code == 0 and "step 17" in out and out.count("=") == 2
    record = json.loads(run(capsys, path, "--section", "dqn_w", "--json")[1])
    assert record["shape"] == [4, 6] and record["values"][0][0] == "nan" and record["values"][1][1] == "-inf"
    assert record["values"][2] == pytest.approx(state["dqn_w"][2].tolist())
    assert json.loads(run(capsys, path, "--section", "blob", "--json")[1])["hex"] == state["blob"].hex()
    code, _, err = run(capsys, path, "--section", "nope")
    assert code == 2 and "no section 'nope'" in err


def test_diff(saved, tmp_path, capsys, rng):
    path, state = saved
    code, out, _ = run(capsys, path, "--diff", path)
    assert code == 0 and out.splitlines()[-1] == "identical"
    changed = dict(state, dqn_b=state["dqn_b"] + np.float32(0.5), prng=state["prng"][:2])
    del changed["blob"]
    other = write_checkpoint(tmp_path / "other.foxc", 8, changed, {"config": {"batch": 16, "seed": 1}})
    code, out, _ = run(capsys, path, "--diff", other)
    assert code == 1 and out.splitlines()[-1] == "differs: 3 of 8 sections, step"
    # the two files, not a resume's "8 in the checkpoint, 16 now"
    assert [line for line in out.splitlines() if line.startswith("config ")] == [
        f"config batch: 8 in {path}, 16 in {other}", f"config seed: not in {path}, 1 in {other}"]
    record = json.loads(run(capsys, path, "--diff", other, "--json")[1])
    rows = {row["name"]: row["max_abs_diff"] for row in record["sections"]}
    notes = {row["name"]: row["note"] for row in record["sections"]}
    assert not record["identical"] and rows["dqn_b"] == pytest.approx(0.5) and rows["dqn_w"] == 0.0
    assert all(v is None or isinstance(v, float) for v in rows.values()), "max_abs_diff: a number or null"
    assert rows["blob"] is None and notes["blob"].startswith("only in")
    assert rows["prng"] is None and notes["prng"].startswith("uint32 [3, 4] vs")


def test_max_abs_diff_treats_matching_nans_as_equal():
    a = np.array([np.nan, 1.0, np.inf], np.float32)
    assert max_abs_diff(a, a.copy()) == (0.0, "")
    assert max_abs_diff(a, np.array([np.nan, 1.5, np.inf], np.float32)) == (0.5, "")
    assert max_abs_diff(a, np.array([0.0, 1.0, np.inf], np.float32)) == (np.inf, "")
    diff, note = max_abs_diff(np.zeros(2, np.float32), np.zeros(2, np.float64))
    assert diff is None and note.startswith("float32")


def test_verify(saved, tmp_path, capsys):
    path, _ = saved
    code, out, _ = run(capsys, path, "--verify")
    assert code == 0 and out.startswith(f"valid: {path}: step 7")
    damaged = tmp_path / "damaged.foxc"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    damaged.write_bytes(bytes(data))
    code, out, _ = run(capsys, damaged, "--verify")
    assert code == 1 and out.startswith(f"invalid: {damaged}: ") and len(out.splitlines()) == 1
    record = json.loads(run(capsys, damaged, "--verify", "--json")[1])
    assert record["valid"] is False and "section" in record["reason"]


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", None])
def test_invalid_file_is_one_clean_line(tmp_path, capsys, content):
    path = tmp_path / "bad.foxc"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, path)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith("foxc-ckpt-inspect: ")


def test_tool_wrapper_prints_no_traceback(tmp_path):
    bad = tmp_path / "bad.foxc"
    bad.write_bytes(b"FOXC" * 10)
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "ckpt_inspect.py"), str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("foxc-ckpt-inspect:") and len(result.stderr.splitlines()) == 1


def test_checkpoint_benchmark_runs_small(tmp_path, capsys):
    from foxc.bench import checkpoint as bench
    out_json = tmp_path / "bench.json"
    assert bench.main(["--backend", "reference", "--n-backtests", "8", "--per-capacity", "64", "--repeats", "1",
                       "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("summary: checkpoint of")
    assert json.loads(out_json.read_text())["rows"][2]["what"].startswith("load")


def test_table_of_a_checkpoint_without_state_sections(tmp_path, capsys):
    """A valid file that holds no state (only its meta and seal) lists an empty table, not a traceback."""
    path = write_checkpoint(tmp_path / "checkpoint-1.foxc", 1, {})
    code, out, err = run(capsys, path)
    assert code == 0 and not err
    assert out.splitlines()[-2].split()[:2] == ["name", "bytes"] and set(out.splitlines()[-1]) <= {"-", " "}


def test_json_of_non_finite_values_is_valid_json(tmp_path, rng, capsys):
    """A diverged run's state (NaN or inf in the ISV, an AdamW moment, a difference, a std that overflows)
    comes out as the strings "nan", "inf", "-inf" in every --json mode, as section values do: no traceback."""
    state = sample_state(rng)
    state["isv"][3], state["isv"][4] = np.nan, -np.inf
    state["adam_dqn_w"].m[0] = np.inf
    state["huge"] = np.array([1e300, -1e300], np.float64)
    path = write_checkpoint(tmp_path / "checkpoint-1.foxc", 1, state, {"config": {"lr": float("nan")}})
    other = dict(state, dqn_b=state["dqn_b"].copy())
    other["dqn_b"][0] = np.inf
    other_path = write_checkpoint(tmp_path / "other.foxc", 1, other, {"config": {"lr": 1.0}})
    for argv in ([path, "--json"], [path, "--isv", "--json"], [path, "--section", "adam_dqn_w", "--json"],
                 [path, "--diff", other_path, "--json"], [path, "--verify", "--json"]):
        code, out, err = run(capsys, *argv)
        assert code in (0, 1) and not err, (argv, err)
        json.loads(out)
    record = json.loads(run(capsys, path, "--isv", "--json")[1])
    assert list(record["isv"].values())[3:5] == ["nan", "-inf"]
    table = json.loads(run(capsys, path, "--json")[1])
    assert table["config"] == {"lr": "nan"} and table["adamw"][0]["m_norm"] == "inf"
    diff = json.loads(run(capsys, path, "--diff", other_path, "--json")[1])
    assert {row["name"]: row["max_abs_diff"] for row in diff["sections"]}["dqn_b"] == "inf"


def test_statistics_of_huge_values_print_no_warnings(tmp_path, capsys):
    """A std or mean that overflows float64 is shown as inf, without numpy's RuntimeWarning lines on stderr."""
    path = write_checkpoint(tmp_path / "checkpoint-1.foxc", 1, {"w": np.array([1e308, -1e308, 1e308], np.float64)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would print on stderr
        code, out, err = run(capsys, path)
    assert code == 0 and err == "" and out.splitlines()[-1].split()[-3:] == ["inf", "0", "0"]


def test_interrupt_and_a_failed_write_are_one_line(saved, monkeypatch, capsys):
    """Ctrl-C while a large file is read: `interrupted`, 130; stdout on a full disk: one line naming the error, 2."""
    import foxc.checkpoint.inspect_cli as cli

    def interrupted(path):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "read", interrupted)
    assert run(capsys, saved[0])[0] == 130
    assert capsys.readouterr().err == "" and run(capsys, saved[0], "--verify")[2] == "foxc-ckpt-inspect: interrupted\n"
    monkeypatch.undo()

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(cli, "print_table", full)
    code, _, err = run(capsys, saved[0])
    assert code == 2 and err == "foxc-ckpt-inspect: error: No space left on device\n"


def test_full_only_with_section(saved, capsys):
    """--full changes only what --section prints: with another mode it is refused, not ignored."""
    for argv in ([], ["--isv"], ["--verify"], ["--diff", str(saved[0])]):
        with pytest.raises(SystemExit) as exit_:
            main([str(saved[0]), "--full", *argv])
        assert exit_.value.code == 2 and "--full: only with --section" in capsys.readouterr().err
    assert run(capsys, saved[0], "--section", "dqn_b", "--full")[0] == 0


@pytest.mark.parametrize("argv", [[""], ["{path}", "--diff", ""], ["  ", "--verify"]])
def test_an_empty_path_is_named_as_such(saved, capsys, argv):
    """An empty path (an unset shell variable) is not read as the current directory ('.: a directory')."""
    with pytest.raises(SystemExit) as exit_:
        main([a.format(path=saved[0]) for a in argv])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "an empty path" in err and "'.'" not in err and ".:" not in err


def test_a_huge_file_is_refused_by_its_header_or_its_size(tmp_path, monkeypatch, capsys):
    """A large file that is no checkpoint (a data file given by mistake) is refused by its first bytes, not after
    reading all of it into memory; one that does not fit in memory is one line, not a MemoryError traceback."""
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.write(b"PAR1")
        f.truncate(1 << 40)  # 1 TiB, sparse
    code, _, err = run(capsys, big)
    assert code == 2 and "bad magic" in err and len(err.splitlines()) == 1
    path = write_checkpoint(tmp_path / "checkpoint-1.foxc", 1, {"w": np.zeros(4, np.float32)})

    def no_memory(*args, **kwargs):
        raise MemoryError
    import foxc.checkpoint.format as fmt
    monkeypatch.setattr(fmt.np, "empty", no_memory)
    code, _, err = run(capsys, path)
    assert code == 2 and "do not fit in memory" in err and str(path) in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("kind", ["a FIFO", "a directory", "a character device"])
def test_a_path_that_is_no_regular_file_is_refused_at_once_naming_what_it_is(tmp_path, kind):
    """A checkpoint is a regular file: a FIFO nobody writes hung (the open waits for a writer, as `cat` does), a
    directory or a device was 'cannot read: a directory, ...' or 'not a regular file', not saying what it is."""
    path = {"a FIFO": tmp_path / "fifo", "a directory": tmp_path, "a character device": Path("/dev/null")}[kind]
    if kind == "a FIFO":
        os.mkfifo(path)
    for argv in ([path], [path, "--verify"], [write_checkpoint(tmp_path / "c.foxc", 1, {}), "--diff", path]):
        done = subprocess.run([sys.executable, "-m", "foxc.checkpoint.inspect_cli", *map(str, argv)],
                              capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == ((1, f"invalid: {path}: {kind}, not a checkpoint file (a checkpoint "
                                                      "is a regular file)\n") if "--verify" in argv else (2, ""))
        assert done.stderr == ("" if "--verify" in argv else f"foxc-ckpt-inspect: error: {path}: {kind}, not a "
                               "checkpoint file (a checkpoint is a regular file)\n")
