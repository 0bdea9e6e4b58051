"""Bad inputs to every CLI: one line on stderr naming the culprit, exit status 2, no traceback, nothing changed.

Each case runs a CLI as a subprocess (`--backend reference` where it applies) in a directory of its
own, holding the files the case needs; afterwards the directory must hold exactly the same files with
the same bytes (a refused command overwrites nothing and leaves nothing behind). The cases run side
by side once per module (most fail before any work), each test then checks its own.

foxc-ckpt-inspect exits as diff(1) does: 2 for a file that is not a valid checkpoint or a bad flag
(1 is a negative answer: --verify invalid, --diff differs); its error line has the same form.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

COMMANDS = {  # name: (argv before the case's, the name its error lines start with)
    "train": (["-m", "foxc.train", "--backend", "reference"], "foxc.train"),
    "walkforward": (["-m", "foxc.walkforward", "--backend", "reference"], "foxc.walkforward"),
    "data": (["-m", "foxc.data"], "foxc.data"),
    "bench": (["-m", "foxc.bench"], "foxc.bench"),
    "report": (["-m", "foxc.report"], "foxc.report"),
    "inspect": (["-m", "foxc.checkpoint.inspect_cli"], "foxc-ckpt-inspect"),
    "ckpt_tool": ([str(ROOT / "tools" / "ckpt_inspect.py")], "foxc-ckpt-inspect"),
    "isv": (["-m", "foxc.isv"], "foxc.isv"),
}
DIR = "<dir>"  # a file entry that is a directory
METRICS = b'{"step": 4, "sps": 10.0, "l_q": 1.0}\n{"step": 8, "sps": 11.0, "l_q": 0.9}\n'


@dataclass(frozen=True)
class Case:
    id: str
    cmd: str
    argv: tuple[str, ...]
    names: tuple[str, ...]  # what the error line must name (flag, file or value)
    files: dict = field(default_factory=dict)  # relative path -> bytes, DIR, or a fixture's name
    code: int = 2


def case(id, cmd, argv, *names, files=None, code=2):
    return Case(id, cmd, tuple(argv), names, files or {}, code)


CACHE = {"cache/manifest.json": "cache_manifest", "cache/shards/00000/records.npy": "cache_records",
         "cache/shards/00000/labels.npy": "cache_labels"}  # book.parquet prepared
SMALL = ["--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--synthetic-rows", "20000"]
OUT = ["--out", "{case}/run"]
WF_SMALL = ["--trainer", "baseline", "--synthetic-rows", "20000", "--folds", "1", "--no-plots", "--out", "{case}/wf"]

GLOB = {"d/a.parquet": "parquet_bytes", "d/b.parquet": "parquet_bytes"}  # what an unquoted d/*.parquet gives

CASES = [
    # ---------------------------------------------------------------------------- python -m foxc.train
    case("train-seed-negative", "train", ["--seed", "-1", *OUT], "--seed", "-1"),
    case("train-horizons-not-numbers", "train", ["--horizons", "a,b,c", *OUT], "--horizons", "a,b,c"),
    case("train-horizons-two", "train", ["--horizons", "10,50", *OUT], "--horizons", "(got 10,50)"),
    case("train-horizon-past-200k-rows", "train", ["--horizons", "10,50,100000000", "--n-steps", "1", *OUT],
         "--horizons", "100000000", "191,808"),  # the 200,000 less the validation rows (8,192)
    case("train-horizon-past-data-rows", "train", ["--data", "{parquet}", "--horizons", "10,50,5000", *OUT],
         "--horizons", "5000", "2,160"),  # the 3,000 less the held-out (300) and validation (540) rows
    case("train-holdout-leaves-no-window", "train", ["--data", "{parquet}", "--horizons", "1,2,3", "--eval-every", "1",
                                                      "--holdout", "0.998", *OUT], "--data", "--seq-len 8",
         "--holdout 0.998", "a smaller --holdout"),
    case("train-n-backtests-zero", "train", ["--n-backtests", "0", *OUT], "--n-backtests", "0"),
    case("train-per-capacity-not-pow2", "train", ["--per-capacity", "1000", *OUT], "--per-capacity", "1000"),
    case("train-n-steps-negative", "train", ["--n-steps", "-5", *OUT], "--n-steps", "-5"),
    case("train-n-steps-zero", "train", ["--n-steps", "0", *OUT], "--n-steps", ">= 1", "(got 0)"),
    case("train-val-frac-one", "train", ["--val-frac", "1", *OUT], "--val-frac", "(got 1.0)"),
    case("train-synthetic-unknown", "train", ["--synthetic", "bogus", *OUT], "--synthetic", "bogus"),
    case("train-set-no-value", "train", ["--set", "lr_q", *OUT], "--set", "lr_q"),
    case("train-set-unknown-slot", "train", ["--set", "no_such_slot=1", *OUT], "--set", "no_such_slot"),
    case("train-set-state-slot", "train", ["--set", "popart_var=2", *OUT], "--set popart_var", "state the trainer owns"),
    case("train-set-unused-slot", "train", ["--set", "entropy_coef=0.1", *OUT], "--set entropy_coef", "no kernel"),
    case("train-set-out-of-range", "train", ["--set", "gamma=1", *OUT], "--set gamma", "[0, 0.9999]", "(got 1)"),
    case("train-set-not-finite", "train", ["--set", "lr_q=nan", *OUT], "--set lr_q", "finite", "nan"),
    case("train-set-above-n-step", "train", ["--set", "n_step=5", *OUT], "n_step = 5", "--n-step 3"),
    case("train-synthetic-rows-beside-data", "train", ["--data", "{parquet}", "--synthetic-rows", "5000", *OUT],
         "--synthetic-rows 5000", "--data"),
    case("train-gate-at-odds-with-its-slot", "train", ["--gate", "on", "--set", "gate_enabled=0", *OUT],
         "ISV gate_enabled = 0", "--gate on"),
    case("train-config-missing", "train", ["--config", "{case}/none.toml", *OUT], "--config", "none.toml"),
    case("train-config-syntax", "train", ["--config", "{case}/bad.toml", *OUT], "--config", "bad.toml", "line 2",
         files={"bad.toml": b"n_step = 3\nseq_len =\n"}),
    case("train-config-unknown-key", "train", ["--config", "{case}/run.toml", *OUT], "run.toml", "'n_backtest'",
         "n_backtests", files={"run.toml": b"n_backtest = 8\n"}),
    case("train-config-wrong-type", "train", ["--config", "{case}/run.toml", *OUT], "run.toml", "seq_len",
         "an integer", files={"run.toml": b"seq_len = \"8\"\n"}),
    case("train-config-slot-range", "train", ["--config", "{case}/run.toml", *OUT], "run.toml", "[isv] tau",
         "(0, 1]", files={"run.toml": b"[isv]\ntau = 0\n"}),
    case("train-config-slot-n-step", "train", ["--config", "{case}/run.toml", *OUT], "run.toml", "[isv] n_step",
         "--n-step", files={"run.toml": b"[isv]\nn_step = 6\n"}),
    case("train-config-data-relative", "train", ["--config", "cfg/run.toml", *OUT], "--data book.parquet",
         "--config cfg/run.toml", "current directory",
         files={"cfg/run.toml": b'data = "book.parquet"\n', "cfg/book.parquet": "parquet_bytes"}),
    case("train-data-glob-unquoted", "train", ["--data", "d/a.parquet", "d/b.parquet", *OUT], "d/b.parquet",
         "unquoted glob", files=GLOB),
    case("train-fee-infinite", "train", ["--fee", "inf", *OUT], "--fee", "(got inf)"),
    case("train-fee-past-int64", "train", ["--fee", "1e10", *OUT], "--fee", "(got 10000000000.0)"),
    case("train-config-fee-infinite", "train", ["--config", "{case}/run.toml", *OUT], "run.toml", "fee_per_lot",
         "--fee", files={"run.toml": b"fee_per_lot = inf\n"}),
    case("train-device-data-gb-infinite", "train", ["--device-data-gb", "inf", *OUT], "--device-data-gb", "(got inf)"),
    case("train-lots-past-the-simulator", "train", ["--lots", "2000000", *OUT], "--lots", "1,000,000", "(got 2000000)"),
    case("train-checkpoint-every-past-int64", "train", [*SMALL, "--n-steps", "2", "--checkpoint-every",
                                                        "100000000000000000000", *OUT], "--checkpoint-every", "2^63"),
    case("train-episode-steps-past-int64", "train", [*SMALL, "--n-steps", "2", "--episode-steps",
                                                     "100000000000000000000", *OUT], "--episode-steps", "2^63"),
    case("train-synthetic-rows-past-memory", "train", ["--synthetic-rows", "100000000000", *OUT], "--synthetic-rows",
         "100,000,000,000", "memory"),
    case("train-eval-rows-past-memory", "train", [*SMALL, "--eval-rows", "100000000000", *OUT], "--eval-rows",
         "100,000,000,000", "memory"),
    case("train-unknown-flag", "train", ["--n-stepz", "3", *OUT], "--n-stepz"),
    case("train-profile-window", "train", ["--profile-steps", "9:4", *OUT], "--profile-steps"),
    case("train-data-missing", "train", ["--data", "{case}/missing.parquet", *OUT], "--data", "missing.parquet"),
    case("train-data-empty", "train", ["--data", "", *OUT], "--data", "an empty path"),
    case("train-data-not-parquet", "train", ["--data", "{case}/bad.parquet", *OUT], "--data", "bad.parquet",
         files={"bad.parquet": b"not parquet at all"}),
    case("train-data-cache-tampered", "train", ["--data", "{case}/cache", *OUT], "--data", "00000/labels.npy",
         "sha256", files={**CACHE, "cache/shards/00000/labels.npy": "cache_labels_tampered"}),
    case("train-data-interleaved", "train", ["--data", "{case}/parent.parquet", *OUT], "--data", "parent.parquet",
         "instrument_id 11 again after 33", "instrument_id 11, 33, 22 so far", "give --instrument ID",
         files={"parent.parquet": "parent_parquet"}),
    case("train-instrument-no-row", "train", ["--data", "{case}/parent.parquet", "--instrument", "99", *OUT], "--data",
         "parent.parquet", "--instrument 99", "instrument_id 11 (4,000 rows), 22 (3,000 rows), 33 (2,000 rows)",
         files={"parent.parquet": "parent_parquet"}),
    case("train-instrument-without-data", "train", ["--instrument", "22", *OUT], "--instrument 22", "--data"),
    case("train-instrument-empty", "train", ["--instrument", "", *OUT], "--instrument", "an empty instrument"),
    case("train-instrument-past-u32", "train", ["--instrument", "4294967296", *OUT], "--instrument", "4294967296"),
    case("train-config-instrument-type", "train", ["--config", "{case}/run.toml", *OUT], "run.toml",
         "instrument = true", "an instrument_id", files={"run.toml": b"instrument = true\n"}),
    case("train-data-cache-instrument", "train", ["--data", "{case}/cache", "--instrument", "7", *OUT], "--data",
         "prepared without --instrument", "--instrument 7", files=CACHE),
    case("train-data-cache-horizons", "train", ["--data", "{case}/cache", "--horizons", "10,20,30", *OUT], "--data",
         "horizons 10,50,100", "--horizons 10,20,30", files=CACHE),
    case("train-resume-damaged", "train", ["--resume-from", "{case}/damaged.foxc", *OUT],
         "--resume-from", "damaged.foxc", files={"damaged.foxc": "damaged"}),
    case("train-resume-short", "train", ["--resume-from", "{case}/short.foxc", *OUT],
         "--resume-from", "short.foxc", "short file", files={"short.foxc": "truncated"}),
    case("train-resume-not-foxc", "train", ["--resume-from", "{case}/notes.txt", *OUT],
         "--resume-from", "notes.txt", files={"notes.txt": b"hello, not a checkpoint\n"}),
    case("train-resume-differs", "train", ["--resume-from", "{case}/ck.foxc", "--n-backtests", "16"],
         "ck.foxc", "n_backtests", files={"ck.foxc": "ckpt"}),
    case("train-resume-bench-checkpoint", "train", ["--resume-from", "{case}/bench.foxc"], "--resume-from",
         "bench.foxc", "batch", files={"bench.foxc": "bench_ckpt"}),
    case("train-resume-no-run-meta", "train", ["--resume-from", "{case}/bare.foxc"], "--resume-from", "bare.foxc",
         "no training configuration", files={"bare.foxc": "bare_ckpt"}),
    case("train-resume-bad-saved-setting", "train", ["--resume-from", "{case}/odd.foxc"], "--resume-from",
         "odd.foxc", "n_backtests", files={"odd.foxc": "odd_ckpt"}),
    case("train-out-is-a-file", "train", [*SMALL, "--out", "{case}/taken.txt"], "--out", "taken.txt",
         files={"taken.txt": b"keep me\n"}),
    case("train-out-holds-a-run", "train", [*SMALL, "--out", "{case}/run"], "--out", "--overwrite",
         files={"run": DIR, "run/metrics.jsonl": METRICS}),
    case("train-out-holds-other-files", "train", [*SMALL, "--out", "{case}/mine"], "--out", "holds files",
         "--overwrite", files={"mine/notes.txt": b"keep me\n"}),
    case("train-out-under-a-file", "train", [*SMALL, "--out", "{case}/taken.txt/run"], "--out", "taken.txt",
         files={"taken.txt": b"keep me\n"}),

    # ------------------------------------------------------------------------ python -m foxc.walkforward
    case("wf-data-glob-unquoted", "walkforward", ["--data", "d/a.parquet", "d/b.parquet", "--n-backtests", "8",
                                                  "--out", "{case}/wf"], "d/b.parquet", "unquoted glob", files=GLOB),
    case("wf-folds-zero", "walkforward", ["--folds", "0"], "--folds", "0"),
    case("wf-seed-negative", "walkforward", ["--seed", "-1"], "--seed", "-1"),
    case("wf-synthetic-unknown", "walkforward", ["--synthetic", "bogus"], "--synthetic", "bogus"),
    case("wf-synthetic-beside-data", "walkforward", ["--data", "{parquet}", "--synthetic", "easy"], "--synthetic easy",
         "--data"),
    case("wf-too-few-rows", "walkforward", ["--synthetic-rows", "5", "--folds", "3"], "--synthetic-rows", "5"),
    case("wf-synthetic-rows-past-memory", "walkforward", ["--synthetic-rows", "100000000000", "--folds", "1"],
         "--synthetic-rows", "100,000,000,000", "memory"),
    case("wf-trainer-unknown", "walkforward", ["--trainer", "nope"], "--trainer", "nope"),
    case("wf-baseline-with-training-flags", "walkforward", ["--trainer", "baseline", "--n-step", "3"], "--n-step"),
    case("wf-training-flag-value", "walkforward", ["--n-step", "9"], "--n-step", "9"),
    case("wf-config-fold-setting", "walkforward", ["--config", "{case}/wf.toml"], "--config", "wf.toml", "seed",
         "--seed", files={"wf.toml": b"seed = 3\n"}),
    case("wf-config-slot", "walkforward", ["--config", "{case}/wf.toml"], "wf.toml", "[isv] popart_mean", "state",
         files={"wf.toml": b"[isv]\npopart_mean = 1\n"}),
    case("wf-n-steps-is-the-folds", "walkforward", ["--n-steps", "7", "--steps-per-fold", "2", *SMALL, "--folds", "1",
                                                    "--eval-backtests", "4", "--no-plots", "--out", "{case}/wf"],
         "--n-steps", "--steps-per-fold"),
    case("wf-fee-negative", "walkforward", ["--fee", "-0.5"], "--fee", "-0.5"),
    case("wf-fee-past-int64", "walkforward", ["--fee", "1e10", *WF_SMALL], "--fee", "10,000,000", "(got 1e+10)"),
    case("wf-lots-past-the-simulator", "walkforward", ["--lots", "2000000", *WF_SMALL], "--lots", "2000000"),
    case("wf-steps-per-fold-past-int64", "walkforward", ["--steps-per-fold", "100000000000000000000"],
         "--steps-per-fold", "100000000000000000000"),
    case("wf-workers-without-local", "walkforward", ["--workers", "2", *WF_SMALL], "--workers", "--parallel local"),
    case("wf-ray-address-without-ray", "walkforward", ["--parallel", "local", "--ray-address", "auto", *WF_SMALL],
         "--ray-address", "--parallel ray"),
    case("wf-hold-min-above-max", "walkforward", ["--hold-min", "0.9", "--hold-max", "0.1"], "--hold-min"),
    case("wf-segments-split", "walkforward", ["--split", "segments", "--synthetic-segments", "2", "--folds", "3"],
         "--split", "--synthetic-segments"),
    case("wf-data-empty", "walkforward", ["--data", "", *WF_SMALL[:-2]], "--data", "empty path"),
    case("wf-data-missing", "walkforward", ["--data", "{case}/missing.parquet"], "--data", "missing.parquet"),
    case("wf-folds-past-data", "walkforward", ["--data", "{parquet}", "--folds", "5000", "--out", "{case}/wf"],
         "--folds", "5000"),
    case("wf-days-and-folds", "walkforward", ["--train-days", "2", "--eval-days", "1", "--folds", "2"], "--folds",
         "--train-days"),
    case("wf-days-without-eval", "walkforward", ["--train-days", "2"], "--train-days", "--eval-days"),
    case("wf-step-days-zero", "walkforward", ["--train-days", "2", "--eval-days", "1", "--step-days", "0"],
         "--step-days", "0"),
    case("wf-days-too-few", "walkforward", ["--data", "{case}/cache", "--train-days", "2", "--eval-days", "1",
                                            "--out", "{case}/wf"], "--data", "cache", "--train-days 2", "1 day(s)",
         "need at least 3", files=CACHE),
    case("wf-days-undated", "walkforward", ["--data", "{case}/undated.parquet", "--train-days", "1", "--eval-days",
                                            "1", "--out", "{case}/wf"], "undated.parquet", "not calendar times",
         files={"undated.parquet": "undated_parquet"}),
    case("wf-instrument-without-data", "walkforward", ["--instrument", "22"], "--instrument 22", "--data"),
    case("wf-config-instrument", "walkforward", ["--config", "{case}/wf.toml"], "--config", "wf.toml", "instrument",
         "--instrument", files={"wf.toml": b"instrument = 22\n"}),
    case("wf-cache-instrument", "walkforward", ["--data", "{case}/cache", "--instrument", "7", "--folds", "1", "--out",
                                                "{case}/wf"], "--data", "prepared without --instrument",
         "--instrument 7", files=CACHE),
    case("wf-cache-split-rows", "walkforward", ["--data", "{case}/cache", "--folds", "1", "--split", "rows",
                                                "--out", "{case}/wf"], "--split rows", "shards", files=CACHE),
    case("wf-cache-tampered-manifest", "walkforward", ["--data", "{case}/cache", "--folds", "1", "--out",
                                                       "{case}/wf"], "--data", "manifest.json",
         files={**CACHE, "cache/manifest.json": b'{"format": "foxc-cache"}'}),
    case("wf-out-is-a-file", "walkforward", ["--out", "{case}/taken.txt"], "--out", "taken.txt",
         files={"taken.txt": b"keep me\n"}),
    case("wf-out-holds-files", "walkforward", ["--out", "{case}/wf", "--synthetic-rows", "5000"], "--out", "--overwrite",
         files={"wf": DIR, "wf/report.json": b'{"folds": []}\n'}),

    # ------------------------------------------------------------------------------ python -m foxc.data
    case("data-synth-out-directory", "data", ["synth", "--out", "{case}/adir", "--rows", "100"], "--out", "adir",
         files={"adir": DIR}),
    case("data-synth-out-csv", "data", ["synth", "--out", "{case}/s.csv", "--rows", "100"], "--out", "s.csv",
         ".parquet"),
    case("data-synth-out-exists", "data", ["synth", "--out", "{case}/old.parquet", "--rows", "100"], "--out",
         "old.parquet", "--overwrite", files={"old.parquet": b"PAR1 an existing file PAR1"}),
    case("data-synth-out-under-a-file", "data", ["synth", "--out", "{case}/taken.txt/s.parquet"], "--out",
         "taken.txt", files={"taken.txt": b"keep me\n"}),
    case("data-synth-rows-zero", "data", ["synth", "--out", "{case}/s.parquet", "--rows", "0"], "--rows", "0"),
    case("data-synth-rows-past-memory", "data", ["synth", "--out", "{case}/s.parquet", "--rows", "100000000000"],
         "--rows", "100,000,000,000", "memory"),
    case("data-synth-seed-negative", "data", ["synth", "--out", "{case}/s.parquet", "--seed", "-1"], "--seed"),
    case("data-inspect-missing", "data", ["inspect", "{case}/missing.parquet"], "missing.parquet"),
    case("data-inspect-not-parquet", "data", ["inspect", "{case}/bad.parquet"], "bad.parquet",
         files={"bad.parquet": b"nope"}),
    case("data-inspect-unknown-format", "data", ["inspect", "{case}/book.xlsx"], "book.xlsx",
         files={"book.xlsx": b"x"}),
    case("data-inspect-horizons", "data", ["inspect", "{parquet}", "--horizons", "a,b"], "--horizons", "a,b"),
    case("data-inspect-price-bounds", "data", ["inspect", "{parquet}", "--min-price", "5", "--max-price", "1"],
         "--min-price", "--max-price"),
    case("data-inspect-tick-below-resolution", "data", ["inspect", "{parquet}", "--tick", "1e-12"], "--tick", "1e-12"),
    case("data-inspect-tick-huge", "data", ["inspect", "{parquet}", "--tick", "1e300"], "--tick", "1e+300"),
    case("data-inspect-run-dir-is-a-file", "data", ["inspect", "{parquet}", "--run-dir", "{case}/taken.txt"],
         "--run-dir", "taken.txt", files={"taken.txt": b"keep me\n"}),
    case("data-inspect-run-dir-holds-a-summary", "data", ["inspect", "{parquet}", "--run-dir", "{case}/run"],
         "--run-dir", "data_validation.json", "--overwrite", files={"run/data_validation.json": b"a run's report\n"}),
    case("data-unknown-command", "data", ["frobnicate"], "frobnicate"),
    case("data-prepare-glob-unquoted", "data", ["prepare", "d/a.parquet", "d/b.parquet", "--out", "{case}/c"],
         "d/b.parquet", "unquoted glob", files=GLOB),
    case("data-prepare-missing", "data", ["prepare", "{case}/missing.parquet", "--out", "{case}/cache"],
         "missing.parquet"),
    case("data-prepare-bad-among-good", "data", ["prepare", "{case}/in", "--out", "{case}/new/cache", "--workers", "2"],
         "bad.parquet", "not a Parquet file",
         files={"in/a.parquet": "parquet_bytes", "in/b.parquet": "parquet_bytes", "in/bad.parquet": b"PAR1 nope"}),
    case("data-prepare-nothing-kept", "data", ["prepare", "{case}/x.parquet", "--out", "{case}/cache"], "x.parquet",
         "no usable rows", files={"x.parquet": "one_sided_parquet"}),
    case("data-prepare-out-holds-files", "data", ["prepare", "{parquet}", "--out", "{case}/old"], "--out", "old",
         "--overwrite", files={"old/notes.txt": b"keep me\n"}),
    case("data-prepare-overwrite-not-a-cache", "data", ["prepare", "{parquet}", "--out", "{case}/old", "--overwrite"],
         "--out", "manifest.json", files={"old/notes.txt": b"keep me\n"}),
    case("data-prepare-out-is-a-file", "data", ["prepare", "{parquet}", "--out", "{case}/taken.txt"], "--out",
         "taken.txt", files={"taken.txt": b"keep me\n"}),
    case("data-prepare-workers-zero", "data", ["prepare", "{parquet}", "--out", "{case}/c", "--workers", "0"],
         "--workers", "0"),
    case("data-prepare-horizons-two", "data", ["prepare", "{parquet}", "--out", "{case}/c", "--horizons", "10,50"],
         "--horizons", "10,50"),
    case("data-prepare-from-a-cache", "data", ["prepare", "{case}/cache", "--out", "{case}/again"], "cache",
         "prepared cache", files=CACHE),
    case("data-inspect-a-cache-with-file-flags", "data", ["inspect", "{case}/cache", "--fee", "1"], "--fee",
         "prepared cache", files=CACHE),
    case("data-prepare-instrument-no-row", "data", ["prepare", "{case}/parent.parquet", "--out", "{case}/c",
                                                    "--instrument", "99"], "parent.parquet", "--instrument 99",
         "instrument_id 11 (4,000 rows)", files={"parent.parquet": "parent_parquet"}),
    case("data-inspect-interleaved", "data", ["inspect", "{case}/parent.parquet"], "parent.parquet",
         "give --instrument ID", files={"parent.parquet": "parent_parquet"}),
    case("data-inspect-instrument-symbol-parquet", "data", ["inspect", "{case}/parent.parquet", "--instrument",
                                                            "ESH4"], "--instrument ESH4", "ESU4 to 22",
         "give one of those symbols", files={"parent.parquet": "parent_parquet"}),
    case("data-inspect-cache-instrument", "data", ["inspect", "{case}/cache", "--instrument", "7"], "cache",
         "prepared without --instrument", "--instrument 7", files=CACHE),
    case("data-inspect-verify-files", "data", ["inspect", "{parquet}", "--verify"], "--verify", "not a prepared cache"),
    case("data-inspect-verify-missing", "data", ["inspect", "{case}/cach", "--verify"],
         "cach: no such file or directory"),
    case("data-inspect-cache-tampered", "data", ["inspect", "{case}/cache", "--verify"], "00000/labels.npy", "sha256",
         files={**CACHE, "cache/shards/00000/labels.npy": "cache_labels_tampered"}),

    # ----------------------------------------------------------------------------- python -m foxc.bench
    case("bench-unknown", "bench", ["nosuchbench"], "nosuchbench"),
    case("bench-lobsim-n-backtests-zero", "bench", ["lobsim", "--backend", "reference", "--n-backtests", "0"],
         "--n-backtests", "0"),
    case("bench-lobsim-json-directory", "bench", ["lobsim", "--backend", "reference", "--json", "{case}/adir"],
         "--json", "adir", files={"adir": DIR}),
    case("bench-replay-capacity", "bench", ["replay", "--backend", "reference", "--per-capacity", "100"],
         "--per-capacity", "100"),
    case("bench-train-n-backtests", "bench", ["train", "--backend", "reference", "--n-backtests", "8,0"],
         "--n-backtests", "8,0"),
    case("bench-train-per-capacity", "bench", ["train", "--backend", "reference", "--per-capacity", "1000"],
         "--per-capacity", "1000"),
    case("bench-data-seq-len", "bench", ["data", "--backend", "reference", "--seq-len", "500"], "--seq-len", "500"),
    case("bench-data-scale-no-room", "bench", ["data", "--backend", "reference", "--scale", "--rows", "10000000000000",
                                               "--dir", "{case}/scale"], "--rows", "10,000,000,000,000", "--dir",
         "GB free"),
    case("bench-data-scale-dir-holds-files", "bench", ["data", "--backend", "reference", "--scale", "--rows", "1000",
                                                       "--dir", "{case}/taken"], "--dir", "taken",
         files={"taken": DIR, "taken/keep.txt": b"keep me\n"}),
    case("bench-data-shard-rows-without-scale", "bench", ["data", "--backend", "reference", "--shard-rows", "10"],
         "--shard-rows", "only with --scale"),
    case("bench-data-prepare-rows-below-workers", "bench", ["data", "--backend", "reference", "--prepare", "--rows",
                                                            "3", "--workers", "4"], "--rows 3", "--workers 4"),
    case("bench-data-workers-alone", "bench", ["data", "--backend", "reference", "--workers", "4"], "--workers 4",
         "--prepare"),
    case("bench-data-scale-and-prepare", "bench", ["data", "--backend", "reference", "--scale", "--prepare"],
         "--prepare", "--scale"),
    case("bench-driver-launches", "bench", ["driver", "--backend", "reference", "--launches", "-1"], "--launches"),
    case("bench-driver-json-under-a-file", "bench", ["driver", "--backend", "reference", "--json",
                                                     "{case}/taken.txt/out.json"], "--json", "taken.txt",
         files={"taken.txt": b"keep me\n"}),
    case("bench-checkpoint-repeats", "bench", ["checkpoint", "--backend", "reference", "--repeats", "0"],
         "--repeats"),
    case("bench-checkpoint-dir-empty-path", "bench", ["checkpoint", "--backend", "reference", "--dir", ""], "--dir",
         "an empty path"),
    case("bench-data-scale-dir-empty-path", "bench", ["data", "--backend", "reference", "--scale", "--rows", "1000",
                                                      "--dir", ""], "--dir", "an empty path"),
    case("bench-lobsim-json-empty-path", "bench", ["lobsim", "--backend", "reference", "--json", ""], "--json",
         "an empty path"),
    case("bench-checkpoint-dir-holds-files", "bench", ["checkpoint", "--backend", "reference", "--dir",
                                                       "{case}/ckpts"], "--dir", "ckpts",
         files={"ckpts": DIR, "ckpts/checkpoint-1.foxc": "ckpt"}),
    case("bench-evaluate-rows", "bench", ["evaluate", "--backend", "reference", "--rows", "10"], "--rows", "10"),
    case("bench-learn-iters", "bench", ["learn", "--backend", "reference", "--iters", "0"], "--iters"),
    case("bench-learn-profile-out-file", "bench", ["learn", "--backend", "reference", "--profile", "--out",
                                                   "{case}/taken.txt"], "--out", "taken.txt",
         files={"taken.txt": b"keep me\n"}),
    case("bench-edge-markets", "bench", ["edge", "--backend", "reference", "--markets", "easy,moon"],
         "--markets", "moon"),
    case("bench-edge-steps", "bench", ["edge", "--backend", "reference", "--steps", "easy=x"], "--steps", "easy=x"),
    case("bench-edge-n-backtests", "bench", ["edge", "--backend", "reference", "--n-backtests", "100000"],
         "--n-backtests", "100000"),
    case("bench-backend", "bench", ["lobsim", "--backend", "tpu"], "--backend", "tpu"),

    # ---------------------------------------------------------------------------- python -m foxc.report
    case("report-missing", "report", ["{case}/nope"], "nope"),
    case("report-empty-dir", "report", ["{case}/empty"], "empty", "metrics.jsonl", files={"empty": DIR}),
    case("report-a-file", "report", ["{case}/taken.txt"], "taken.txt", files={"taken.txt": b"keep me\n"}),
    case("report-empty-metrics", "report", ["{case}/run"], "metrics.jsonl",
         files={"run": DIR, "run/metrics.jsonl": b""}),
    case("report-json-not-json", "report", ["{case}/run"], "report.json",
         files={"run": DIR, "run/report.json": b"{not json"}),
    case("report-json-no-folds", "report", ["{case}/run"], "report.json", "folds",
         files={"run": DIR, "run/report.json": b'{"folds": 3}'}),
    case("report-out-is-a-file", "report", ["{case}/run", "--out", "{case}/taken.txt"], "--out", "taken.txt",
         files={"run": DIR, "run/metrics.jsonl": METRICS, "taken.txt": b"keep me\n"}),
    case("report-no-run-dir", "report", [], "RUN_DIR"),

    # ---------------------------------------------------- foxc-ckpt-inspect (module and tools/ckpt_inspect.py)
    case("inspect-missing", "inspect", ["{case}/gone.foxc"], "gone.foxc"),
    case("inspect-damaged", "inspect", ["{case}/damaged.foxc"], "damaged.foxc", "dqn_w",
         files={"damaged.foxc": "damaged"}),
    case("inspect-not-foxc", "inspect", ["{case}/notes.txt"], "notes.txt", "magic",
         files={"notes.txt": b"hello, not a checkpoint at all\n"}),
    case("inspect-directory", "inspect", ["{case}/adir"], "adir", files={"adir": DIR}),
    case("inspect-no-such-section", "inspect", ["{case}/ck.foxc", "--section", "nope"], "ck.foxc", "nope",
         files={"ck.foxc": "ckpt"}),
    case("inspect-diff-damaged", "inspect", ["{case}/ck.foxc", "--diff", "{case}/damaged.foxc"], "damaged.foxc",
         files={"ck.foxc": "ckpt", "damaged.foxc": "damaged"}),
    case("inspect-modes-exclusive", "inspect", ["{case}/ck.foxc", "--isv", "--verify"], "--verify", "--isv",
         files={"ck.foxc": "ckpt"}),
    case("inspect-no-path", "inspect", [], "path"),
    case("inspect-empty-path", "inspect", [""], "an empty path"),
    case("inspect-diff-empty-path", "inspect", ["{case}/ck.foxc", "--diff", ""], "--diff", "an empty path",
         files={"ck.foxc": "ckpt"}),
    case("inspect-full-without-section", "inspect", ["{case}/ck.foxc", "--full"], "--full", "--section",
         files={"ck.foxc": "ckpt"}),
    case("ckpt-tool-short", "ckpt_tool", ["{case}/short.foxc"], "short.foxc", "short file",
         files={"short.foxc": "truncated"}),
    case("ckpt-tool-empty", "ckpt_tool", ["{case}/empty.foxc"], "empty.foxc", files={"empty.foxc": b""}),
    case("ckpt-tool-unknown-flag", "ckpt_tool", ["{case}/ck.foxc", "--sections"], "--sections",
         files={"ck.foxc": "ckpt"}),

    # ------------------------------------------------------------------------------- python -m foxc.isv
    case("isv-unknown-slot", "isv", ["gama"], "'gama'", "gamma"),
    case("isv-show-unknown", "isv", ["show", "no_such_slot"], "no_such_slot"),
    case("isv-unknown-flag", "isv", ["list", "--jsn"], "--jsn"),
]


def shared_files(base: Path) -> dict:
    """The fixtures the cases copy or read: a small checkpoint (whole, damaged, cut short), 3,000 rows of data
    (and its prepared cache, and a labels shard with one bit flipped), a file whose every row is skipped."""
    from foxc.checkpoint import write_checkpoint
    from foxc.data.prepare import prepare
    from foxc.data.parquet import write_parquet
    from foxc.data.record import PRICE_UNDEF
    from foxc.data.synthetic import generate
    from foxc.isv.registry import SLOTS
    from test_data_instrument import parent_parquet
    state = {"isv": np.array([s.bootstrap for s in SLOTS], np.float32), "dqn_w": np.arange(24, dtype=np.float32)}
    config = {"n_backtests": 8, "seq_len": 4, "per_capacity": 64, "synthetic_rows": 20000, "n_steps": 2}
    ckpt = write_checkpoint(base / "ckpt.foxc", 2, state, {"config": config, "data": {"source": "synthetic"}})
    # checkpoints foxc.train did not write: foxc.bench checkpoint's meta, none at all, a setting of the wrong type
    bench = write_checkpoint(base / "bench.foxc", 1, state, {"config": {"batch": 64, "per": 1024},
                                                             "data": {"source": "bench", "sha256": "0" * 64}})
    bare = write_checkpoint(base / "bare.foxc", 2, state)
    odd = write_checkpoint(base / "odd.foxc", 2, state, {"config": {**config, "n_backtests": "8"},
                                                         "data": {"source": "synthetic"}})
    whole = ckpt.read_bytes()
    damaged = bytearray(whole)
    damaged[-60] ^= 0xFF  # in the data of dqn_w, the last section before the checksum
    parquet = base / "book.parquet"
    write_parquet(parquet, generate(3000, 1))
    one_sided = generate(40, 1)
    one_sided["ask_px"] = PRICE_UNDEF
    write_parquet(base / "one_sided.parquet", one_sided)
    undated = generate(3000, 1)
    undated["ts_ns"] -= undated["ts_ns"][0] - 1  # times counted from 0, as a file without its date
    write_parquet(base / "undated.parquet", undated)
    prepare(parquet, base / "cache")
    parent = parent_parquet(base / "parent.parquet", rows=(4000, 3000, 2000))  # three instruments interleaved
    shard = base / "cache" / "shards" / "00000"
    labels = bytearray((shard / "labels.npy").read_bytes())
    labels[-8] ^= 0x01
    return {"ckpt": whole, "bench_ckpt": bench.read_bytes(), "bare_ckpt": bare.read_bytes(),
            "odd_ckpt": odd.read_bytes(), "damaged": bytes(damaged), "truncated": whole[:12], "parquet_path": parquet,
            "parquet_bytes": parquet.read_bytes(), "one_sided_parquet": (base / "one_sided.parquet").read_bytes(),
            "cache_manifest": (base / "cache" / "manifest.json").read_bytes(),
            "cache_records": (shard / "records.npy").read_bytes(), "cache_labels": (shard / "labels.npy").read_bytes(),
            "cache_labels_tampered": bytes(labels), "undated_parquet": (base / "undated.parquet").read_bytes(),
            "parent_parquet": parent.read_bytes()}


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (DIR if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


def run_case(c: Case, folder: Path, shared: dict) -> tuple[subprocess.CompletedProcess, dict, dict]:
    folder.mkdir()
    for rel, content in c.files.items():
        path = folder / rel
        if content == DIR:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shared[content] if isinstance(content, str) else content)
    before = snapshot(folder)
    prefix, _ = COMMANDS[c.cmd]
    argv = [a.format(case=folder, parquet=shared["parquet_path"]) for a in c.argv]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, *prefix, *argv], capture_output=True, text=True, cwd=folder, env=env,
                          timeout=240)
    return done, before, snapshot(folder)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    base = tmp_path_factory.mktemp("shared")
    files = shared_files(base)
    files["before"] = snapshot(base)
    files["base"] = base
    return files


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, shared):
    """Every case run once, side by side."""
    base = tmp_path_factory.mktemp("cases")
    with ThreadPoolExecutor(max_workers=max(2, min(8, (os.cpu_count() or 2) + 1))) as pool:
        futures = {c.id: pool.submit(run_case, c, base / c.id, shared) for c in CASES}
        return {name: f.result() for name, f in futures.items()}


def test_the_table_covers_every_cli():
    per_cli = {}
    for c in CASES:
        per_cli[c.cmd] = per_cli.get(c.cmd, 0) + 1
    assert set(per_cli) == set(COMMANDS) and min(per_cli.values()) >= 3, per_cli
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


@pytest.mark.slow  # every case a subprocess: about a minute on two cores
@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_naming_it(c, outcomes):
    done, before, after = outcomes[c.id]
    err = done.stderr
    assert "Traceback" not in err, err
    assert done.returncode == c.code, (done.returncode, err, done.stdout[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    name = COMMANDS[c.cmd][1]
    assert re.match(rf"{re.escape(name)}( \w+)?: error: \S", lines[0]), lines[0]
    for word in c.names:
        assert word in lines[0], (word, lines[0])
    assert after == before, "a refused command changed its directory"


@pytest.mark.slow  # every case a subprocess: about a minute on two cores
def test_shared_fixtures_are_untouched(shared, outcomes):
    assert snapshot(shared["base"]) == shared["before"]


def test_help_still_works():
    for prefix, _ in list(COMMANDS.values())[:3]:
        done = subprocess.run([sys.executable, *prefix, "--help"], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0 and done.stdout.startswith("usage:") and not done.stderr


def test_graph_on_the_reference_backend_says_how_it_runs():
    from foxc.train import REFERENCE_GRAPH_NOTE
    assert "reference backend" in REFERENCE_GRAPH_NOTE and "list of launches" in REFERENCE_GRAPH_NOTE
    assert "\n" not in REFERENCE_GRAPH_NOTE


@pytest.mark.parametrize("module, argv, said", [
    ("foxc.train", ["--data", ""], "argument --data: an empty path (give a file, directory, glob or prepared cache"),
    ("foxc.train", ["--resume-from", ""], "argument --resume-from: an empty path (give a checkpoint file)"),
    ("foxc.train", ["--config", ""], "argument --config: an empty path (give a .toml file)"),
    ("foxc.train", ["--out", ""], "argument --out: an empty path (give a directory)"),
    ("foxc.walkforward", ["--data", ""], "argument --data: an empty path (give a file, directory, glob or cache, or "),
    ("foxc.walkforward", ["--out", ""], "argument --out: an empty path (give a directory)"),
    ("foxc.sweep.cli", ["--out", ""], "argument --out: an empty path (give a directory)"),
    ("foxc.data.__main__", ["inspect", ""], "argument path: an empty path (give a file, a directory, a glob or a "),
    ("foxc.data.__main__", ["inspect", "x", "--run-dir", ""], "argument --run-dir: an empty path (give a directory)"),
    ("foxc.data.__main__", ["synth", "--out", ""], "argument --out: an empty path (give a .parquet file name)"),
    ("foxc.data.__main__", ["prepare", "", "--out", "x"], "argument data: an empty path (give a file, a directory "),
    ("foxc.data.__main__", ["prepare", "x", "--out", ""], "argument --out: an empty path (give a directory)"),
    ("foxc.isv.__main__", ["set", "", "lr_q=1e-4"], "argument RUN_DIR: an empty path (give the running trainer's "),
    ("foxc.report", [""], "argument RUN_DIR: an empty path (give a run directory)"),
    ("foxc.checkpoint.inspect_cli", ["x", "--diff", ""], "argument --diff: an empty path (give a checkpoint file)"),
    ("foxc.bench.__main__", ["learn", "--out", ""], "argument --out: an empty path (give a directory)"),
])
def test_an_empty_path_is_refused_by_argparse_naming_the_flag(module, argv, said, capsys, monkeypatch, tmp_path):
    """`--flag "$VAR"` of an unset variable: every path flag refuses "" as argparse refuses a bad value (one line
    naming the flag and what to give), before any work. --resume-from "", --config "" and --run-dir "" were taken
    as not given (a fresh run, no file, no summary written); isv's RUN_DIR "" and --out "" as the current
    directory."""
    import importlib
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1 and ": error: " + said in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module", ["foxc.train", "foxc.walkforward"])
def test_a_bad_foxc_backend_is_named_as_the_variable(module):
    """$FOXC_BACKEND stands for --backend when the flag is not given: a value it cannot be is named as the variable."""
    done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "FOXC_BACKEND": "bogus"})
    assert done.returncode == 2 and done.stderr == (f"{module}: error: $FOXC_BACKEND: backend must be one of auto, "
                                                    "cuda, reference, got 'bogus'\n"), done.stderr
