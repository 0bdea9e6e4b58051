"""FOXC v1 files without meta or checksum (the Rust trainer's layout): read with notes, inspected, never resumed.

The files are built byte by byte from the format description (shared/seeds/003_be27fd34d2f0900f.txt,
save_checkpoint): header `magic u32, version u32, step u64, n_sections u32`, then sections
`name_len u16, name, data_len u64, data`; AdamW sections `u64 n, i32 step, f32 lr, beta1, beta2, eps, wd,
f32 m[n], f32 v[n]`. Nothing here uses foxc's writer, except to make a foxc file to compare against.
"""
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from checkpoint_helpers import encoded_bytes, refused, split_sections
from foxc.checkpoint import (AdamState, CheckpointError, expected_from, parse_checkpoint, read_checkpoint,
                             write_checkpoint)
from foxc.checkpoint.inspect_cli import main
from foxc.checkpoint.seed_layout import SEED_ISV_SLOTS, isv_slot_names, parse, read

ROOT = Path(__file__).resolve().parent.parent
STEP = 5000
ISV_SLOTS = 588  # RL_SLOTS_END after 585 -> 588
DOCUMENTED = {400: 0.99, 413: 3e-4, 584: 0.85, 586: 0.01, 587: 2.0}  # RL_GAMMA, RL_LR_Q, ... by index


def header(step: int, n_sections: int) -> bytes:
    magic, version = 0x464F5843, 1
    return struct.pack("<I", magic) + struct.pack("<I", version) + struct.pack("<Q", step) + struct.pack("<I", n_sections)


def section(name: str, data: bytes) -> bytes:
    raw = name.encode("utf-8")
    return struct.pack("<H", len(raw)) + raw + struct.pack("<Q", len(data)) + data


def f32(values) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def adamw_wire(m, v, step, lr, beta1, beta2, eps, wd) -> bytes:
    head = struct.pack("<Q", len(m)) + struct.pack("<i", step) + struct.pack("<5f", lr, beta1, beta2, eps, wd)
    return head + f32(m) + f32(v)


def seed_bytes(sections, step: int = STEP) -> bytes:
    return header(step, len(sections)) + b"".join(section(name, data) for name, data in sections)


@pytest.fixture(scope="module")
def seed():
    """A seed-like file: isv, the dqn head online and target, a few other buffers, two AdamW states."""
    rng = np.random.default_rng(3)
    isv = np.zeros(ISV_SLOTS, np.float32)
    for index, value in DOCUMENTED.items():
        isv[index] = value
    isv[5] = 7.0  # an undocumented slot
    arrays = {"isv": isv,
              "dqn_w": rng.standard_normal(128 * 231).astype(np.float32),
              "dqn_b": rng.standard_normal(231).astype(np.float32),
              "dqn_w_target": rng.standard_normal(128 * 231).astype(np.float32),
              "dqn_b_target": rng.standard_normal(231).astype(np.float32),
              "policy_w": rng.standard_normal(128 * 7).astype(np.float32),
              "value_b": np.array([0.25], np.float32),
              "outcome_w": rng.standard_normal(3 * 128).astype(np.float32)}
    adam = {"adam_dqn_w": (rng.standard_normal(128 * 231).astype(np.float32),
                           rng.random(128 * 231, dtype=np.float32), 4999, 3e-4, 0.9, 0.999, 1e-8, 0.01),
            "adam_dqn_b": (rng.standard_normal(231).astype(np.float32), rng.random(231, dtype=np.float32),
                           4999, 3e-4, 0.9, 0.999, 1e-8, 0.0)}
    sections = [(name, f32(values.tolist())) for name, values in arrays.items()]
    sections += [(name, adamw_wire(m.tolist(), v.tolist(), *rest)) for name, (m, v, *rest) in adam.items()]
    return seed_bytes(sections), arrays, adam


@pytest.fixture
def seed_file(tmp_path, seed):
    path = tmp_path / "checkpoint-5000.bin"
    path.write_bytes(seed[0])
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------- reading

