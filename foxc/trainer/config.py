"""The training configuration: every setting of a run, its defaults per backend, and its checks.

Settings come from the command line's flags, over a `--config FILE.toml` (ConfigFile), over the
backend's defaults; ISV slots from `--set NAME=VALUE`, over the file's [isv] table, over the
registry's bootstrap values.
"""
from __future__ import annotations

import argparse
import functools
import difflib
import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..agent.layout import ACTORS
from ..errors import UserError
from ..data.market import add_tick_flag, tick_arg
from ..data.select import add_instrument_flag, instrument_arg
from ..isv.registry import SLOTS, isv_setting, setting_problem
from ..paths import PathArg, empty_path
from ..data.markets import MARKETS
from ..lobsim.sim import MAX_LOTS_PER_ENTRY

# What `python -m foxc.train` runs when a setting is not given. The reference backend runs the
# same pipeline at a size a CPU finishes in about a minute.
DEFAULTS = {
    "cuda": dict(n_backtests=1024, n_steps=5000, seq_len=32, per_capacity=65536, synthetic_rows=2_000_000,
                 eval_every=1000, eval_rows=262_144),
    # a CPU run that learns in under a minute: 3,000 steps on `easy`, whose edge a CPU-sized agent finds,
    # validated every 500 (the last step too)
    "reference": dict(n_backtests=32, n_steps=3000, seq_len=8, per_capacity=1024, synthetic_rows=200_000,
                      eval_every=0, eval_rows=8_192, rotate_every=50, synthetic="easy", val_every=500),
}
DATA_BUDGET_FRACTION = 0.5  # of the device's free memory, the default --device-data-gb
INT64_MAX = 2**63 - 1  # the largest integer setting: checkpoints' meta and kernel parameters are int64
MAX_DATA_GB = 1_000_000  # a petabyte, more than any device holds: --device-data-gb inf has no size in bytes
MAX_FEE = 10_000_000.0  # price units: the simulator's largest price (LobSimConfig.max_price); x1e9 an int64
# settings that switch an ISV slot: setting -> (the slot, the setting's choices for the slot's values 0 and 1)
SWITCHES = {"gate": ("gate_enabled", ("off", "on")), "loss_clamp": ("reward_clamp_mode", ("symmetric", "seed"))}
DATA_HINT = "a file, directory, glob or prepared cache; leave --data out for synthetic data"  # for an empty --data


class ConfigError(UserError):
    """A setting is out of range; the message names the flag. `slots`, `settings`: the ISV slots and the
    settings a check of slots against other settings found at fault."""

    def __init__(self, message: str, slots: tuple[str, ...] = (), settings: tuple[str, ...] = ()):
        super().__init__(message)
        self.slots, self.settings = slots, settings


