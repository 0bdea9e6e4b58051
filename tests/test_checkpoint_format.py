"""FOXC v1: byte layout, round trips, and the reader's refusal of every malformed file."""
import hashlib
import re
import struct

import msgpack
import numpy as np
import pytest

from checkpoint_helpers import (container, encoded_bytes, meta_doc, meta_entry, packed, refused, reseal, sample_state,
                                section_header, split_sections)
from foxc.checkpoint import (AdamState, CheckpointError, config_differences, encode_checkpoint, expected_from,
                             parse_checkpoint, read_checkpoint, unpack_adamw, write_checkpoint)
from foxc.checkpoint import seed_layout
from foxc.checkpoint.adamw import adamw_chunks
from foxc.checkpoint.meta import SECTION_DTYPES
from foxc.isv.registry import N_SLOTS, SLOTS


def same(a, b) -> bool:
    if isinstance(a, AdamState):
        return (a.settings == b.settings and a.m.tobytes() == b.m.tobytes() and a.v.tobytes() == b.v.tobytes())
    if isinstance(a, bytes):
        return a == b
    a = np.asarray(a)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------- layout and round trips

def test_byte_layout_matches_the_spec(rng):
    state = sample_state(rng)
    data = encoded_bytes(123456789012, state, {"config": {"batch": 8}})
    magic, version, step, count = struct.unpack_from("<IIQI", data, 0)
    assert (magic, version, step, count) == (0x464F5843, 1, 123456789012, len(state) + 2)
    assert data[:4] == b"CXOF"
    _, sections = split_sections(data)
    names = [name for name, _ in sections]
    assert names == ["meta", *state, "checksum"]
    body = dict(sections)
    assert body["dqn_w"] == state["dqn_w"].astype("<f4").tobytes()
    assert body["replay_head"] == struct.pack("<2q", 5, 9)
    assert body["blob"] == state["blob"]
    meta = msgpack.unpackb(body["meta"])
    assert meta["step"] == 123456789012 and meta["config"] == {"batch": 8}
    assert meta["isv_slots"] == [s.name for s in SLOTS]
    for name, value in state.items():
        assert meta["sections"][name]["sha256"] == hashlib.sha256(body[name]).hexdigest()
    assert meta["sections"]["dqn_w"] == {"dtype": "<f4", "shape": [4, 6], "sha256": meta["sections"]["dqn_w"]["sha256"]}
    assert meta["sections"]["adam_dqn_w"]["dtype"] == "adamw" and meta["sections"]["adam_dqn_w"]["shape"] == [24]
    assert container(sections[:-1], step=step) == data, "the checksum is the sha256 chain the spec describes"


def test_adamw_wire_format_is_byte_exact(rng):
    m, v = rng.standard_normal(5).astype(np.float32), rng.random(5, dtype=np.float32)
    state = AdamState(m, v, -3, 1e-3, 0.9, 0.999, 1e-8, 0.01)
    wire = b"".join(bytes(chunk) for chunk in adamw_chunks(state))
    assert wire == (struct.pack("<Qi5f", 5, -3, 1e-3, 0.9, 0.999, 1e-8, 0.01) + m.tobytes() + v.tobytes())
    back = unpack_adamw(wire)
    assert same(state, back) and back.lr == float(np.float32(1e-3)) and back.step == -3
    assert b"".join(bytes(chunk) for chunk in adamw_chunks(back)) == wire


@pytest.mark.parametrize("data, fragment", [
    (b"", "shorter than its 32-byte head"),
    (struct.pack("<Qi5f", 2, 0, 0, 0, 0, 0, 0) + b"\0" * 15, "n = 2"),
    (struct.pack("<Qi5f", 2**63, 0, 0, 0, 0, 0, 0) + b"\0" * 16, "n = 9223372036854775808"),
    (struct.pack("<Qi5f", 0, 0, 0, 0, 0, 0, 0) + b"\0" * 8, "n = 0"),
])
def test_adamw_unpack_refuses_bad_lengths(data, fragment):
    with pytest.raises(CheckpointError, match=fragment):
        unpack_adamw(data, "adam_x", 100)


