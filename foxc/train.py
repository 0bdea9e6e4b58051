"""`python -m foxc.train`: train foxc's trading agent (no arguments: synthetic data, the backend picked
automatically, its defaults, a run directory under runs/)."""
from __future__ import annotations

import signal
import sys
from pathlib import Path

from . import __version__
from .cli import ArgumentParser, PathArg, UserError, open_runtime, run as run_cli
from .driver import BACKENDS
from .profile import KernelProfiler, add_profile_args, profile_window
from .isv.registry import setting_problem
from .trainer.config import (SETTINGS, ConfigError, ConfigFile, TrainConfig, add_config_arguments, check_needs_data,
                             check_synthetic_beside_data, config_settings, merge_isv, switches_from_slots)
from .checkpoint import CheckpointError, read_checkpoint
from .data import DataError
from .data.cache import is_cache
from .data.source import expand
from .trainer.metrics import TENSORBOARD_INSTALL, TensorBoardLog, tensorboard_available
from .trainer.run import Trainer, write_json
from .trainer.rundir import RESUME_FREE, RunDir, check_same_data, resume_settings, saved_run
from .trainer.session import run_data

PROG = "foxc.train"
# --graph on with the reference backend: there is no CUDA graph on the CPU; the reference runtime
# records the captured step as a list of launches and replays it (same results, no speed-up).
REFERENCE_GRAPH_NOTE = ("note: --graph on with the reference backend: the step is recorded as a list of launches "
                        "and replayed on the CPU (no CUDA graph, no speed-up; same results as eager)")


def parse_args(argv=None):
    ap = ArgumentParser(prog="python -m foxc.train", description="Train foxc's trading agent on one GPU.")
    add_config_arguments(ap)
    add = ap.add_argument
    add("--backend", choices=BACKENDS, default=None,
        help="auto (default; $FOXC_BACKEND overrides): CUDA when a usable GPU is present, else the numpy reference")
    add("--resume-from", metavar="PATH", type=PathArg("a checkpoint file"),
        help=f"continue from a checkpoint with its settings (only {', '.join(SETTINGS[k].flag for k in RESUME_FREE)} "
             "may change, and --set slots are set on top of the checkpoint's; other flags given must agree)")
    add("--out", type=PathArg("a directory"),
        help="run directory: new or empty (default runs/<UTC time>-<6 hex>; resuming: the checkpoint's)")
    add("--overwrite", action="store_true", help="allow --out to name a directory that holds another run")
    add("--checkpoint-on-exit", action="store_true",
        help="on Ctrl-C or SIGTERM, also save a checkpoint of the step reached (the run stops cleanly either way)")
    add("--tensorboard", action="store_true",
        help="also write TensorBoard scalars into RUN_DIR/tensorboard (needs: pip install 'foxc[tensorboard]')")
    add_profile_args(ap)
    return ap.parse_args(argv)


def describe_evaluation(e: dict) -> str:
    wr = "-" if e["eval_wr"] is None else f"{e['eval_wr']:.3f}"
    t = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    text = (f"{e['eval_pnl']:+.4f} ticks per snapshot (t {t(e.get('eval_t'))}) over {e['eval_rows']:,} snapshots, "
            f"{e['eval_trades']} trades, win rate {wr}, in the market {e['eval_time_in_market']:.2f}")
    if e.get("eval_opt_frac") is not None:
        text += f"; {e['eval_opt_frac']:.2f} of the market's optimum"
    if "eval_yardstick_pnl" in e:
        text += (f"; beside it flat +0.0000 and the logistic-imbalance yardstick {e['eval_yardstick_pnl']:+.4f} "
                 f"(t {t(e['eval_yardstick_t'])}, {e['eval_yardstick_trades']} trades)")
    elif "eval_yardstick_note" in e:
        text += f"; beside it flat +0.0000 (no yardstick: {e['eval_yardstick_note']})"
    return text