@dataclass(frozen=True)
class TrainConfig:
    n_backtests: int
    n_steps: int
    seq_len: int
    per_capacity: int
    synthetic_rows: int
    data: str | None = None  # a file, directory or glob; None: the synthetic market named by `synthetic`
    instrument: str | None = None  # --instrument: one instrument's rows of files that interleave several (data's)
    tick: float | None = None  # --tick: the tick the data is counted in, in price; None: inferred from its prices
    synthetic: str = "default"  # a named synthetic market (foxc.data.markets)
    n_step: int = 3
    seed: int = 0
    precision: str = "f32"
    actor: str = "q"  # who acts: the C51 head (q) or the policy head distilled from it (policy)
    gate: str = "off"  # the seed's confidence gate on entries (ISV gate_enabled)
    loss_clamp: str = "symmetric"  # the reward clamp: symmetric adaptive, or the seed's asymmetric (ISV reward_clamp_mode)
    lots_per_entry: int = 1
    fee_per_lot: float | None = None  # in price units per lot per side; None: the synthetic market's own, else 0
    episode_steps: int = 2000  # 0: episodes run to the end of their segment
    horizons: tuple[int, ...] = (10, 50, 100)
    graph: str = "auto"
    log_every: int = 50
    checkpoint_every: int = 5000
    eval_every: int = 0  # steps between greedy evaluations on held-out rows; 0: only at the end
    eval_rows: int = 8_192  # held-out snapshots each evaluation walks
    holdout_frac: float = 0.1  # real data: the last fraction of the rows, held out for the evaluations; 0: none
    val_frac: float = 0.2  # the end of the training rows, held out of training to choose the run's policy; 0: off
    val_every: int = 0  # steps between validations; 0: at 10, 20, 50, 100, 200, 500, ... (foxc.evaluate.selection)
    isv: tuple[tuple[str, float], ...] = ()  # ISV slots set at the start of the run (name, value)
    device_data_gb: float | None = None  # device memory for the training data; None: DATA_BUDGET_FRACTION of free
    rotate_every: int = 1000  # steps between refills of one slot when the data does not fit (foxc.data.resident)

    def __post_init__(self):
        checks = [
            (1 <= self.n_backtests <= 65536, "--n-backtests must be 1 to 65536"),
            (self.n_steps >= 0, "--n-steps must be >= 0"),
            (1 <= self.seq_len <= 128, "--seq-len must be 1 to 128"),
            (2 <= self.per_capacity <= 1 << 20 and not self.per_capacity & (self.per_capacity - 1),
             "--per-capacity must be a power of two from 2 to 2^20"),
            (1 <= self.n_step <= 8, "--n-step must be 1 to 8"),
            (0 <= self.seed < 2**63, "--seed must be 0 to 2^63 - 1"),
            (self.precision in ("f32", "tf32"), "--precision must be f32 or tf32"),
            (self.actor in ACTORS, f"--actor must be {' or '.join(ACTORS)}"),
            (self.gate in ("on", "off"), "--gate must be on or off"),
            (self.loss_clamp in ("symmetric", "seed"), "--loss-clamp must be symmetric or seed"),
            (1 <= self.lots_per_entry <= MAX_LOTS_PER_ENTRY, f"--lots must be 1 to {MAX_LOTS_PER_ENTRY:,}"),
            (self.fee_per_lot is None or 0 <= self.fee_per_lot <= MAX_FEE,
             f"--fee must be 0 to {MAX_FEE:,.0f}, the simulator's largest price"),
            (self.episode_steps >= 0, "--episode-steps must be >= 0"),
            (len(self.horizons) == 3 and all(h >= 1 for h in self.horizons), "--horizons needs three positive values"),
            (self.graph in ("auto", "on", "off"), "--graph must be auto, on or off"),
            (self.log_every >= 1, "--log-every must be >= 1"),
            (self.checkpoint_every >= 0, "--checkpoint-every must be >= 0"),
            (self.eval_every >= 0, "--eval-every must be >= 0"),
            (self.eval_rows >= 1000, "--eval-rows must be >= 1000"),
            (0.0 <= self.holdout_frac < 1.0, "--holdout must be 0 (off) or between 0 and 1"),
            (0.0 <= self.val_frac < 1.0, "--val-frac must be 0 (off) or between 0 and 1"),
            (self.val_every >= 0, "--val-every must be >= 0"),
            (self.synthetic_rows >= 1000, "--synthetic-rows must be >= 1000"),
            (self.device_data_gb is None or self.device_data_gb > 0, "--device-data-gb must be > 0"),
            (self.device_data_gb is None or self.device_data_gb <= MAX_DATA_GB,
             f"--device-data-gb must be at most {MAX_DATA_GB:,} (GB)"),
            (self.rotate_every >= 1, "--rotate-every must be >= 1"),
        ]
        for dest, action in setting_actions().items():  # a checkpoint's meta and the kernels hold int64s
            value = getattr(self, dest)
            if action.type is int and isinstance(value, int) and value > INT64_MAX:
                raise ConfigError(f"{action.option_strings[0]} must be at most 2^63 - 1 (got {value})")
        for ok, message in checks:
            if not ok:
                flag = message.split()[0]
                value = next(getattr(self, dest) for dest, a in setting_actions().items() if flag in a.option_strings)
                raise ConfigError(f"{message} (got {_flag_text(value)})")
        if problem := empty_path(self.data, DATA_HINT):  # a config file's data = "" too: not synthetic, silently
            raise ConfigError(f"--data: {problem}")
        for name, read in (("instrument", instrument_arg), ("tick", tick_arg)):  # a program's, a checkpoint's value:
            value = getattr(self, name)  # as its flag reads it, what is compared
            try:
                spelled = value if value is None else read(value)
            except argparse.ArgumentTypeError as e:
                raise ConfigError(f"--{name}: {e}") from None
            if spelled != value:
                raise ConfigError(f"--{name} must be given as its flag reads it, {spelled!r} (got {value!r})")
        if self.synthetic not in MARKETS:
            raise ConfigError(f"--synthetic must be one of {', '.join(MARKETS)} (got '{self.synthetic}')")
        for name, value in self.isv:
            problem = setting_problem(name, value)
            if problem:
                raise ConfigError(f"--set {name}: {problem}")
        for setting, (name, choices) in SWITCHES.items():  # one value for the slot: config.json records what runs
            value, want = dict(self.isv).get(name), choices.index(getattr(self, setting))
            if value is not None and value != want:
                flag = setting_actions()[setting].option_strings[0]
                raise ConfigError(f"ISV {name} = {value:g} contradicts {flag} {getattr(self, setting)}, which sets "
                                  f"{name} = {want} (give one of them)", (name,), (setting,))
        # the checks of a slot against another setting, on the values the run starts with
        values = {s.name: s.bootstrap for s in SLOTS} | {"n_step": float(self.n_step)} | dict(self.isv_overrides())
        conflict = isv_conflict(values, self.n_step)
        if conflict:
            raise ConfigError(*conflict)

    @classmethod
    def for_backend(cls, backend: str, **given) -> "TrainConfig":
        """Defaults of `backend` overridden by every setting in `given` that is not None (as_dict's lists
        taken back as tuples, so a saved configuration gives the same config); a switch (SWITCHES) not given
        is what its slot is set to, if it is."""
        settings = {**DEFAULTS[backend], **{k: v for k, v in given.items() if v is not None}}
        if "isv" in settings:
            settings["isv"] = merge_isv(settings["isv"])
        slots = dict(settings.get("isv", ()))
        for setting, (name, choices) in SWITCHES.items():  # a switch not given follows its slot's --set
            if setting not in settings and slots.get(name) in (0.0, 1.0):
                settings[setting] = choices[int(slots[name])]
        if "horizons" in settings:
            settings["horizons"] = tuple(settings["horizons"])
        if type(settings.get("instrument")) is int:  # an id given as a number: recorded as its flag gives it
            settings["instrument"] = str(settings["instrument"])
        return cls(**settings)

    def with_data_budget(self, free_bytes: int) -> "TrainConfig":
        """This configuration with --device-data-gb resolved: given, or DATA_BUDGET_FRACTION of `free_bytes`
        (to the MB), so that config.json and the checkpoint record the budget a resume must use."""
        if self.device_data_gb is not None:
            return self
        return replace(self, device_data_gb=int(DATA_BUDGET_FRACTION * free_bytes / 1e6) / 1e3)

    @property
    def data_budget_bytes(self) -> int | None:
        return None if self.device_data_gb is None else int(self.device_data_gb * 1e9)

    @property
    def fee(self) -> float:
        """The fee per lot per side in price units: the flag's, else the synthetic market's own, else 0."""
        if self.fee_per_lot is not None:
            return self.fee_per_lot
        if self.data is None:
            return MARKETS[self.synthetic].fee_per_lot
        return 0.0

    def isv_overrides(self) -> tuple[tuple[str, float], ...]:
        """The ISV slots this configuration sets at the start of a run: the gate and clamp switches,
        then every --set (a switch's slot agrees with it)."""
        switches = ((name, float(choices.index(getattr(self, s)))) for s, (name, choices) in SWITCHES.items())
        return (*switches, *self.isv)

    def as_dict(self) -> dict:
        return asdict(self) | {"horizons": list(self.horizons), "isv": [list(kv) for kv in self.isv]}

    # settings that define the state's shapes and meaning: a resume must match them (--instrument through the data's
    # sha256, which mixes in the instrument_id it kept, however spelled)
    SHAPE_KEYS = ("n_backtests", "seq_len", "per_capacity", "n_step", "precision", "horizons", "lots_per_entry",
                  "fee_per_lot", "episode_steps", "data", "tick", "synthetic", "synthetic_rows", "seed", "actor",
                  "val_frac")