def test_adamw_state_validates_its_fields():
    """An AdamState foxc builds wrongly is its own misuse: an assertion naming the field."""
    good = np.zeros(3, np.float32)
    with pytest.raises(AssertionError, match="float32"):
        AdamState(np.zeros(3), good, 0, 0, 0, 0, 0, 0)
    with pytest.raises(AssertionError, match=r"one length, got float32 \(3,\), \(4,\)"):
        AdamState(good, np.zeros(4, np.float32), 0, 0, 0, 0, 0, 0)
    with pytest.raises(AssertionError, match="i32"):
        AdamState(good, good, 2**31, 0, 0, 0, 0, 0)
    # a fractional step was cut (1.5 saved as 1), NaN and a string failed with int()'s and float()'s own words
    for step in (1.5, float("nan"), "3", None):
        with pytest.raises(AssertionError, match=f"AdamState.step: not a whole i32, {re.escape(repr(step))}"):
            AdamState(good, good, step, 0, 0, 0, 0, 0)
    with pytest.raises(AssertionError, match="AdamState.lr: 'a'"):
        AdamState(good, good, 1, "a", 0, 0, 0, 0)
    assert AdamState(good, good, np.int32(7), np.float32(1e-3), 0.9, 0.999, 1e-8, 0).step == 7


SHAPES = [(), (0,), (7,), (3, 4, 5), (2, 0, 3), (1, 1, 1, 1, 2)]


@pytest.mark.parametrize("dtype", sorted(SECTION_DTYPES))
def test_round_trip_every_dtype_and_shape(dtype, rng):
    dt = np.dtype(dtype)
    state = {}
    for i, shape in enumerate(SHAPES):
        raw = rng.integers(0, 256, int(np.prod(shape)) * dt.itemsize, dtype=np.uint8)
        array = raw.view(dt).reshape(shape) if dt.kind != "b" else (raw > 127).reshape(shape)
        state[f"s{i}"] = array
    ckpt = parse_checkpoint(encoded_bytes(3, state))
    assert ckpt.step == 3 and list(ckpt.sections) == list(state) and ckpt.skipped == []
    for name, value in state.items():
        assert same(value, ckpt[name]), name
        assert ckpt[name].flags.c_contiguous and ckpt[name].flags.aligned and ckpt[name].flags.writeable


def test_round_trip_all_kinds_through_a_file(tmp_path, rng):
    state = sample_state(rng)
    meta = {"config": {"batch": 8, "lr": (1e-3, 2e-3), "name": "run"}, "data": {"source": "a.parquet",
            "sha256": "00" * 32}, "note": np.float32(0.5)}
    path = write_checkpoint(tmp_path / "c.foxc", 42, state, meta)
    ckpt = read_checkpoint(path, expected_from(state))
    assert ckpt.step == 42 and ckpt.skipped == []
    for name, value in state.items():
        assert same(value, ckpt[name]), name
    assert ckpt.config == {"batch": 8, "lr": [1e-3, 2e-3], "name": "run"}
    assert ckpt.meta["data"]["source"] == "a.parquet" and ckpt.meta["note"] == 0.5
    assert ckpt.isv()["gamma"] == pytest.approx(0.99)
    assert ckpt.size == path.stat().st_size


def test_empty_checkpoint_and_empty_sections(rng):
    ckpt = parse_checkpoint(encoded_bytes(0, {}))
    assert ckpt.sections == {} and ckpt.step == 0
    ckpt = parse_checkpoint(encoded_bytes(2**64 - 1, {"e": np.zeros(0, np.float32), "b": b""}))
    assert ckpt.step == 2**64 - 1 and ckpt["e"].shape == (0,) and ckpt["b"] == b""


def test_large_section_round_trip(tmp_path, rng):
    big = rng.standard_normal((1 << 22,)).astype(np.float32)  # 16 MiB
    path = write_checkpoint(tmp_path / "big.foxc", 1, {"replay": big})
    assert np.array_equal(read_checkpoint(path)["replay"], big)