def test_seed_file_reads_with_values_types_and_notes(seed):
    data, arrays, adam = seed
    ckpt = parse(data)
    assert ckpt.step == STEP and not ckpt.has_meta and not ckpt.sealed and ckpt.meta == {}
    assert list(ckpt.sections) == [*arrays, *adam] and ckpt.skipped == [] and ckpt.n_sections == len(arrays) + 2
    assert ckpt["dqn_w"].shape == (128, 231) and ckpt["dqn_w_target"].shape == (128, 231), "the seed states W[128×231]"
    assert ckpt["dqn_b"].shape == (231,) and ckpt["policy_w"].shape == (128 * 7,), "1-D where the seed states no shape"
    for name, values in arrays.items():
        assert ckpt[name].dtype == np.float32 and ckpt[name].tobytes() == values.tobytes(), name
        assert ckpt.infos[name].dtype == "<f4"
    for name, (m, v, step, lr, beta1, beta2, eps, wd) in adam.items():
        state = ckpt[name]
        assert isinstance(state, AdamState) and ckpt.infos[name].dtype == "adamw"
        assert ckpt.infos[name].shape == (m.size,)
        assert state.m.tobytes() == m.tobytes() and state.v.tobytes() == v.tobytes() and state.step == step
        assert (state.lr, state.beta1, state.beta2, state.eps, state.wd) == tuple(
            float(np.float32(x)) for x in (lr, beta1, beta2, eps, wd))
    text = " | ".join(ckpt.notes)
    assert "no 'meta' section" in text and "configuration" in text and "shapes" in text and "sha256" in text
    assert "no 'checksum' section: damage to the file cannot be detected" in text
    assert "Rust trainer" in text


def test_seed_isv_slots_are_named_where_the_seed_documents_them(seed):
    ckpt = parse(seed[0])
    isv = ckpt.isv()
    assert len(isv) == ISV_SLOTS and list(isv)[:2] == ["slot_0", "slot_1"] and isv["slot_5"] == 7.0
    assert isv["RL_GAMMA_INDEX"] == pytest.approx(0.99) and isv["RL_LR_Q_INDEX"] == pytest.approx(3e-4)
    assert isv["RL_CONF_GATE_MAX_HOLD_FRAC_INDEX"] == pytest.approx(0.85)
    assert isv["RL_STOP_LOSS_THRESHOLD_INDEX"] == pytest.approx(2.0)
    assert ckpt.isv_slots[400] == "RL_GAMMA_INDEX" and ckpt.isv_slots[587] == "RL_STOP_LOSS_THRESHOLD_INDEX"


def test_the_slot_table_quotes_the_seed():
    """Every documented index is unique, below RL_SLOTS_END, and its constant appears in the seed's text."""
    indices = [index for index, *_ in SEED_ISV_SLOTS]
    assert len(set(indices)) == len(indices) and all(0 <= i < ISV_SLOTS for i in indices)
    assert {400: "RL_GAMMA_INDEX", 413: "RL_LR_Q_INDEX", 584: "RL_CONF_GATE_MAX_HOLD_FRAC_INDEX",
            587: "RL_STOP_LOSS_THRESHOLD_INDEX"}.items() <= {i: n for i, n, *_ in SEED_ISV_SLOTS}.items()
    texts = [p.read_text(errors="replace") for where in (ROOT, ROOT.parent)
             for p in sorted((where / "shared" / "seeds").glob("*.txt"))]
    if not texts:
        pytest.skip("the seed's text is not in this checkout")
    for index, name, *_ in SEED_ISV_SLOTS:
        assert any(f"{name}: usize = {index}" in t or any(line.split()[1:3] == [name, str(index)]
                   for line in t.splitlines() if "#define" in line) for t in texts), name
    assert isv_slot_names(3) == ["slot_0", "slot_1", "slot_2"]


def test_the_encoder_sibling_is_noted(seed_file):
    assert any(f"{seed_file.with_suffix('.encoder')} is absent" in n for n in read(seed_file).notes)
    seed_file.with_suffix(".encoder").write_bytes(b"\0" * 10)
    assert any("is present (10 bytes), not read" in n for n in read(seed_file).notes)


def test_types_are_inferred_from_names_and_sizes():
    odd = b"\x01\x02\x03"
    not_adam = f32([1.0, 2.0, 3.0])  # 12 bytes: not the wire format (needs 32 + 8·n)
    short_isv = f32([0.0] * 585)
    ckpt = parse(seed_bytes([("isv", short_isv), ("blob", odd), ("adam_x", not_adam),
                                        ("dqn_w", f32([1.0] * 10)), ("empty", b"")]))
    assert ckpt["blob"] == odd and ckpt.infos["blob"].dtype == "bytes"
    assert ckpt["adam_x"].tolist() == [1.0, 2.0, 3.0] and ckpt.infos["adam_x"].dtype == "<f4"
    assert ckpt["dqn_w"].shape == (10,) and ckpt["empty"].shape == (0,)
    text = " | ".join(ckpt.notes)
    assert "'adam_x' is named like an AdamW state but is not in its wire format" in text
    assert "'dqn_w' holds 10 floats, the seed's text states 128 × 231; read as 1-D" in text
    assert "'isv' holds 585 slots" in text and "before RL_SLOTS_END moved to 588" in text


