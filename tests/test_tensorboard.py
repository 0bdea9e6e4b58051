"""`python -m foxc.train --tensorboard`: the event files hold every metrics record's fields."""
import json
import struct

import pytest

from foxc import train
from foxc.trainer import metrics as tensorboard

SMALL = ["--backend", "reference", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
         "--synthetic-rows", "20000", "--log-every", "4", "--eval-rows", "2000", "--n-steps", "8"]


def scalars(folder) -> dict[str, dict[int, float]]:
    """tag -> {step: value} from the TFRecord event files in `folder` (length, crc, Event, crc)."""
    from tensorboardX.proto import event_pb2
    out: dict[str, dict[int, float]] = {}
    for path in sorted(folder.glob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (n,) = struct.unpack("<Q", data[at:at + 8])
            event = event_pb2.Event.FromString(data[at + 12:at + 12 + n])
            at += 12 + n + 4
            for value in event.summary.value:
                out.setdefault(value.tag, {})[event.step] = value.simple_value
    return out


def test_every_record_field_reaches_tensorboard(tmp_path, capsys):
    pytest.importorskip("tensorboardX")
    out = tmp_path / "run"
    assert train.main([*SMALL, "--out", str(out), "--tensorboard", "--set", "lr_q=3e-4"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    got = scalars(out / "tensorboard")
    assert [r["step"] for r in records] == [4, 8]
    for record in records:
        for key, value in record.items():
            if key == "step" or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            tag = f"eval/{key[5:]}" if key.startswith("eval_") else f"train/{key}"
            assert got[tag][record["step"]] == pytest.approx(value, rel=1e-6, abs=1e-30), tag
    assert "eval/pnl" in got and 8 in got["eval/pnl"]  # the final greedy evaluation
    assert got["isv/lr_q"][8] == pytest.approx(3e-4) and "isv/entropy_coef" not in got  # unused slots left out
    assert "ETA" in capsys.readouterr().out  # the progress line of the first record


def test_tensorboard_without_tensorboardx_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tensorboard, "_writer_class", lambda: None)
    assert train.main([*SMALL, "--out", str(tmp_path / "run"), "--tensorboard"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "pip install 'foxc[tensorboard]'" in err
    assert not (tmp_path / "run").exists()


def test_a_resumed_run_purges_the_events_a_stopped_run_logged_past_its_checkpoint(tmp_path, monkeypatch):
    made = []

    class Writer:  # tensorboardX's SummaryWriter, as far as the run uses it
        def __init__(self, logdir, purge_step=None):
            made.append(purge_step)

        def add_scalar(self, *args):
            pass

        flush = close = lambda self: None
    monkeypatch.setattr(tensorboard, "_writer_class", lambda: Writer)
    run = tmp_path / "run"
    assert train.main([*SMALL, "--out", str(run), "--tensorboard", "--checkpoint-every", "4"]) == 0
    (run / "checkpoint-8.foxc").unlink()  # stopped after logging step 8, before its checkpoint
    assert train.main(["--resume-from", str(run / "checkpoint-4.foxc"), "--n-steps", "4", "--tensorboard"]) == 0
    assert made == [None, 5], "a resumed run must hide the events of steps after its checkpoint (and only those)"
