"""Live ISV changes (`python -m foxc.isv set RUN_DIR NAME=VALUE`) on the reference backend."""
import json
import os
import socket

import numpy as np
import pytest

from foxc.isv.__main__ import main as isv_main
from foxc.errors import UserError
from foxc.isv.live import MARKER, REQUESTS, LiveRequests, request
from foxc.trainer.metrics import MetricsLog
from test_jsonfile import ABSURD, IDS
from trainer_cases import assert_same_state, config, market, state, trainer

DATA = market()
STEPS, AT = 14, 6  # the change takes effect from step AT + 1
NEW_LR = 7e-4


def run_dir(tmp_path, name="run"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text("{}\n")
    return d


def live_run(rt, out, cfg, settings, metrics=None):
    """AT steps, a request written between steps, then the rest; the request is picked up at once."""
    t = trainer(rt, cfg, DATA, out)
    t.train(AT, metrics)
    request(out, settings)
    t.live.next_poll = 0.0  # due now, not in POLL_S: the test fixes the step the change lands on
    t.train(STEPS - AT, metrics)
    return t


def test_a_live_change_equals_a_resume_with_the_same_setting(ref_rt, tmp_path):
    """Bit-identical: a live lr_q change at step AT + 1, and a run checkpointed at AT then resumed with
    the same --set (the resume path sets it on the restored bus); the unchanged run differs."""
    cfg = config(graph="on")
    live = live_run(ref_rt, run_dir(tmp_path, "live"), cfg, [("lr_q", NEW_LR)])
    assert live.ts.isv["lr_q"] == pytest.approx(NEW_LR)

    first = trainer(ref_rt, cfg, DATA, run_dir(tmp_path, "first"))
    first.train(AT)
    path = first.save()
    resumed = trainer(ref_rt, cfg, DATA, run_dir(tmp_path, "resumed"))
    resumed.resume(path)
    resumed.set_isv([("lr_q", NEW_LR)])
    resumed.train(STEPS - AT)
    assert_same_state(state(live), state(resumed))

    plain = trainer(ref_rt, cfg, DATA)
    plain.train(STEPS)
    assert not np.array_equal(state(plain)["dqn_w"], state(live)["dqn_w"]), "the change changed nothing"


def test_the_change_is_recorded_at_its_step_and_never_applied_twice(ref_rt, tmp_path):
    out = run_dir(tmp_path)
    metrics = MetricsLog(out / "metrics.jsonl", STEPS)
    t = live_run(ref_rt, out, config(), [("lr_q", NEW_LR), ("gamma", 0.98)], metrics)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    changed = [r for r in records if "isv_changes" in r]
    assert len(changed) == 1 and changed[0]["step"] == 10  # log_every 5: the record of steps 6..10
    assert [(c["name"], c["step"]) for c in changed[0]["isv_changes"]] == [("lr_q", AT + 1), ("gamma", AT + 1)]
    applied = list((out / REQUESTS / "applied").iterdir())
    assert len(applied) == 1 and not list((out / REQUESTS).glob("*.json"))
    t.live.next_poll = 0.0
    assert t.apply_live_requests() == []  # nothing left to apply


def test_a_request_the_run_cannot_take_is_rejected_and_changes_nothing(ref_rt, tmp_path, capsys):
    out = run_dir(tmp_path)
    t = trainer(ref_rt, config(n_step=2), DATA, out)
    t.train(2)
    request(out, [("n_step", 3)])  # a valid slot value, but above this run's n-step rings
    t.live.next_poll = 0.0
    t.train(2)
    assert t.ts.isv["n_step"] == 2
    assert len(list((out / REQUESTS / "rejected").iterdir())) == 1
    err = capsys.readouterr().err  # not the start of a run's "(give --n-step 3 too)": a running trainer cannot
    assert ("not applied: ISV n_step = 3 is above --n-step 2, the length of the n-step rings, fixed for the run: a "
            "running trainer cannot take it, nor can a resume (it keeps the checkpoint's --n-step); set n_step to at "
            "most 2, or start a new run with --n-step 3 (now ") in err


@pytest.mark.parametrize("settings, match", [
    ([("lr_qq", 1e-3)], "no ISV slot named 'lr_qq'"),
    ([("popart_mean", 0.0)], "state the trainer owns"),
    ([("gamma", 1.5)], "gamma: must be"),
    ([("lr_q", float("nan"))], "finite"),
])
def test_bad_requests_are_refused_naming_the_slot(tmp_path, settings, match):
    out = run_dir(tmp_path)
    LiveRequests(out)  # as a running trainer marks its directory
    with pytest.raises(UserError, match=match):
        request(out, settings)
    assert [p.name for p in (out / REQUESTS).iterdir()] == [MARKER]


def test_the_cli_refuses_a_directory_without_a_live_trainer(tmp_path, capsys):
    assert isv_main(["set", str(tmp_path), "lr_q=1e-3"]) == 2
    assert "not a training run directory" in capsys.readouterr().err
    done = run_dir(tmp_path, "done")
    LiveRequests(done).close()  # a trainer that ended
    assert isv_main(["set", str(done), "lr_q=1e-3"]) == 2
    assert "no trainer is running there" in capsys.readouterr().err
    crashed = run_dir(tmp_path, "crashed")
    (crashed / REQUESTS).mkdir()
    (crashed / REQUESTS / MARKER).write_text(json.dumps({"host": socket.gethostname(), "pid": 2**22 + 12345}))
    assert isv_main(["set", str(crashed), "lr_q=1e-3"]) == 2  # its marker names a process that is gone
    for damaged in ("", '{"host": "x', "[1]", "null"):  # cut short or edited: no trainer it names runs
        (crashed / REQUESTS / MARKER).write_text(damaged)
        assert isv_main(["set", str(crashed), "lr_q=1e-3"]) == 2
        assert "no trainer is running there" in capsys.readouterr().err
    (crashed / REQUESTS / MARKER).write_text(json.dumps({"host": socket.gethostname(), "pid": 10**30}))
    assert isv_main(["set", str(crashed), "lr_q=1e-3"]) == 0, "a pid too large to ask about: assumed to run"
    live = run_dir(tmp_path, "live")
    LiveRequests(live)
    assert isv_main(["set", str(live), "lr_q=1e-3"]) == 0
    (written,) = (live / REQUESTS).glob("*.json")
    assert json.loads(written.read_text()) == {"set": [["lr_q", 0.001]]}


def test_a_request_from_before_the_trainer_started_is_not_applied(ref_rt, tmp_path):
    out = run_dir(tmp_path)
    LiveRequests(out).close()
    (out / REQUESTS).mkdir()
    (out / REQUESTS / MARKER).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    request(out, [("lr_q", NEW_LR)])  # accepted by a marker left behind, for the run that left it
    t = trainer(ref_rt, config(), DATA, out)
    t.train(3)
    assert t.ts.isv["lr_q"] != pytest.approx(NEW_LR)
    assert len(list((out / REQUESTS / "rejected").iterdir())) == 1


@pytest.mark.parametrize("raw, problem", ABSURD + [
    (b'{"set": [["lr_q", %s]]}' % (b"9" * 400), "set[0][1] is an integer of 400 digits, not of type float"),
    (b'{"set": [["lr_q"]]}', "set[0] is a list of 1, not of type tuple[str, float]"),
    (b'{"set": [["lr_q", true]]}', "set[0][1] is true, not of type float"),
    (b'{"set": {"lr_q": 1}}', "set is an object, not of type list[tuple[str, float]]"),
    (b'{"sets": []}', "no 'set'"),
], ids=IDS + ["past-a-float", "no-value", "bool", "object", "no-set"])
def test_an_absurd_request_is_rejected_naming_why_not_a_crash(tmp_path, raw, problem):
    """A request nested deeper than the parser recurses, or of a value past a float's range (a 400-digit integer),
    stopped the trainer with a RecursionError or OverflowError traceback; it is an unreadable request, rejected
    with a warning as any other."""
    out = run_dir(tmp_path)
    live = LiveRequests(out)
    (out / REQUESTS / "00000000000000000001-1.json").write_bytes(raw)
    (path, settings, said), = live.pending()
    assert path.name == "00000000000000000001-1.json" and settings is None
    assert said == f"unreadable request: {problem}"


@pytest.mark.parametrize("raw", [raw for raw, _ in ABSURD] + [b'{"host": "%s", "pid": Infinity}'
                                                              % socket.gethostname().encode()],
                         ids=IDS + ["infinite-pid"])
def test_an_absurd_marker_is_no_trainer_not_a_traceback(tmp_path, capsys, raw):
    """`foxc.isv set` on a marker nested deeper than the parser recurses ended in a RecursionError traceback, and
    on a pid of Infinity in an OverflowError one."""
    out = run_dir(tmp_path)
    (out / REQUESTS).mkdir()
    (out / REQUESTS / MARKER).write_bytes(raw)
    code = isv_main(["set", str(out), "lr_q=1e-3"])
    err = capsys.readouterr().err
    if raw.startswith(b'{"host"'):  # a marker of no pid it can ask about: assumed to run, as a pid of 10**30
        assert code == 0 and err == ""
    else:
        assert code == 2 and "no trainer is running there" in err and len(err.splitlines()) == 1