def test_a_file_that_is_not_the_seeds_gets_no_seed_notes():
    ckpt = parse(seed_bytes([("weights", f32([1.0]))]))
    assert not any("Rust trainer" in n for n in ckpt.notes) and ckpt.isv_slots == []
    with pytest.raises(CheckpointError, match="no 'isv' section"):
        ckpt.isv()


def test_a_file_without_meta_is_read_by_the_inspector_only(seed, seed_file):
    """Every other reader (a resume, python -m foxc.evaluate) refuses it: nothing says which run it continues."""
    for reader in (lambda: parse_checkpoint(seed[0]), lambda: read_checkpoint(seed_file)):
        with pytest.raises(CheckpointError, match="cannot resume from it"):
            reader()


# ---------------------------------------------------------------------------- framing is still refused

def test_truncated_seed_files_are_refused(seed):
    data = seed[0]
    isv_data = 20 + 2 + 3 + 8
    refused(data[:10], "short file: 10 bytes", reader=parse)
    assert refused(data[:21], "n_sections 10 cannot fit", reader=parse).offset == 16
    dqn_w_at = isv_data + 4 * ISV_SLOTS
    assert refused(data[:dqn_w_at + 5], "section '#1'", "run past the end of the file",
                   reader=parse).offset == dqn_w_at
    assert refused(data[:isv_data + 100], "section 'isv'", "data_len 2352 runs past the end",
                   reader=parse).offset == 25
    error = refused(data[:-1], "section 'adam_dqn_b'", "runs past the end", reader=parse)
    assert error.section == "adam_dqn_b" and error.offset is not None
    for cut in range(0, len(data), 9973):
        with pytest.raises(CheckpointError):
            parse(data[:cut])


def test_a_trailing_byte_is_refused(seed):
    data = seed[0]
    assert refused(data + b"\0", "1 trailing bytes", reader=parse).offset == len(data)


def test_a_duplicate_section_is_refused():
    data = seed_bytes([("isv", f32([0.0] * ISV_SLOTS)), ("dqn_b", f32([1.0])), ("dqn_b", f32([2.0]))])
    error = refused(data, "duplicate section name", "section 'dqn_b'", "first at byte 2385", reader=parse)
    assert error.offset == 20 + 2 + 3 + 8 + 4 * ISV_SLOTS + 2 + 5 + 8 + 4


def test_bad_header_fields_are_refused(seed):
    data = bytearray(seed[0])
    data[16:20] = struct.pack("<I", 2)  # n_sections says fewer
    refused(bytes(data), "trailing bytes", reader=parse)
    refused(b"FOXC" + seed[0][4:], "bad magic", reader=parse)


def test_damaged_seed_files_give_checkpoint_errors_only():
    """Without a checksum damage may read; it must never raise anything but CheckpointError."""
    rng = np.random.default_rng(11)
    base = seed_bytes([("isv", f32([0.5] * 12)), ("dqn_w", f32([1.0] * 6)),
                       ("adam_dqn_w", adamw_wire([0.1] * 3, [0.2] * 3, 1, 1e-3, 0.9, 0.999, 1e-8, 0.0)),
                       ("blob", b"\x01\x02\x03")])
    for _ in range(1500):
        out = bytearray(base)
        for _ in range(rng.integers(1, 4)):
            out[rng.integers(len(out))] ^= int(rng.integers(1, 256))
        cut = len(out) if rng.random() < 0.7 else int(rng.integers(len(out)))
        try:
            parse(bytes(out[:cut]))
        except CheckpointError:
            pass


# ---------------------------------------------------------------------------- meta without checksum

@pytest.fixture
def unsealed(rng):
    """A foxc-written file with its checksum section cut off and n_sections lowered by one, by bytes."""
    state = {"dqn_w": rng.standard_normal((4, 6)).astype(np.float32),
             "adam_dqn_w": AdamState(np.ones(24, np.float32), np.ones(24, np.float32), 3, 1e-3, 0.9, 0.999, 1e-8, 0.0)}
    sealed = encoded_bytes(9, state, {"config": {"batch": 8}})
    _, sections = split_sections(sealed)
    assert sections[-1][0] == "checksum"
    cut = len(sealed) - len(section("checksum", sections[-1][1]))
    data = sealed[:16] + struct.pack("<I", len(sections) - 1) + sealed[20:cut]
    return data, state