def isv_conflict(values: dict, rings: int, live: bool = False) -> tuple[str, tuple[str, ...]] | None:
    """(why, the slots) when ISV `values` disagree with each other or with n-step rings of length
    `rings`; None when they agree. Checked when a run starts and when a live change arrives (`live`)."""
    n = values["n_step"]
    if n > rings:  # the rings are allocated once; a resume keeps the checkpoint's --n-step (SHAPE_KEYS)
        remedy = (", fixed for the run: a running trainer cannot take it, nor can a resume (it keeps the checkpoint's "
                  f"--n-step); set n_step to at most {rings}, or start a new run with --n-step {n:g}" if live else
                  f" (give --n-step {n:g} too)")
        return f"ISV n_step = {n:g} is above --n-step {rings}, the length of the n-step rings{remedy}", ("n_step",)
    lo, hi = values["reward_clamp_min"], values["reward_clamp_max"]
    if lo > hi:
        return f"ISV reward_clamp_min = {lo:g} is above reward_clamp_max = {hi:g}", ("reward_clamp_min", "reward_clamp_max")
    return None


def check_synthetic_beside_data(given: dict, sources: dict | None = None) -> None:
    """Refuse a setting of synthetic data (`synthetic`, `synthetic_rows`, a walk-forward's `synthetic_segments`)
    given beside real `data`, naming both: the run would ignore it without a word. `given`: the settings given,
    by name, None for not given (train, sweep and walk-forward alike); `sources`: setting -> where it came from,
    when not its flag."""
    if not given.get("data"):
        return
    sources = sources or {}
    named = lambda key: (f"--{key.replace('_', '-')} {_flag_text(given[key])}"  # noqa: E731
                         + (f" (from {sources[key]})" if key in sources else ""))
    for key in ("synthetic", "synthetic_rows", "synthetic_segments"):
        if given.get(key) is not None:
            raise ConfigError(f"{named(key)} is a setting of synthetic data: beside {named('data')} it would be "
                              "ignored (give one of them)")