def describe_selection(s: dict | None) -> str:
    """The console's word on the run's policy (summary.json's `selection`)."""
    if s is None:
        return "policy: the final weights (--val-frac 0: nothing validated)"
    if s["kept"] == "flat":
        return (f"policy: flat: none of {s['validations']} validations on {s['val_rows']:,} held-out training rows "
                "beat flat by 2 standard errors")
    return (f"policy: the weights of step {s['kept']}, the best of {s['validations']} validations on "
            f"{s['val_rows']:,} held-out training rows ({s['val_pnl_ticks']:+.4f} ± {s['val_se']:.4f} ticks per "
            f"snapshot, {s['val_trades']} trades)")


def main(argv=None) -> int:
    args = parse_args(argv)
    return run_cli(PROG, lambda: _main(args))


def _main(args) -> int:
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    run_dir, trainer = None, None
    try:
        if args.tensorboard and not tensorboard_available():
            raise UserError(f"--tensorboard needs tensorboardX: {TENSORBOARD_INSTALL}")
        command_line = config_settings(args)
        config_file = ConfigFile.read(args.config_file) if args.config_file else ConfigFile(None, {})
        # a setting at odds with another (or the checkpoint) is named with the file that gave it
        given, from_file = config_file.under(command_line), config_file.sources(command_line)
        check_synthetic_beside_data(given, from_file)
        rt = open_runtime(args.backend)  # a bad $FOXC_BACKEND named as the variable
        resume = Path(args.resume_from) if args.resume_from else None
        saved = resume_meta(resume) if resume else None
        saved_config, saved_data = saved_run(resume, saved) if resume else (None, None)
        new_isv = given.pop("isv", ()) if resume else ()  # set on top of the checkpoint's bus
        settings = resume_settings(resume, saved_config, given, from_file, saved_data) if resume else given
        check_needs_data(settings, from_file)  # a resumed run's data: the checkpoint's
        if resume:  # a switch not given now follows its slot, as the bus will hold it (a --set on resuming wins)
            settings = switches_from_slots({**settings, "isv": merge_isv(kept_isv(settings.get("isv", ()), log),
                                                                          new_isv)}, keep=given)
        try:
            cfg = TrainConfig.for_backend(rt.backend, **settings)
        except ConfigError as e:
            raise config_file.blame(e, command_line)
        if cfg.n_steps == 0:  # a run of nothing wrote a run directory and checkpoint-0 (0 stays a library setting)
            raise UserError("--n-steps must be >= 1 (got 0)" + (f" (from {from_file['n_steps']})"
                                                                if "n_steps" in from_file else ""))
        log(f"foxc {__version__}: backend {rt.backend} — {rt.reason}")
        if cfg.graph == "on" and rt.backend == "reference":
            log(REFERENCE_GRAPH_NOTE)
        run_dir = RunDir.open(args.out, resuming=resume, step=saved["step"] if resume else 0,
                              overwrite=args.overwrite)
        out = run_dir.path
        try:
            data = load_data_logged(cfg, log, from_file.get("data"))
        except UserError as e:  # the checkpoint's data, not a --data given now: it may have moved
            if not resume or "data" in given or not cfg.data or data_found(cfg.data):
                raise  # what is wrong with data that is there (an --instrument it lacks) says itself
            raise UserError(f"--resume-from {resume}: the checkpoint's data: {e} (give --data PATH where it is now: "
                             "it is recognised by its content)") from None
        if resume:
            ran_on = check_same_data(resume, saved_data, data.source)  # the checkpoint's sha256 of this data
        trainer = open_trainer(rt, cfg, data, out)
        isv_changes = []
        if resume:
            step = trainer.resume(resume, ran_on)  # its saves record today's identity (data.source's)
            log(f"resumed from {resume} at step {step}")
            isv_changes = trainer.set_isv(new_isv)
            for name, old, new in isv_changes:
                log(f"ISV {name}: {old:g} → {new:g} (set on resuming)")
        kernels = KernelProfiler(rt, profile_window(args)) if args.profile else None
        trainer.set_profiling(args.profile_steps, kernels)
        window = args.profile_steps or profile_window(args)  # the steps profiled, told now if the run misses some
        outside = window and window.outside(trainer.steps_done, trainer.steps_done + cfg.n_steps)
        if outside:
            flag = "--profile-steps" if args.profile_steps else "--profile's window"
            print(f"{PROG}: note: {flag} {outside}", file=sys.stderr, flush=True)
        write_config(out, rt, trainer.cfg, data, config_file, args.resume_from, isv_changes)
        log(describe_training(trainer, cfg, out))
        board = None
        if args.tensorboard:  # a resumed run's: TensorBoard hides what a stopped run logged past the checkpoint
            board = TensorBoardLog(out, trainer.ts.isv, trainer.steps_done)
        with StopOnSignal() as stop:
            summary = trainer.train_logged(stop, board)
        final = None
        if args.checkpoint_on_exit or not stop.requested:
            final = trainer.save()
            summary["checkpoint"] = str(final)
            if kernels is not None:
                if kernels.steps:
                    kernels.report(out)
                elif not outside:  # a run stopped before the window (one outside it was noted before the first step)
                    log(f"--profile: no step of the run fell in the window {profile_window(args)}")
        write_json(out / "summary.json", summary)
        if stop.requested:
            where = (f"checkpoint {final}" if final is not None else f"the last checkpoint is the newest in {out} "
                     "(--checkpoint-on-exit also saves the step reached)")
            print(f"foxc.train: stopped by {stop.requested} at step {trainer.steps_done}; {where}", file=sys.stderr)
        else:
            log_done(log, summary, final, out)
        trainer.close()
        return 130 if stop.requested else 0
    except BaseException as e:  # a run that took no step leaves no directory behind, whatever stopped it
        if run_dir is not None and (trainer is None or trainer.steps_done == 0):
            run_dir.discard()
        if isinstance(e, DataError) and not str(e).startswith("--data"):
            # a cache's shard is read (and refused) when the dataset uploads or stages it, past load_data_logged
            raise UserError(f"--data {e}") from None
        raise