def test_meta_without_checksum_reads_and_still_checks_each_section(unsealed):
    data, state = unsealed
    ckpt = parse_checkpoint(data, expected_from(state))
    assert ckpt.has_meta and not ckpt.sealed and ckpt.config == {"batch": 8} and ckpt.n_sections == 3
    assert ckpt["dqn_w"].tobytes() == state["dqn_w"].tobytes()
    assert len(ckpt.notes) == 1 and "every section's data is verified against the meta's sha256" in ckpt.notes[0]
    damaged = bytearray(data)
    damaged[data.index(state["dqn_w"].tobytes()) + 5] ^= 1
    refused(bytes(damaged), "sha256 mismatch", "section 'dqn_w'")
    extra = data[:16] + struct.pack("<I", 4) + data[20:] + section("future", b"")
    refused(extra, "does not describe this section", "section 'future'")


def test_inspector_on_meta_without_checksum(unsealed, tmp_path, capsys):
    path = tmp_path / "unsealed.foxc"
    path.write_bytes(unsealed[0])
    code, out, _ = run(capsys, path)
    assert code == 0 and "(2 of state, meta, no checksum)" in out and "note: no 'checksum' section" in out
    code, out, _ = run(capsys, path, "--verify")
    assert code == 0 and "not sealed (no checksum)" in out.splitlines()[0]


# ---------------------------------------------------------------------------- the inspector

def test_inspector_table(seed_file, capsys):
    code, out, err = run(capsys, seed_file)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == (f"{seed_file}: FOXC v1, step {STEP}, 10 sections (10 of state, no meta, no checksum), "
                        f"{seed_file.stat().st_size:,} bytes, writer unknown")
    rows = {line.split()[0]: line for line in lines[3:]}
    assert "[128, 231]" in rows["dqn_w"] and rows["dqn_w"].endswith("the seed's C51/DQN head weights")
    assert rows["dqn_w"].split()[1:3] == [str(128 * 231 * 4), "<f4"]
    assert "adamw step 4999" in rows["adam_dqn_w.m"] and "adam_dqn_w.v" in rows
    adam = rows["adam_dqn_w"].split()  # the AdamW table: name n step lr beta1 beta2 eps wd m_norm v_norm
    assert adam[1:8] == ["29568", "4999", "0.0003", "0.9", "0.999", "1e-08", "0.01"] and len(adam) == 10
    assert "note: no 'meta' section" in out and "note: no 'checksum' section" in out
    assert f"{seed_file.with_suffix('.encoder')} is absent" in out


def test_inspector_verify(seed_file, capsys):
    code, out, _ = run(capsys, seed_file, "--verify")
    assert code == 0 and out.startswith(f"valid: {seed_file}: step {STEP}, 10 sections")
    assert "no meta and no checksum" in out.splitlines()[0] and "note: no 'meta' section" in out
    record = json.loads(run(capsys, seed_file, "--verify", "--json")[1])
    assert record["valid"] is True and record["step"] == STEP and any("no 'meta'" in n for n in record["notes"])


def test_inspector_json(seed_file, seed, capsys):
    code, out, _ = run(capsys, seed_file, "--json")
    record = json.loads(out)
    assert code == 0 and record["has_meta"] is False and record["sealed"] is False
    assert record["config"] is None and record["foxc_version"] is None and record["notes"]
    rows = {row["name"]: row for row in record["section_table"]}
    assert rows["dqn_w"]["shape"] == [128, 231] and rows["dqn_w"]["about"] == "the seed's C51/DQN head weights"
    assert rows["dqn_b"]["min"] == pytest.approx(float(seed[1]["dqn_b"].min()))
    adam = {row["name"]: row for row in record["adamw"]}
    m, v, step, lr, beta1, beta2, eps, wd = seed[2]["adam_dqn_w"]
    assert adam["adam_dqn_w"]["n"] == m.size and adam["adam_dqn_w"]["step"] == step
    assert adam["adam_dqn_w"]["lr"] == pytest.approx(lr) and adam["adam_dqn_w"]["beta2"] == pytest.approx(beta2)
    assert adam["adam_dqn_w"]["m_norm"] == pytest.approx(float(np.linalg.norm(m.astype(np.float64))), rel=1e-6)


