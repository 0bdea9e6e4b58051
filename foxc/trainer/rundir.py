"""Run directories and resuming: never overwrite or mix runs, and resume with one flag.

A new run's `--out DIR` must be new or empty (or the resumed run's, or `--overwrite`: RUN_FILES are removed first); a
run that fails before its first step removes the directory it created. `--resume-from CKPT` takes every setting from
the checkpoint: one given beside it must agree, except RESUME_FREE's. The data is identified by its content."""
from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..checkpoint.meta import config_differences
from ..cli import open_run_dir, output_dir
from ..checkpoint.saver import list_checkpoints
from ..errors import UserError
from ..data.select import respelled
from ..isv.live import MARKER, REQUESTS, running_trainer
from ..isv.registry import setting_problem
from .config import SETTINGS, ConfigError, TrainConfig, check_synthetic_beside_data, switches_from_slots
from .metrics import SUPERSEDED
from .session import files_digest

# what a run writes into its directory: --overwrite removes these (and nothing else) before a run
RUN_FILES = ("config.json", "metrics.jsonl", SUPERSEDED, ".metrics.jsonl.tmp-*", "summary.json", "data_validation.json",
             "profile.json", "checkpoint-*.foxc", ".checkpoint-*.foxc.tmp-*")

# settings a resumed run may change: how long, how often it logs, saves and evaluates, how it runs
RESUME_FREE = ("n_steps", "log_every", "checkpoint_every", "eval_every", "eval_rows", "graph")


class RunDirError(UserError):
    """A run directory that cannot be used; the message names it."""


class ResumeError(UserError):
    """A checkpoint that does not fit this run; the message names the setting, file or hash."""


@dataclass
class RunDir:
    path: Path
    created: bool  # by this run: discard removes it

    @classmethod
    def open(cls, out: str | None, *, resuming: Path | None = None, step: int = 0,
             overwrite: bool = False) -> "RunDir":
        """`out`, else (resuming the checkpoint of `step`) the checkpoint's own, unless it holds a later checkpoint
        (which the run would overwrite, and mix two histories), else a new unique one."""
        target = Path(out) if out is not None else resuming.parent if resuming is not None else None
        who = running_trainer(target) if target is not None else None
        if who:  # --overwrite would delete its files under it, a resume would write beside it
            where = f"--out {target}" if out is not None else f"--resume-from {resuming}: its directory"
            raise RunDirError(f"{where}: a trainer is running there ({who}); runs never mix: let it end or stop it, "
                              f"or give another directory (if it no longer runs, remove its marker "
                              f"{target / REQUESTS / MARKER})")
        if resuming is not None and (out is None or Path(out).resolve() == resuming.resolve().parent):
            later = [p for s, p in list_checkpoints(resuming.parent) if s > step]
            if later:
                raise RunDirError(f"--resume-from {resuming}: its directory holds {later[-1].name}, later than this "
                                  f"checkpoint's step {step}: going on there would overwrite or prune it and mix "
                                  f"two runs' records (give --out NEWDIR to go on from step {step} beside it)")
        if out is None and resuming is not None:
            return cls(resuming.parent, False)
        if out is None:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
            for _ in range(100):
                path = Path("runs") / f"{stamp}-{secrets.token_hex(3)}"
                try:
                    path.mkdir(parents=True)
                    return cls(path, True)
                except FileExistsError:
                    continue
        path = output_dir("--out", out)  # a file, or a folder that cannot be written
        same = resuming is not None and resuming.resolve().parent == path.resolve()
        if path.is_dir() and any(path.iterdir()) and not (same or overwrite):
            if not any(any(path.glob(pattern)) for pattern in RUN_FILES):
                raise RunDirError(f"--out {path}: the directory holds files (give a new or empty directory, or "
                                  "--overwrite: the run writes beside them, removing only a run's files)")
            raise RunDirError(f"--out {path}: the directory holds another run (give a new directory, resume that "
                              "run with --resume-from DIR/checkpoint-<step>.foxc, or --overwrite)")
        created = not path.exists()  # --overwrite: the old run's records and live requests, which would mix with ours
        return cls(open_run_dir(path, overwrite and not same, (*RUN_FILES, REQUESTS)), created)

    def discard(self):
        """Remove the directory if this run created it (a run that failed before its first step)."""
        if self.created:
            shutil.rmtree(self.path, ignore_errors=True)