def run(rt, cfg, out: Path, log=lambda msg: None) -> dict:
    """A new run of `cfg` into `out` as `python -m foxc.train` makes one (no resume, profile or signals): the
    summary. For callers that run many (foxc.sweep)."""
    data = load_data_logged(cfg, log)
    trainer = open_trainer(rt, cfg, data, out)
    try:
        write_config(out, rt, trainer.cfg, data)
        log(describe_training(trainer, cfg, out))
        summary = trainer.train_logged()
        final = trainer.save()
        summary["checkpoint"] = str(final)
        write_json(out / "summary.json", summary)
        log_done(log, summary, final, out)
    finally:
        trainer.close()
    return summary


def load_data_logged(cfg, log, source: str | None = None):
    """The run's data (run_data), its validation summary logged; --data that cannot be read is refused naming the
    flag, and `source` (`--config FILE`) where it gave it."""
    try:
        data = run_data(cfg, log)
    except DataError as e:
        if not cfg.data:
            raise
        # a relative path in a --config file is the command line's: from here, not from the file's folder
        given = f" ({source} gave it; its paths are read from the current directory)" if source else ""
        raise UserError(f"--data {e}{given}") from None
    for line in data.market.report.summary().splitlines():
        log(line)
    return data


def data_found(spec: str) -> bool:
    """Whether --data `spec` names data where it is (a cache, or files expand finds), not moved or gone."""
    if is_cache(spec):
        return True
    try:
        expand(spec)
    except DataError:
        return False
    return True


def open_trainer(rt, cfg, data, out: Path):
    """The run's Trainer, its data's validation report written into `out` first."""
    data.market.report.write_json(out)
    return Trainer(rt, cfg, data.market, data.labels, out, data_meta=data.source, held=data.held,
                   optimum=data.optimum, val=data.val)