def test_json_fields_keep_one_type(seed_file, tmp_path, capsys):
    """A field is always of one type, or null, whichever kind of file it describes."""
    foxc = write_checkpoint(tmp_path / "f.foxc", 1, {"dqn_w": np.zeros((2, 2), np.float32),
                                                     "adam_dqn_w": AdamState(np.ones(4, np.float32),
                                                                             np.ones(4, np.float32), 1, 1e-3,
                                                                             0.9, 0.999, 1e-8, 0.0)},
                            {"config": {"a": 1}, "data": {"source": "x"}})
    records = [json.loads(run(capsys, p, "--json")[1]) for p in (seed_file, foxc)]
    assert records[0].keys() == records[1].keys()

    def kinds(values):
        return {type(v).__name__ for v in values if v is not None}

    for key in records[0]:
        assert len(kinds(r[key] for r in records)) <= 1, key
    rows = [row for r in records for row in r["section_table"]]
    for key in {k for row in rows for k in row}:
        assert len(kinds(row.get(key) for row in rows)) <= 1, key
    adam = [row for r in records for row in r["adamw"]]
    for key in adam[0]:
        assert len(kinds(row[key] for row in adam)) == 1, key


def test_inspector_isv(seed_file, capsys):
    code, out, _ = run(capsys, seed_file, "--isv")
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["index", "slot", "value", "about"]
    assert lines[2].split() == ["0", "slot_0", "0"] and lines[2 + 5].split() == ["5", "slot_5", "7"]
    assert lines[2 + 400].split()[:3] == ["400", "RL_GAMMA_INDEX", "0.99"] and "discount" in lines[2 + 400]
    assert lines[2 + 587].split()[:3] == ["587", "RL_STOP_LOSS_THRESHOLD_INDEX", "2"]
    assert "note: no 'meta' section" in out
    values = json.loads(run(capsys, seed_file, "--isv", "--json")[1])["isv"]
    assert len(values) == ISV_SLOTS and values["RL_LR_Q_INDEX"] == pytest.approx(3e-4)


def test_inspector_section(seed_file, capsys):
    code, out, _ = run(capsys, seed_file, "--section", "adam_dqn_b")
    assert code == 0 and "adamw [231]" in out and "step 4999" in out and "computed: no meta" in out
    assert out.splitlines()[-1].startswith("note: ")  # what cannot be verified, after the values too
    record = json.loads(run(capsys, seed_file, "--section", "dqn_w", "--json")[1])
    assert record["shape"] == [128, 231] and len(record["values"]) == 128


def test_inspector_diff_seed_against_foxc(seed_file, seed, tmp_path, capsys):
    code, out, _ = run(capsys, seed_file, "--diff", seed_file)
    assert code == 0 and out.splitlines()[-1] == "identical"
    dqn_b = seed[1]["dqn_b"]
    foxc = write_checkpoint(tmp_path / "f.foxc", 7, {"dqn_b": dqn_b + np.float32(0.5),
                                                     "policy_w": np.zeros(3, np.float32)}, {"config": {"a": 1}})
    code, out, _ = run(capsys, seed_file, "--diff", foxc)
    assert code == 1 and "config unknown:" in out and f"{seed_file} has no meta" in out
    assert f"note: {seed_file}: " in out
    record = json.loads(run(capsys, foxc, "--diff", seed_file, "--json")[1])
    rows = {row["name"]: row for row in record["sections"]}
    assert rows["dqn_b"]["max_abs_diff"] == pytest.approx(0.5)
    assert rows["policy_w"]["max_abs_diff"] is None and rows["policy_w"]["note"].startswith("float32 [3] vs")
    assert rows["dqn_w"]["note"] == f"only in {seed_file}" and record["steps"] == [7, STEP]


def test_inspector_tool_wrapper(seed_file):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "ckpt_inspect.py"), str(seed_file), "--verify"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("valid:") and "note:" in done.stdout


# ---------------------------------------------------------------------------- resume is refused

def test_reads_for_resume_are_refused(seed_file, seed):
    for expected in ({}, {"dqn_w": (np.float32, (128, 231))}):
        with pytest.raises(CheckpointError) as info:
            read_checkpoint(seed_file, expected)
        assert str(info.value) == (f"{seed_file}: written without a 'meta' section (the Rust trainer's layout?): "
                                   "foxc can inspect it (foxc-ckpt-inspect) but cannot resume from it — its "
                                   "configuration and data are unknown")


def test_train_resume_from_a_seed_file_is_one_line(seed_file, tmp_path):
    out = tmp_path / "run"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "foxc.train", "--backend", "reference", "--resume-from",
                           str(seed_file), "--out", str(out)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=240)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("foxc.train: error: --resume-from ")
    assert str(seed_file) in lines[0] and "without a 'meta' section" in lines[0] and "cannot resume" in lines[0]
    assert not out.exists()