def test_writer_normalises_layout_and_byte_order(rng):
    base = rng.standard_normal((6, 5))
    state = {"be": base.astype(">f8"), "strided": base.astype(np.float32)[::2, ::-1], "f": np.asfortranarray(base)}
    ckpt = parse_checkpoint(encoded_bytes(1, state))
    assert ckpt["be"].dtype == np.float64 and np.array_equal(ckpt["be"], base)
    assert np.array_equal(ckpt["strided"], state["strided"]) and np.array_equal(ckpt["f"], base)


def test_encoding_is_deterministic(rng):
    state = sample_state(rng)
    assert encoded_bytes(9, state, {"config": {"a": 1}}) == encoded_bytes(9, state, {"config": {"a": 1}})


@pytest.mark.parametrize("state, meta, error, fragment", [
    ({"meta": np.zeros(1, np.float32)}, None, ValueError, "reserved"),
    ({"checksum": b""}, None, ValueError, "reserved"),
    ({"": b""}, None, ValueError, "1..1024"),
    ({"x" * 1025: b""}, None, ValueError, "1..1024"),
    ({1: b""}, None, TypeError, "str"),
    ({"c": np.zeros(2, np.complex64)}, None, ValueError, "cannot be stored"),
    ({"o": np.array([None])}, None, ValueError, "cannot be stored"),
    ({"l": [1.0, 2.0]}, None, TypeError, "not list"),
    ({"isv": np.zeros(3, np.float32)}, None, ValueError, "isv"),
    ({}, {"step": 3}, ValueError, "filled in by the writer"),
    ({}, {"config": [1]}, ValueError, "config"),
    ({}, {"data": "file.parquet"}, ValueError, "data"),
    ({}, {"thing": object()}, TypeError, "meta cannot hold"),
])
def test_writer_refuses_bad_input(state, meta, error, fragment):
    with pytest.raises(error, match=fragment):
        encode_checkpoint(1, state, meta)


def test_writer_refuses_bad_step():
    for step in (-1, 2**64, 1.5):
        with pytest.raises(ValueError, match="step"):
            encode_checkpoint(step, {})


# ---------------------------------------------------------------------------- the hostile reader: framing

def test_bad_magic():
    error = refused(container([], magic=0x46584F43), "bad magic 0x46584f43", "at byte 0")
    assert error.offset == 0


def test_unknown_version():
    assert refused(container([], version=2), "unsupported version 2").offset == 4


def test_every_short_file(rng):
    data = encoded_bytes(5, sample_state(rng))
    for length in range(len(data)):
        with pytest.raises(CheckpointError):
            parse_checkpoint(data[:length])
    refused(b"", "short file: 0 bytes")
    refused(data[:19], "short file: 19 bytes")


def test_name_len_over_1024():
    data = struct.pack("<IIQI", 0x464F5843, 1, 1, 1) + struct.pack("<H", 1025) + b"a" * 1025 + struct.pack("<Q", 0)
    error = refused(data, "name_len 1025", "section '#0'", "at byte 20")
    assert error.section == "#0" and error.offset == 20


def test_empty_name():
    refused(struct.pack("<IIQI", 0x464F5843, 1, 1, 1) + section_header(b"", 0), "name_len 0")


def test_data_len_past_the_end():
    data = struct.pack("<IIQI", 0x464F5843, 1, 1, 1) + section_header(b"w", 100) + b"\0" * 99
    error = refused(data, "data_len 100 runs past the end", "99 bytes remain", "section 'w'")
    assert error.offset == 20 + 2 + 1


def test_absurd_data_len_allocates_nothing():
    data = struct.pack("<IIQI", 0x464F5843, 1, 1, 1) + section_header(b"w", 2**64 - 1) + b"\0" * 8
    refused(data, f"data_len {2**64 - 1}")