def check_needs_data(settings: dict, sources: dict | None = None) -> None:
    """Refuse --instrument or --tick without real data (the synthetic market has one instrument and its own tick): the
    run would ignore it. `settings`: the run's, by name (a resumed run's with the checkpoint's data); `sources` as
    above."""
    for key, what in (("instrument", "selects the rows of one instrument of"), ("tick", "sets the tick of")):
        if settings.get(key) is not None and not settings.get("data"):
            where = f" (from {sources[key]})" if sources and key in sources else ""
            raise ConfigError(f"--{key} {_flag_text(settings[key])}{where} {what} --data's files: without --data "
                              "(synthetic data) it would be ignored (give --data PATH)")


def switches_from_slots(settings: dict, keep=()) -> dict:
    """`settings` without each switch (SWITCHES) whose slot their isv sets, unless `keep` names it, so that
    for_backend takes it from the slot: a checkpoint's slot, or one set on resuming, is what runs."""
    slots = dict(settings.get("isv", ()))
    return {k: v for k, v in settings.items() if k not in SWITCHES or SWITCHES[k][0] not in slots or k in keep}


def merge_isv(*lists) -> tuple[tuple[str, float], ...]:
    """ISV settings (name, value) of several lists, later ones winning: one entry per slot, each in
    the place its name first appeared."""
    merged: dict[str, float] = {}
    for pairs in lists:
        merged.update((str(name), float(value)) for name, value in pairs)
    return tuple(merged.items())