def saved_run(path, meta: dict) -> tuple[dict, dict]:
    """The configuration and data a checkpoint's meta records, each setting checked as a config file's; one
    foxc.train did not write (foxc.bench's, another version's) is refused naming the file and the setting."""
    config, data = meta.get("config"), meta.get("data")
    if not config or not isinstance(config, dict) or not isinstance(data, dict):
        raise ResumeError(f"--resume-from {path}: not a checkpoint of a foxc.train run: its meta records no training "
                          "configuration and data (foxc-ckpt-inspect shows what it holds)")
    unknown = sorted(set(config) - SETTINGS.keys(), key=str)
    if unknown:
        raise ResumeError(f"--resume-from {path}: not a checkpoint of a foxc.train run of this version: its "
                          f"configuration has settings foxc.train does not know ({', '.join(map(str, unknown))})")
    for key, value in config.items():  # each by itself (naming it), then all together
        try:
            SETTINGS[key].value(value)
        except ConfigError as e:
            raise ResumeError(f"--resume-from {path}: the checkpoint's setting {key} = {value!r} cannot be resumed: "
                              f"{e}") from None
    # the slots no longer accepted leave only their record, as the run keeps them (kept_isv); a switch its slot
    # contradicts (earlier code): the slot ran
    isv = [(n, v) for n, v in config.get("isv", ()) if not setting_problem(n, float(v))]
    try:
        TrainConfig.for_backend("reference", **switches_from_slots({**config, "isv": isv}))
    except ConfigError as e:
        raise ResumeError(f"--resume-from {path}: the checkpoint's configuration cannot be resumed: {e}") from None
    return config, data


def resume_settings(path, saved: dict, given: dict, sources: dict | None = None, data: dict | None = None) -> dict:
    """The checkpoint's configuration `saved` with RESUME_FREE's settings `given` (n_steps too: another run as long);
    any other given must agree with it (each that does not named, with its `sources`), a --tick with the tick its
    `data` ran in; an --instrument spelled otherwise is taken as given (the data is compared by content later). A
    setting of synthetic data beside the checkpoint's real data is refused: the run would ignore it."""
    if not given.get("data"):
        check_synthetic_beside_data({**given, "data": saved.get("data")},
                                    {**(sources or {}), "data": f"--resume-from {path}"})
    # an --instrument spelled another way (ESM4 for 5482) is free: the data's identity, by content, tells
    free = (*RESUME_FREE, "data") + ("instrument",) * respelled(saved.get("instrument"), given.get("instrument"))
    differ = [k for k in given if k not in free]
    ran = {**saved, "tick": saved.get("tick") or (data or {}).get("tick")}  # an older checkpoint records no data tick
    conflicts = config_differences({k: ran.get(k) for k in differ}, {k: given[k] for k in differ})
    if conflicts:
        sources = sources or {}
        named = [c + (f" (from {sources[key]})" if (key := c.split(":")[0]) in sources else "") for c in conflicts]
        raise ResumeError(f"{path}: settings given beside --resume-from differ from the checkpoint's: "
                          + "; ".join(named) + " (leave them out to keep the checkpoint's)")
    # data given: the same data at another path, checked by content
    return {**saved, **{k: given[k] for k in free if k in given}}


def check_same_data(path, saved_data: dict, now: dict) -> str:
    """Refuse data that differs in content from the checkpoint's (sha256, rows); the checkpoint's sha256 of it."""
    want, got = saved_data.get("sha256"), now.get("sha256")
    if want is None:
        raise ResumeError(f"{path}: the checkpoint does not record its data's sha256, so the data cannot be checked")
    was, kept = saved_data.get("instrument_id"), now.get("instrument_id")
    if None not in (was, kept) and was != kept:  # a symbol that keeps another id in these files
        raise ResumeError(f"{path}: --instrument {now['instrument_selection']} is instrument_id {kept} in "
                          f"{now['source']}, the checkpoint's run kept instrument_id {was} (give --instrument {was})")
    # session 16's code (before 2625f82) mixed --instrument into the files' sha256 as given, not as the instrument_id
    # it kept (a record without one): the same bytes read with the same symbol are the same rows; a respelling,
    # only that id would tell
    cached, now_given = now.get("cache") or saved_data.get("cache"), now.get("instrument_selection")
    given = None if was is not None or cached else saved_data.get("instrument_selection")
    if want != got and not (given is not None and given == now_given and files_digest(now["files"], given) == want):
        respell = (f"; the checkpoint records --instrument {given} as given, not the instrument_id it kept: give "
                   f"--instrument {given}" if given not in (None, now_given) else "")
        raise ResumeError(f"{path}: the data differs from the checkpoint's (sha256 {got} now, {want} in the "
                          f"checkpoint; {now.get('source')}{respell})")
    if saved_data.get("rows") is not None and now.get("rows") is not None and saved_data["rows"] != now["rows"]:
        raise ResumeError(f"{path}: the data has {now['rows']} rows, the checkpoint's had {saved_data['rows']}")
    return want