def test_absurd_section_count():
    refused(struct.pack("<IIQI", 0x464F5843, 1, 1, 2**32 - 1) + b"\0" * 30, "n_sections 4294967295", "at byte 16")


def test_duplicate_names():
    data = container([("meta", packed(meta_doc())), ("w", b"1234"), ("w", b"5678")])
    error = refused(data, "duplicate section name", "section 'w'", "first at byte")
    assert error.section == "w"


def test_trailing_bytes(rng):
    data = encoded_bytes(1, sample_state(rng))
    error = refused(data + b"\0", "1 trailing bytes")
    assert error.offset == len(data)


def test_non_utf8_name():
    data = container([("meta", packed(meta_doc())), (b"w\xff\xfe", b"")])
    refused(data, "not valid UTF-8", "section '#1'")


# ---------------------------------------------------------------------------- the hostile reader: content

def test_flipped_data_names_the_section(rng):
    state = sample_state(rng)
    data = bytearray(encoded_bytes(1, state))
    _, sections = split_sections(bytes(data))
    offset = bytes(data).index(state["dqn_b"].tobytes())
    data[offset] ^= 0x40
    error = refused(bytes(data), "sha256 mismatch", "section 'dqn_b'")
    assert error.section == "dqn_b" and error.offset is not None


def test_flipped_step_in_the_header(rng):
    data = bytearray(encoded_bytes(1, sample_state(rng)))
    data[8] ^= 1
    refused(bytes(data), "step 1 disagrees with the header's step 0")


def test_altered_meta_that_still_decodes(rng):
    data = encoded_bytes(1, sample_state(rng), {"config": {"batch": 8}})
    altered = data.replace(packed({"batch": 8}), packed({"batch": 9}))
    assert altered != data
    refused(altered, "file checksum mismatch", "section 'checksum'")


def test_renamed_section(rng):
    data = encoded_bytes(1, sample_state(rng))
    renamed = data.replace(section_header(b"dqn_b", 16), section_header(b"dqn_c", 16))
    refused(renamed, "describes section 'dqn_b', which the file lacks")


def test_missing_meta_is_refused_and_read_by_the_inspector_only():
    """A sealed file without a meta (seed_layout): the reader refuses it in any use; the inspector's reader shows
    it, its checksum verified."""
    for expected in (None, {}, {"w": (np.float32, (1,))}):
        refused(container([("w", b"1234")]), "without a 'meta' section", "cannot resume", expected=expected)
    ckpt = seed_layout.parse(container([("w", b"1234")]))
    assert not ckpt.has_meta and ckpt.sealed and ckpt["w"].dtype == np.float32 and ckpt.n_sections == 2
    assert any("no 'meta' section" in note for note in ckpt.notes)
    assert any("'checksum' verified" in note for note in ckpt.notes)
    damaged = bytearray(container([("w", b"1234")]))
    damaged[20 + 11] ^= 1  # the first byte of the data of w
    with pytest.raises(CheckpointError, match="section 'checksum' at byte 35: file checksum mismatch: the file was "
                                              "altered or damaged"):
        seed_layout.parse(bytes(damaged))


def test_missing_checksum_reads_with_a_note():
    ckpt = parse_checkpoint(container([("meta", packed(meta_doc()))], seal=False))
    assert ckpt.has_meta and not ckpt.sealed and ckpt.n_sections == 1
    assert len(ckpt.notes) == 1 and "no 'checksum' section" in ckpt.notes[0] and "not sealed" in ckpt.notes[0]


def test_without_a_checksum_an_undescribed_section_is_refused():
    """A damaged checksum name must not leave a file that reads: nothing vouches for the section."""
    weights = np.arange(4, dtype=np.float32).tobytes()
    doc = meta_doc(sections={"w": meta_entry("<f4", [4], weights)})
    data = container([("meta", packed(doc)), ("w", weights), ("checksuN", b"\0" * 32)], seal=False)
    refused(data, "does not describe this section", "section 'checksuN'")