def write_config(out: Path, rt, cfg, data, config_file=None, resumed_from=None, isv_changes=()):
    """config.json: what ran, on what, with which settings and data."""
    write_json(out / "config.json", {"foxc_version": __version__, "backend": rt.backend, "reason": rt.reason,
                                     "device": rt.device_name, "config": cfg.as_dict(), "data": data.source,
                                     "config_file": config_file.as_dict() if config_file else None,
                                     "resumed_from": resumed_from,
                                     "isv_set_on_resume": [{"slot": n, "old": o, "new": v}
                                                           for n, o, v in isv_changes]})


def describe_training(trainer, cfg, out: Path) -> str:
    mode = (f"graph after {trainer.capture_after} eager warm-up steps" if trainer.use_graph else "eager")
    return (f"training: {cfg.n_steps} steps, B={cfg.n_backtests}, K={cfg.seq_len}, PER {cfg.per_capacity}, "
            f"n-step {cfg.n_step}, {cfg.precision}, {mode}; run directory {out}\n"
            + describe_residency(trainer.residency()))


def describe_residency(r: dict) -> str:
    if not r["rotating"]:
        return f"data: all of it on the device (--device-data-gb {r['device_data_gb']:g})"
    return (f"data: {r['shards']} segments rotate through {r['slots']} device slots of {r['slot_rows']:,} snapshots "
            f"(--device-data-gb {r['device_data_gb']:g}), one refilled every {r['rotate_every']} steps; "
            f"resident now: {', '.join(map(str, r['resident']))}")


def log_done(log, summary: dict, final, out: Path):
    run, wr = summary["this_run"], summary["this_run"]["win_rate"]
    sps = "-" if summary["sps"] is None else summary["sps"]  # too few frames to time an interval
    log(f"done: {summary['steps_this_run']} steps in {summary['seconds']:.1f} s ({sps} steps/s, "
        f"{'graph' if summary['graph'] else 'eager'}); exploring, {run['trades']} trades, win rate "
        f"{'-' if wr is None else f'{wr:.3f}'}; checkpoint {final}; metrics {out / 'metrics.jsonl'}")
    if summary["data_residency"]["rotating"]:
        r = summary["data_residency"]
        log(f"data: {r['rotations']} rotation(s) of {r['slots']} slots over {r['shards']} segments; resident at the "
            f"end: {', '.join(map(str, r['resident']))}")
    log(describe_selection(summary.get("selection")) + f"; validations and evaluations took {summary['eval_seconds']:.1f} s "
        "beside training")
    if summary["evaluation"]:
        log("held-out (greedy, the run's policy): " + describe_evaluation(summary["evaluation"]))


def kept_isv(saved, log) -> tuple[tuple[str, float], ...]:
    """The checkpoint's ISV settings still accepted; one no longer accepted leaves only the record (its value is in
    the checkpoint's bus either way)."""
    kept = []
    for name, value in saved:
        problem = setting_problem(name, float(value))
        if problem:
            log(f"note: the checkpoint's ISV setting {name} = {value:g} is no longer accepted ({problem}); "
                "the bus keeps the checkpoint's value")
        else:
            kept.append((name, float(value)))
    return tuple(kept)


def resume_meta(path: Path) -> dict:
    """The verified meta of the checkpoint --resume-from names."""
    try:
        return read_checkpoint(path, expected={}).meta
    except CheckpointError as e:
        raise UserError(f"--resume-from {e}") from None


class StopOnSignal:
    """Ctrl-C and SIGTERM request a clean stop at the next step (`requested`); a second one interrupts at once."""

    def __init__(self):
        self.requested, self._previous = None, {}

    def _handler(self, signum, frame):
        self.requested = signal.Signals(signum).name
        for sig, old in self._previous.items():  # a second signal: the default behaviour
            signal.signal(sig, old)

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, old in self._previous.items():
            signal.signal(sig, old)

    def __bool__(self):
        return self.requested is not None


if __name__ == "__main__":
    sys.exit(main())