def horizons_setting(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three comma-separated integers, got '{text}'") from None


def add_config_arguments(ap: argparse.ArgumentParser) -> list[argparse.Action]:
    """The flags of every TrainConfig setting (`python -m foxc.train`, and the training flags a
    walk-forward passes to its folds), and --config; each defaults to None: the backend's default
    (or the file's). Returns the settings' actions."""
    actions = []

    def add(*flags, **kw):
        actions.append(ap.add_argument(*flags, **kw))
    add("--data", type=PathArg(DATA_HINT),
        help="MBP-10 data: a file, directory or glob (Databento Parquet/DBN, LOBSTER CSV); "
             "default: the synthetic market named by --synthetic")
    add_instrument_flag(add)
    add_tick_flag(add)
    add("--synthetic", metavar="MARKET",
        help="the named synthetic market to train on without --data: easy, default (the default), null, noisy")
    add("--n-backtests", type=int, help="parallel backtests B, also the learning batch (default 1024 on CUDA, 32 on the reference)")
    add("--n-steps", type=int, help="training steps (default 5000 on CUDA, 150 on the reference)")
    add("--seq-len", type=int, help="window K of snapshots per observation (default 32 on CUDA, 8 on the reference)")
    add("--per-capacity", type=int, help="replay capacity, a power of two (default 65536 on CUDA, 1024 on the reference)")
    add("--n-step", type=int, help="n of the n-step return, 1 to 8 (default 3)")
    add("--seed", type=int, help="seed of everything: data, weights, sampling (default 0)")
    add("--precision", choices=("f32", "tf32"), help="matrix products in FP32 (default) or TF32 tensor cores")
    add("--actor", choices=tuple(ACTORS), help="who acts: the C51 head's means (q, default) or the policy head distilled from it")
    add("--gate", choices=("on", "off"), help="the seed's confidence gate on entries (default off)")
    add("--loss-clamp", choices=("symmetric", "seed"),
        help="the reward clamp: symmetric and adaptive (default) or the seed's asymmetric loss clamp")
    add("--lots", dest="lots_per_entry", type=int, help="lots per entry (default 1)")
    add("--fee", dest="fee_per_lot", type=float,
        help="fee per lot per side, in price units (default: the synthetic market's own, else 0)")
    add("--episode-steps", type=int, help="steps per episode before a flat exit; 0: to the segment's end (default 2000)")
    add("--horizons", type=horizons_setting, help="label horizons in snapshots, three comma-separated (default 10,50,100)")
    add("--synthetic-rows", type=int, help="snapshots of synthetic data when --data is not given")
    add("--graph", choices=("auto", "on", "off"),
        help="capture the whole step as one CUDA graph after warm-up: auto (default) = on with CUDA")
    add("--log-every", type=int, help="steps between metrics records (default 50)")
    add("--checkpoint-every", type=int, help="steps between checkpoints; 0: only the final one (default 5000)")
    add("--eval-every", type=int, help="steps between greedy evaluations on held-out rows (default 1000 on CUDA, "
                                       "0 on the reference: only the final one)")
    add("--eval-rows", type=int, help="held-out snapshots each evaluation walks")
    add("--holdout", dest="holdout_frac", type=float,
        help="with --data: the last fraction of the rows, held out of training for the evaluations; 0: none, no "
             "held-out evaluation (default 0.1)")
    add("--val-frac", type=float,
        help="the end of the training rows held out of training to choose the run's policy on: the best validated "
             "weights, or flat when none beats flat by 2 standard errors; 0: off, the final weights (default 0.2)")
    add("--val-every", type=int, help="steps between validations (default: at steps 10, 20, 50, 100, 200, 500, ...)")
    add("--device-data-gb", type=float,
        help="device memory for the training data (snapshots and label planes), in GB (default: half the free "
             "memory; 1 on the reference backend); data larger than this rotates through the device by segment")
    add("--rotate-every", type=int,
        help="when the data does not fit --device-data-gb: steps between refills of one resident slot with the "
             "next segment (default 1000 on CUDA, 50 on the reference)")
    add("--set", dest="isv", action="append", type=isv_setting, metavar="NAME=VALUE",
        help="set an ISV slot (hyperparameter), e.g. --set lr_q=3e-4; repeatable; python -m foxc.isv lists the "
             "slots and their ranges")
    ap.add_argument("--config", dest="config_file", metavar="FILE.toml", type=PathArg("a .toml file"),
                    help="training settings by name (n_backtests = 256) and an [isv] table of slots; the command "
                         "line's flags and --set win over the file's")
    return actions


def config_settings(namespace) -> dict:
    """The TrainConfig settings a parsed namespace gives (those not given are left out)."""
    names = {f.name for f in fields(TrainConfig)}
    return {k: v for k, v in vars(namespace).items() if k in names and v is not None}


class _Refusing(argparse.ArgumentParser):
    def error(self, message):
        raise ConfigError(f"{self.prog}: {message}")


def parse_settings(argv: list[str], prog: str = "training flags") -> dict:
    """The TrainConfig settings of a list of training flags (with a --config file's under them); an
    unknown flag or a bad value raises ConfigError naming it (no exit: the caller may be a
    walk-forward worker)."""
    ap = _Refusing(prog=prog, add_help=False)
    add_config_arguments(ap)
    args = ap.parse_args(argv)
    given = config_settings(args)
    return ConfigFile.read(args.config_file).under(given) if args.config_file else given


def inline_config_file(argv: list[str], owned: dict[str, str] | None = None) -> list[str]:
    """Training flags with `--config FILE` replaced by the flags the file stands for, ahead of the
    others (so the command line's still win): what a worker without the file can read. `owned`:
    settings the caller sets itself (setting -> its flag), refused in the file."""
    ap = _Refusing(prog="training flags", add_help=False, allow_abbrev=False)
    ap.add_argument("--config", dest="config_file", type=PathArg("a .toml file"))  # "": not no file, silently
    args, rest = ap.parse_known_args(argv)
    if not args.config_file:
        return list(argv)
    config = ConfigFile.read(args.config_file).refuse(owned or {})
    return [*config.as_flags(), *rest]


@functools.cache
def setting_actions() -> dict[str, argparse.Action]:
    """Each TrainConfig setting's flag (by setting name), as add_config_arguments declares it."""
    return {a.dest: a for a in add_config_arguments(_Refusing(add_help=False))}


@dataclass
class ConfigFile:
    """A `--config FILE.toml`: training settings by name (as TrainConfig spells them) and an [isv]
    table of slots, every key and value checked as it is read; errors name the file and the key."""
    path: Path
    settings: dict

    def refuse(self, owned: dict[str, str]) -> "ConfigFile":
        """This file, unless it gives a setting a command sets itself for every run it starts (setting -> its flag)."""
        for name, flag in owned.items():
            if name in self.settings:
                raise ConfigError(f"--config {self.path}: {name}: set by this command for every run it starts "
                                  f"(give {flag} on its command line)")
        return self

    @classmethod
    def read(cls, path) -> "ConfigFile":
        path = Path(path)
        doc = _read_toml(path)
        actions, settings = setting_actions(), {}
        for key, value in doc.items():
            if key == "isv":
                settings["isv"] = _isv_table(path, value)
                continue
            if key not in actions:
                raise ConfigError(f"--config {path}: {_unknown_key(key, actions)}")
            settings[key] = _typed(path, key, value, actions[key])
            try:  # the setting's own range, as its flag's: the others may come from the command line
                TrainConfig.for_backend("reference", **{key: settings[key]})
            except ConfigError as e:
                raise ConfigError(f"--config {path}: {key} = {_toml(value)}: {e}") from None
        return cls(path, settings)

    def under(self, given: dict) -> dict:
        """The settings `given` (the command line's) over the file's; ISV slots merged, given's winning."""
        merged = {**self.settings, **given}
        if "isv" in self.settings or "isv" in given:
            merged["isv"] = merge_isv(self.settings.get("isv", ()), given.get("isv", ()))
        return merged

    def blame(self, error: ConfigError, given: dict) -> ConfigError:
        """`error` naming this file when a slot it faults came from the file's [isv], not from --set, or a
        setting from the file, not from its flag (`given`: the command line's settings)."""
        from_file = {name for name, _ in self.settings.get("isv", ())} - {name for name, _ in given.get("isv", ())}
        if from_file.intersection(error.slots):
            return ConfigError(f"--config {self.path}: [isv] {str(error).removeprefix('ISV ')}", error.slots)
        if (self.settings.keys() - given.keys()).intersection(error.settings):  # the flag the slot is at odds with
            return ConfigError(f"--config {self.path}: {error}", error.slots, error.settings)
        return error

    def sources(self, command_line: dict) -> dict:
        """setting -> "--config FILE" for each setting the file gives and the command line's (`command_line`) does
        not: where an error about it should send the user."""
        return dict.fromkeys(self.settings.keys() - command_line.keys(), f"--config {self.path}")

    def as_dict(self) -> dict:
        """What config.json records: the file, and the settings it gave."""
        settings = {k: list(v) if isinstance(v, tuple) else v for k, v in self.settings.items() if k != "isv"}
        return {"path": str(self.path.resolve()), "settings": settings, "isv": dict(self.settings.get("isv", ()))}

    def as_flags(self) -> list[str]:
        """The command-line flags that give the file's settings."""
        actions, flags = setting_actions(), []
        for key, value in self.settings.items():
            if key == "isv":
                flags += [f"--set={name}={v!r}" for name, v in value]
            else:  # FLAG=VALUE: a value starting with '-' stays a value
                flags.append(f"{actions[key].option_strings[0]}={_flag_text(value)}")
        return flags


def _flag_text(value) -> str:
    """A setting's value as its flag reads it (floats exactly, horizons comma-separated)."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return repr(value) if isinstance(value, float) else str(value)


def _read_toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: tomli, the same parser (a dependency there, pyproject's marker)
        import tomli as tomllib
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"--config {path}: is a directory, not a file") from None
    except OSError as e:
        raise ConfigError(f"--config {path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--config {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"--config {path}: not valid TOML: {e}") from None


def _toml(value) -> str:
    """A value as the file spells it (near enough: JSON's strings, booleans and lists are TOML's)."""
    return json.dumps(value, default=str)


def _unknown_key(key: str, actions: dict) -> str:
    """Why `key` is no setting: the setting a flag's spelling stands for, or close names."""
    for dest, action in actions.items():
        if any(key in (flag.lstrip("-"), flag.lstrip("-").replace("-", "_")) for flag in action.option_strings):
            return f"unknown setting '{key}' (the setting of {action.option_strings[0]} is {dest})"
    close = difflib.get_close_matches(key, [*actions, "isv"], n=3, cutoff=0.6)
    hint = (f"did you mean {' or '.join(close)}?" if close
            else "a config file holds training settings by name, e.g. n_backtests, and an [isv] table")
    return f"unknown setting '{key}' ({hint})"


def _typed(path: Path, key: str, value, action: argparse.Action):
    """The file's value of a setting as its flag would give it; a wrong type names the file and key."""
    integer = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731 (TOML's true is an int)
    if action.type is int and integer(value):
        return value
    if action.type is float and (integer(value) or isinstance(value, float)):
        return float(value)
    if action.type is horizons_setting and isinstance(value, list) and all(integer(v) for v in value):
        return tuple(value)
    if (action.type is instrument_arg and (integer(value) or isinstance(value, str))  # instrument = 5482 or "ESM4"
            or action.type is tick_arg and (integer(value) or isinstance(value, float))):  # tick = 0.25
        try:
            return action.type(value)
        except argparse.ArgumentTypeError as e:
            raise ConfigError(f"--config {path}: {key} = {_toml(value)}: {e}") from None
    text = action.type is None or isinstance(action.type, PathArg)  # a path's "": refused by TrainConfig, naming it
    if text and isinstance(value, str) and (action.choices is None or value in action.choices):
        return value
    raise ConfigError(f"--config {path}: {key} = {_toml(value)}: expected {_expected(action)}")


def _expected(action: argparse.Action) -> str:
    if action.choices is not None:
        return "one of " + ", ".join(f'"{c}"' for c in action.choices)
    return {int: "an integer", float: "a number", horizons_setting: "a list of integers, e.g. [10, 50, 100]",
            instrument_arg: "an instrument_id (an integer) or a symbol (a string)", tick_arg: "a number"}.get(
        action.type, "a string")


def _isv_table(path: Path, table) -> tuple[tuple[str, float], ...]:
    """The [isv] table's slots, each checked as --set checks it (naming the file and the slot)."""
    if not isinstance(table, dict):
        raise ConfigError(f"--config {path}: isv must be a table of slots ([isv], then NAME = VALUE lines)")
    pairs = []
    for name, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"--config {path}: [isv] {name} = {_toml(value)}: expected a number")
        problem = setting_problem(name, float(value))
        if problem:
            raise ConfigError(f"--config {path}: [isv] {name}: {problem}")
        pairs.append((name, float(value)))
    return tuple(pairs)