def test_checksum_not_last():
    data = container([("meta", packed(meta_doc())), ("checksum", b"\0" * 32), ("w", b"")], seal=False)
    refused(data, "must be the last section", "section 'checksum'")


def test_checksum_of_the_wrong_size():
    data = container([("meta", packed(meta_doc())), ("checksum", b"\0" * 31)], seal=False)
    refused(data, "holds 31 bytes", "section 'checksum'")


@pytest.mark.parametrize("meta_bytes, fragment", [
    (b"\xc1", "not valid msgpack"),
    (packed({"a": 1}) + b"\x00", "not valid msgpack"),
    (b"\xdd\xff\xff\xff\xff", "not valid msgpack"),  # an array claiming 4 billion items
    (packed([1, 2]), "not a map"),
    (packed({1: 2}), "not valid msgpack"),
    (packed({k: v for k, v in meta_doc().items() if k != "sections"}), "no 'sections'"),
    (packed({**meta_doc(), "step": "1"}), 'step is "1", not of type int'),
    (packed({**meta_doc(), "step": True}), "step is true, not of type int"),
    (packed({**meta_doc(), "isv_slots": [1, 2]}), "isv_slots[0] is 1, not of type str"),
    (packed({**meta_doc(), "data": 5}), "data is 5, not of type dict | None"),
    (packed(meta_doc(step=2)), "step 2 disagrees"),
])
def test_corrupt_meta(meta_bytes, fragment):
    error = refused(container([("meta", meta_bytes)]), fragment)
    assert error.section == "meta" and error.offset is not None


@pytest.mark.parametrize("entry, fragment", [
    ({"dtype": "<f4", "shape": [2]}, "its meta entry: no 'sha256'"),
    ({"dtype": "O", "shape": [1]}, 'dtype is "O", not one of "<f2", "<f4"'),
    ({"dtype": "<c8", "shape": [1]}, 'dtype is "<c8", not one of'),
    ({"dtype": "<f4", "shape": [-1]}, "shape[0] is -1, not an integer from 0"),
    ({"dtype": "<f4", "shape": [True]}, "shape[0] is true, not an integer from 0"),
    ({"dtype": "<f4", "shape": [1] * 33}, "at most 32"),
    ({"dtype": "<f4", "shape": [2**62, 2**62]}, "holds 16 bytes but its meta says <f4"),
    ({"dtype": "<f4", "shape": [3]}, "holds 16 bytes but its meta says <f4 [3] (12 bytes)"),
    ({"dtype": "<f8", "shape": [4]}, "(32 bytes)"),
    ({"dtype": "adamw", "shape": [2, 1]}, "one dimension"),
    ({"dtype": "bytes", "shape": [15]}, "(15 bytes)"),
])
def test_meta_entry_that_disagrees_with_the_data(entry, fragment):
    data = b"\0" * 16
    if "sha256" not in fragment:
        entry = {**entry, "sha256": hashlib.sha256(data).hexdigest()}
    doc = meta_doc(sections={"w": entry})
    error = refused(container([("meta", packed(doc)), ("w", data)]), fragment, "section 'w'")
    assert error.offset == 20 + len(section_header(b"meta", 0)) + len(packed(doc))


def test_meta_sha256_must_be_hex():
    doc = meta_doc(sections={"w": {"dtype": "<f4", "shape": [1], "sha256": "Z" * 64}})
    refused(container([("meta", packed(doc)), ("w", b"\0" * 4)]), 'sha256 is "ZZZ',
            "not a string matching [0-9a-f]{64}")


@pytest.mark.parametrize("name", ["meta", "checksum"])
def test_meta_cannot_describe_reserved_sections(name):
    doc = meta_doc(sections={name: {"dtype": "bytes", "shape": [1], "sha256": "0" * 64}})
    refused(container([("meta", packed(doc))]), "reserved", f"section '{name}'")


def test_isv_length_must_match_the_slot_names():
    isv = np.zeros(N_SLOTS + 1, np.float32).tobytes()
    doc = meta_doc(sections={"isv": meta_entry("<f4", [N_SLOTS + 1], isv)})
    refused(container([("meta", packed(doc)), ("isv", isv)]), f"there are {N_SLOTS} ISV slot names", "section 'isv'")


def test_unknown_sections_are_skipped_and_listed():
    weights = np.arange(4, dtype=np.float32).tobytes()
    doc = meta_doc(sections={"w": meta_entry("<f4", [4], weights)})
    data = container([("meta", packed(doc)), ("future_thing", b"\x01\x02"), ("w", weights)])
    ckpt = parse_checkpoint(data)
    assert list(ckpt.sections) == ["w"] and ckpt.skipped == ["future_thing"]
    assert np.array_equal(ckpt["w"], np.arange(4, dtype=np.float32))


def test_expected_shapes(rng):
    state = sample_state(rng)
    data = encoded_bytes(1, state)
    expected = expected_from(state)
    ckpt = parse_checkpoint(data, {"dqn_w": expected["dqn_w"], "adam_dqn_w": ("adamw", (24,))})
    assert list(ckpt.sections) == ["dqn_w", "adam_dqn_w"]
    assert set(ckpt.skipped) == set(state) - {"dqn_w", "adam_dqn_w"}
    assert parse_checkpoint(data, {"dqn_w": (np.float32, None)})["dqn_w"].shape == (4, 6)
    error = refused(data, "the file holds <f4 [4, 6], the model expects <f4 [4, 7]",
                    expected={"dqn_w": (np.float32, (4, 7))})
    assert error.section == "dqn_w" and error.offset is not None
    refused(data, "the model expects <f8 [4, 6]", expected={"dqn_w": (np.float64, (4, 6))})
    refused(data, "the model expects adamw [25]", expected={"adam_dqn_w": ("adamw", (25,))})
    refused(data, "the model needs this section", "section 'policy_w'", expected={"policy_w": (np.float32, (3,))})


def test_read_errors_are_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="cannot read"):
        read_checkpoint(tmp_path / "missing.foxc")
    with pytest.raises(CheckpointError, match="a directory, not a checkpoint file"):
        read_checkpoint(tmp_path)
    (tmp_path / "empty.foxc").write_bytes(b"")
    with pytest.raises(CheckpointError, match="short file: 0 bytes"):
        read_checkpoint(tmp_path / "empty.foxc")


def test_resealed_file_still_checks_sizes(rng):
    """An adversary who recomputes the checksum still meets the meta's sizes and digests."""
    state = sample_state(rng)
    step, sections = split_sections(encoded_bytes(1, state))
    sections = [(n, d[:-4] if n == "dqn_b" else d) for n, d in sections[:-1]]
    refused(container(sections, step=step), "section 'dqn_b'", "holds 12 bytes")
    assert reseal(encoded_bytes(1, state)) == encoded_bytes(1, state)


def test_config_differences():
    saved = {"batch": 1024, "per": {"capacity": 65536, "alpha": 0.6}, "lr": [1, 2], "old": 1}
    current = {"batch": 512, "per": {"capacity": 65536, "alpha": 0.7}, "lr": (1, 2), "new": 2}
    assert config_differences(saved, current) == [
        "batch: 1024 in the checkpoint, 512 now",
        "new: not in the checkpoint, 2 now",
        "old: 1 in the checkpoint, not set now",
        "per.alpha: 0.6 in the checkpoint, 0.7 now",
    ]
    assert config_differences(saved, saved) == []
    assert config_differences(saved, current, sides=("in a.foxc", "in b.foxc"))[:3] == [
        "batch: 1024 in a.foxc, 512 in b.foxc", "new: not in a.foxc, 2 in b.foxc",
        "old: 1 in a.foxc, not set in b.foxc"]


def test_bool_sections_hold_only_zero_and_one():
    data = bytes([0, 1, 2])
    doc = meta_doc(sections={"flags": meta_entry("|b1", [3], data)})
    refused(container([("meta", packed(doc)), ("flags", data)]), "other than 0 and 1", "section 'flags'")
