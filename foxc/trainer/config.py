"""The training settings: one table (SETTINGS) from which TrainConfig, the flags of `python -m foxc.train`, a
`--config FILE.toml`'s keys, `--set NAME=VALUE`, a checkpoint's recorded settings and the sweep's axes derive: a value
is read by its setting's kind and checked by its rule wherever it comes from, the error naming the flag. The command
line wins over the file, the file over DEFAULTS; --set over the file's [isv] table, over the slots' bootstrap values.
"""
from __future__ import annotations

import argparse
import functools
import json
from dataclasses import MISSING, asdict, dataclass, field, make_dataclass, replace
from pathlib import Path
from typing import Callable

from ..agent.layout import ACTORS
from ..data.market import tick_arg
from ..data.markets import MARKETS
from ..data.select import HELP as INSTRUMENT_HELP, instrument_arg
from ..errors import UserError
from ..isv.registry import SLOTS, did_you_mean, isv_setting, setting_problem
from ..lobsim.passive import PassiveConfig
from ..lobsim.sim import MAX_LOTS_PER_ENTRY
from ..numbers import whole
from ..paths import PathArg, empty_path

# What `python -m foxc.train` runs when a setting is not given, over the table's defaults. The reference backend
# runs the same pipeline at a size a CPU finishes in about a minute: 3,000 steps on `easy`, whose edge a CPU-sized
# agent finds, validated every 500 (the last step too). On a GPU the products run on TF32 tensor cores: bench edge
# learns as much as in FP32 on every market (BENCHMARKS, "Precision"); on a CPU TF32 is only a rounding emulation.
DEFAULTS = {
    "cuda": dict(n_backtests=1024, n_steps=5000, seq_len=32, per_capacity=65536, synthetic_rows=2_000_000,
                 eval_every=1000, eval_rows=262_144, precision="tf32"),
    "reference": dict(n_backtests=32, n_steps=3000, seq_len=8, per_capacity=1024, synthetic_rows=200_000,
                      eval_every=0, eval_rows=8_192, rotate_every=50, synthetic="easy", val_every=500),
}
DATA_BUDGET_FRACTION = 0.5  # of the device's free memory, the default --device-data-gb
INT64_MAX = 2**63 - 1  # the largest integer setting: checkpoints' meta and kernel parameters are int64
MAX_DATA_GB = 1_000_000  # a petabyte, more than any device holds: --device-data-gb inf has no size in bytes
QUEUE_CHOICES = ("risk_averse", "power2", "power3", "power4")  # --queue-model: PassiveConfig's queue and power
MAX_FEE = 10_000_000.0  # price units: the simulator's largest price (LobSimConfig.max_price); x1e9 an int64
# settings that switch an ISV slot: setting -> (the slot, the setting's choices for the slot's values 0 and 1)
SWITCHES = {"gate": ("gate_enabled", ("off", "on")), "loss_clamp": ("reward_clamp_mode", ("symmetric", "seed"))}
DATA_HINT = "a file, directory, glob or prepared cache; leave --data out for synthetic data"  # for an empty --data


class ConfigError(UserError):
    """A setting's bad value, naming its flag; `slots`, `settings`: those a check across settings found at fault."""

    def __init__(self, message: str, slots: tuple[str, ...] = (), settings: tuple[str, ...] = ()):
        super().__init__(message)
        self.slots, self.settings = slots, settings


def _integer(v) -> bool:
    return isinstance(v, int) and whole(v)  # TOML's true is an int, a whole float is not one


def _horizons(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three comma-separated integers, got '{text}'") from None


@dataclass(frozen=True)
class Kind:
    """How a setting is written: `parse` its flag's text (argparse type), `accepts` a TOML or checkpoint value
    (else `expected`), `convert` that value to the setting's (an ArgumentTypeError refuses it)."""
    parse: Callable | None
    accepts: Callable
    expected: str
    hint: object  # the field's type
    convert: Callable = lambda v: v
    number: str | None = None  # "int" or "float": a sweep may draw it from a range
    respelled: bool = False  # a program's value must be as its flag reads it (what a resume compares)


INT = Kind(int, _integer, "an integer", int, number="int")
FLOAT = Kind(float, lambda v: _integer(v) or isinstance(v, float), "a number", float, float, number="float")
TEXT = Kind(None, lambda v: isinstance(v, str), "a string", str)
PATH = Kind(PathArg(DATA_HINT), TEXT.accepts, "a string", str)  # a path's "": refused by its rule, naming it
HORIZONS = Kind(_horizons, lambda v: isinstance(v, list) and all(map(_integer, v)),
                "a list of integers, e.g. [10, 50, 100]", tuple[int, ...], tuple)
INSTRUMENT = Kind(instrument_arg, lambda v: _integer(v) or isinstance(v, str),  # instrument = 5482 or "ESM4"
                  "an instrument_id (an integer) or a symbol (a string)", str, instrument_arg, respelled=True)
TICK = Kind(tick_arg, FLOAT.accepts, "a number", float, tick_arg, respelled=True)
SLOTS_SET = Kind(isv_setting, lambda v: isinstance(v, list) and all(
    isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and FLOAT.accepts(p[1]) for p in v),
    "a list of [slot, value] pairs", tuple[tuple[str, float], ...], lambda v: tuple((n, float(x)) for n, x in v))


def _flag_text(value) -> str:
    """A setting's value as its flag reads it (floats exactly, horizons comma-separated)."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return repr(value) if isinstance(value, float) else str(value)


def rule(ok: Callable, must: str) -> Callable:
    """A setting's rule: `ok(value)`, else "must ..." (after the flag) and the value."""
    return lambda v: None if ok(v) else f" {must} (got {_flag_text(v)})"


def between(lo, hi=None, text: str | None = None) -> Callable:
    return rule(lambda v: lo <= v and (hi is None or v <= hi),
                f"must be {text or (f'>= {lo}' if hi is None else f'{lo} to {hi}')}")


def _data_rule(v):  # a config file's data = "" too: not synthetic, silently
    return f": {problem}" if (problem := empty_path(v, DATA_HINT)) else None


def _device_gb_rule(v):
    return between(0, MAX_DATA_GB, f"at most {MAX_DATA_GB:,} (GB)")(v) if v > 0 else f" must be > 0 (got {v!r})"


REQUIRED = MISSING  # a default per backend only (DEFAULTS)


@dataclass(frozen=True)
class Setting:
    name: str
    flag: str
    kind: Kind
    default: object
    rule: Callable | None  # value -> what is wrong after the flag, or None
    help: str
    choices: tuple | None = None
    metavar: str | None = None

    def problem(self, value) -> str | None:
        """Why `value` may not be this setting's (the message names the flag); None: it may."""
        if value is None or self.kind is SLOTS_SET:
            return None
        if self.kind is INT and value > INT64_MAX:  # a checkpoint's meta and the kernels hold int64s
            return f"{self.flag} must be at most 2^63 - 1 (got {value})"
        if self.kind.respelled:  # a program's, a checkpoint's value: as its flag reads it, what is compared
            try:
                spelled = self.kind.parse(value)
            except argparse.ArgumentTypeError as e:
                return f"{self.flag}: {e}"
            if spelled != value:
                return f"{self.flag} must be given as its flag reads it, {spelled!r} (got {value!r})"
        if self.choices and value not in self.choices:
            return f"{self.flag} must be {', '.join(self.choices[:-1])} or {self.choices[-1]} (got {value})"
        why = self.rule(value) if self.rule else None
        return self.flag + why if why else None

    def value(self, value):
        """A TOML or checkpoint `value` of this setting, of its kind and in its range; ConfigError otherwise
        (the message to follow `name = value: `)."""
        if value is None and self.default is None:
            return None
        if not self.kind.accepts(value) or (self.choices and value not in self.choices):
            expected = ("one of " + ", ".join(f'"{c}"' for c in self.choices)) if self.choices else self.kind.expected
            raise ConfigError(f"expected {expected}")
        try:
            value = self.kind.convert(value)
        except argparse.ArgumentTypeError as e:
            raise ConfigError(str(e)) from None
        if problem := self.problem(value):
            raise ConfigError(problem)
        return value

    def help_text(self) -> str:
        """The help, with the default (per backend where they differ)."""
        cuda, ref = (DEFAULTS[b].get(self.name, self.default) for b in ("cuda", "reference"))
        if cuda in (None, MISSING, ()):
            return self.help
        shown = f"{_flag_text(cuda)} on CUDA, {_flag_text(ref)} on the reference" if cuda != ref else _flag_text(cuda)
        return f"{self.help} (default {shown})"


S = Setting
TABLE = (  # TrainConfig's fields, in this order (config.json's and the checkpoints' meta)
    S("n_backtests", "--n-backtests", INT, REQUIRED, between(1, 65536), "parallel backtests B, also the learning batch"),
    S("n_steps", "--n-steps", INT, REQUIRED, between(0), "training steps"),
    S("seq_len", "--seq-len", INT, REQUIRED, between(1, 128), "window K of snapshots per observation"),
    S("per_capacity", "--per-capacity", INT, REQUIRED,
      rule(lambda v: 2 <= v <= 1 << 20 and not v & (v - 1), "must be a power of two from 2 to 2^20"),
      "replay capacity, a power of two"),
    S("synthetic_rows", "--synthetic-rows", INT, REQUIRED, between(1000),
      "snapshots of synthetic data when --data is not given"),
    S("data", "--data", PATH, None, _data_rule, "MBP-10 data: a file, directory or glob (Databento Parquet/DBN, "
      "LOBSTER CSV); default: the synthetic market named by --synthetic"),
    S("instrument", "--instrument", INSTRUMENT, None, None, INSTRUMENT_HELP, metavar="ID"),
    S("tick", "--tick", TICK, None, None, "the tick features, labels and PnL are counted in, in price (default: "
      "each instrument's inferred from its prices); every instrument's price step must be a multiple of it",
      metavar="T"),
    S("synthetic", "--synthetic", TEXT, "default",
      rule(lambda v: v in MARKETS, f"must be one of {', '.join(MARKETS)}"),
      f"the named synthetic market to train on without --data: {', '.join(MARKETS)}", metavar="MARKET"),
    S("n_step", "--n-step", INT, 3, between(1, 8), "n of the n-step return, 1 to 8"),
    S("seed", "--seed", INT, 0, between(0, INT64_MAX, "0 to 2^63 - 1"), "seed of everything: data, weights, sampling"),
    S("precision", "--precision", TEXT, "f32", None, "matrix products in FP32 or TF32 tensor cores", ("f32", "tf32")),
    S("actor", "--actor", TEXT, "q", None, "who acts: the C51 head's means (q) or the policy head distilled from it",
      tuple(ACTORS)),
    S("gate", "--gate", TEXT, "off", None, "the seed's confidence gate on entries (ISV gate_enabled)", ("on", "off")),
    S("loss_clamp", "--loss-clamp", TEXT, "symmetric", None, "the reward clamp: symmetric and adaptive, or the seed's "
      "asymmetric loss clamp (ISV reward_clamp_mode)", ("symmetric", "seed")),
    S("lots_per_entry", "--lots", INT, 1, between(1, MAX_LOTS_PER_ENTRY, f"1 to {MAX_LOTS_PER_ENTRY:,}"),
      "lots per entry"),
    S("fee_per_lot", "--fee", FLOAT, None,
      between(0, MAX_FEE, f"0 to {MAX_FEE:,.0f}, the simulator's largest price"),
      "fee per lot per side, in price units (default: the synthetic market's own, else 0)"),
    S("episode_steps", "--episode-steps", INT, 2000, between(0),
      "steps per episode before a flat exit; 0: to the segment's end"),
    S("horizons", "--horizons", HORIZONS, (10, 50, 100),
      rule(lambda v: len(v) == 3 and all(h >= 1 for h in v), "needs three positive values"),
      "label horizons in snapshots, three comma-separated"),
    S("graph", "--graph", TEXT, "auto", None, "capture the whole step as one CUDA graph after warm-up: auto = on with "
      "CUDA", ("auto", "on", "off")),
    S("log_every", "--log-every", INT, 50, between(1), "steps between metrics records"),
    S("checkpoint_every", "--checkpoint-every", INT, 5000, between(0),
      "steps between checkpoints; 0: only the final one"),
    S("eval_every", "--eval-every", INT, 0, between(0),
      "steps between greedy evaluations on held-out rows; 0: only the final one"),
    S("eval_rows", "--eval-rows", INT, 8_192, between(1000), "held-out snapshots each evaluation walks"),
    S("holdout_frac", "--holdout", FLOAT, 0.1, rule(lambda v: 0 <= v < 1, "must be 0 (off) or between 0 and 1"),
      "with --data: the last fraction of the rows, held out of training for the evaluations; 0: none"),
    S("val_frac", "--val-frac", FLOAT, 0.2, rule(lambda v: 0 <= v < 1, "must be 0 (off) or between 0 and 1"),
      "the end of the training rows held out of training to choose the run's policy on: the best validated "
      "weights, or flat when none beats flat by 2 standard errors; 0: off, the final weights"),
    S("val_every", "--val-every", INT, 0, between(0),
      "steps between validations; 0: at steps 10, 20, 50, 100, 200, 500, ..."),
    S("isv", "--set", SLOTS_SET, (), None, "set an ISV slot (hyperparameter), e.g. --set lr_q=3e-4; repeatable; "
      "python -m foxc.isv lists the slots and their ranges", metavar="NAME=VALUE"),
    S("device_data_gb", "--device-data-gb", FLOAT, None, _device_gb_rule,
      "device memory for the training data (snapshots and label planes), in GB (default: half the free memory); "
      "data larger than this rotates through the device by segment"),
    S("rotate_every", "--rotate-every", INT, 1000, between(1),
      "when the data does not fit --device-data-gb: steps between refills of one resident slot with the next "
      "segment"),
    S("orders", "--orders", TEXT, "market", None, "the agent's orders: market orders only, or also resting quotes at "
      "the touch (four more actions: quote the bid, the ask, both, none; the state sees the orders' queue)",
      ("market", "passive")),
    S("queue_model", "--queue-model", TEXT, "risk_averse", None, "with --orders passive: how a resting order's place "
      "in the queue advances: only by trades at its price (risk_averse), or also by cancellations, split by the "
      "power n of the sizes behind and in front (power2, power3, power4)", QUEUE_CHOICES),
    S("maker_fee", "--maker-fee", FLOAT, 0.0, between(-MAX_FEE, MAX_FEE, f"±{MAX_FEE:,.0f}"),
      "with --orders passive: fee per lot of a resting order's fill, in price units; negative: a rebate"),
    S("entry_latency_ns", "--entry-latency-ns", INT, 0, between(0, 10**12, "0 to 10^12"),
      "with --orders passive: ns from a quote's decision to its arrival at the exchange"),
    S("cancel_latency_ns", "--cancel-latency-ns", INT, 0, between(0, 10**12, "0 to 10^12"),
      "with --orders passive: ns from a cancel's decision to its effect at the exchange"),
)
SETTINGS = {s.name: s for s in TABLE}


class _Config:
    """TrainConfig's methods; its fields are SETTINGS'."""

    def __post_init__(self):
        for s in TABLE:
            if problem := s.problem(getattr(self, s.name)):
                raise ConfigError(problem)
        for name, value in self.isv:
            if problem := setting_problem(name, value):
                raise ConfigError(f"--set {name}: {problem}")
        for setting, (name, choices) in SWITCHES.items():  # one value for the slot: config.json records what runs
            value, want = dict(self.isv).get(name), choices.index(getattr(self, setting))
            if value is not None and value != want:
                raise ConfigError(f"ISV {name} = {value:g} contradicts {SETTINGS[setting].flag} {getattr(self, setting)}"
                                  f", which sets {name} = {want} (give one of them)", (name,), (setting,))
        # the checks of a slot against another setting, on the values the run starts with
        values = {s.name: s.bootstrap for s in SLOTS} | {"n_step": float(self.n_step)} | dict(self.isv_overrides())
        if conflict := isv_conflict(values, self.n_step):
            raise ConfigError(*conflict)

    @classmethod
    def for_backend(cls, backend: str, **given):
        """`backend`'s defaults under every setting `given` that is not None (as_dict's lists as tuples); a switch
        (SWITCHES) not given is what its slot is set to, if it is."""
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

    def with_data_budget(self, free_bytes: int):
        """--device-data-gb resolved (given, or DATA_BUDGET_FRACTION of `free_bytes` to the MB): the budget
        config.json and the checkpoint record for a resume."""
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
        return MARKETS[self.synthetic].fee_per_lot if self.data is None else 0.0

    def passive(self, tick: int):
        """The simulator's resting-order settings (None with --orders market); `tick`: price × 1e9 of one tick."""
        return PassiveConfig.of_settings(self.as_dict(), tick)

    def isv_overrides(self) -> tuple[tuple[str, float], ...]:
        """The ISV slots set at the start of a run: the switches' slots, then every --set."""
        switches = ((name, float(choices.index(getattr(self, s)))) for s, (name, choices) in SWITCHES.items())
        return (*switches, *self.isv)

    def as_dict(self) -> dict:
        return asdict(self) | {"horizons": list(self.horizons), "isv": [list(kv) for kv in self.isv]}

    # settings that define the state's shapes and meaning: a resume must match them (--instrument through the data's
    # sha256, which mixes in the instrument_id it kept, however spelled)
    SHAPE_KEYS = ("n_backtests", "seq_len", "per_capacity", "n_step", "precision", "horizons", "lots_per_entry",
                  "fee_per_lot", "episode_steps", "data", "tick", "synthetic", "synthetic_rows", "seed", "actor",
                  "val_frac", "orders", "queue_model", "maker_fee", "entry_latency_ns", "cancel_latency_ns")


TrainConfig = make_dataclass(
    "TrainConfig", [(s.name, s.kind.hint) if s.default is REQUIRED else
                    (s.name, s.kind.hint if s.default is not None else s.kind.hint | None, field(default=s.default))
                    for s in TABLE], bases=(_Config,), frozen=True)
TrainConfig.__module__ = __name__  # pickled and printed as foxc.trainer.config.TrainConfig


def isv_conflict(values: dict, rings: int, live: bool = False) -> tuple[str, tuple[str, ...]] | None:
    """(why, the slots) where ISV `values` disagree with each other or with n-step rings of length `rings`, as a run
    starts or a live change arrives (`live`); None when they agree."""
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
    """Refuse a setting of synthetic data (a walk-forward's `synthetic_segments` too) given beside real `data`, which
    the run would ignore; `given`: None for not given; `sources`: setting -> where it came from, if not its flag."""
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
    """Refuse --instrument or --tick without real data, which the run would ignore (a resumed run's data: the
    checkpoint's); `sources` as above."""
    for key, what in (("instrument", "selects the rows of one instrument of"), ("tick", "sets the tick of")):
        if settings.get(key) is not None and not settings.get("data"):
            where = f" (from {sources[key]})" if sources and key in sources else ""
            raise ConfigError(f"--{key} {_flag_text(settings[key])}{where} {what} --data's files: without --data "
                              "(synthetic data) it would be ignored (give --data PATH)")


def switches_from_slots(settings: dict, keep=()) -> dict:
    """`settings` without each switch whose slot their isv sets (unless `keep` names it): for_backend takes it from
    the slot, a checkpoint's or one set on resuming, which is what runs."""
    slots = dict(settings.get("isv", ()))
    return {k: v for k, v in settings.items() if k not in SWITCHES or SWITCHES[k][0] not in slots or k in keep}


def merge_isv(*lists) -> tuple[tuple[str, float], ...]:
    """(name, value) lists merged, later ones winning: one entry per slot, where its name first appeared."""
    merged: dict[str, float] = {}
    for pairs in lists:
        merged.update((str(name), float(value)) for name, value in pairs)
    return tuple(merged.items())


def add_config_arguments(ap) -> list[argparse.Action]:
    """Every setting's flag (default None: the file's or the backend's) and --config; the settings' actions."""
    actions = [ap.add_argument(s.flag, dest=s.name, type=s.kind.parse, choices=s.choices, metavar=s.metavar,
                               help=s.help_text(), **({"action": "append"} if s.kind is SLOTS_SET else {}))
               for s in TABLE]
    ap.add_argument("--config", dest="config_file", metavar="FILE.toml", type=PathArg("a .toml file"),
                    help="training settings by name (n_backtests = 256) and an [isv] table of slots; the command "
                         "line's flags and --set win over the file's")
    return actions


def config_settings(namespace) -> dict:
    """The settings a parsed namespace gives (those not given are left out)."""
    return {k: v for k in SETTINGS if (v := getattr(namespace, k, None)) is not None}


class _Refusing(argparse.ArgumentParser):
    def error(self, message):
        raise ConfigError(f"{self.prog}: {message}")


def parse_settings(argv: list[str], prog: str = "training flags") -> dict:
    """The settings of training flags (a --config file's under them); ConfigError, not exit, for a bad one (the caller
    may be a walk-forward worker)."""
    ap = _Refusing(prog=prog, add_help=False)
    add_config_arguments(ap)
    args = ap.parse_args(argv)
    given = config_settings(args)
    return ConfigFile.read(args.config_file).under(given) if args.config_file else given


def inline_config_file(argv: list[str], owned: dict[str, str] | None = None) -> list[str]:
    """`argv` with `--config FILE` replaced by the file's flags, ahead of the others (which still win): what a worker
    without the file reads. `owned`: setting -> flag of those the caller sets itself, refused in the file."""
    ap = _Refusing(prog="training flags", add_help=False, allow_abbrev=False)
    ap.add_argument("--config", dest="config_file", type=PathArg("a .toml file"))  # "": not no file, silently
    args, rest = ap.parse_known_args(argv)
    if not args.config_file:
        return list(argv)
    return [*ConfigFile.read(args.config_file).refuse(owned or {}).as_flags(), *rest]


@functools.cache
def setting_actions() -> dict[str, argparse.Action]:
    """Each setting's argparse action (by setting name), as add_config_arguments declares it."""
    return {a.dest: a for a in add_config_arguments(_Refusing(add_help=False))}


@dataclass
class ConfigFile:
    """A `--config FILE.toml`: settings by name and an [isv] table, each value read by Setting.value; errors name the
    file and the key. ConfigFile(None, {}): no file."""
    path: Path | None
    settings: dict

    def __bool__(self) -> bool:
        return self.path is not None

    @classmethod
    def read(cls, path) -> "ConfigFile":
        path = Path(path)
        settings = {}
        for key, value in _read_toml(path).items():
            if key == "isv":
                settings["isv"] = _isv_table(path, value)
                continue
            if key not in SETTINGS:
                raise ConfigError(f"--config {path}: {_unknown_key(key)}")
            try:
                settings[key] = SETTINGS[key].value(value)
            except ConfigError as e:
                raise ConfigError(f"--config {path}: {key} = {_toml(value)}: {e}") from None
        return cls(path, settings)

    def refuse(self, owned: dict[str, str]) -> "ConfigFile":
        """This file, unless it gives a setting `owned` (setting -> flag) by the command for every run it starts."""
        for name, flag in owned.items():
            if name in self.settings:
                raise ConfigError(f"--config {self.path}: {name}: set by this command for every run it starts "
                                  f"(give {flag} on its command line)")
        return self

    def under(self, given: dict) -> dict:
        """The settings `given` (the command line's) over the file's; ISV slots merged, given's winning."""
        merged = {**self.settings, **given}
        if "isv" in self.settings or "isv" in given:
            merged["isv"] = merge_isv(self.settings.get("isv", ()), given.get("isv", ()))
        return merged

    def blame(self, error: ConfigError, given: dict) -> ConfigError:
        """`error` naming this file where a slot or setting it faults came from the file, not the command line's
        `given`."""
        from_file = {name for name, _ in self.settings.get("isv", ())} - {name for name, _ in given.get("isv", ())}
        if from_file.intersection(error.slots):
            return ConfigError(f"--config {self.path}: [isv] {str(error).removeprefix('ISV ')}", error.slots)
        if (self.settings.keys() - given.keys()).intersection(error.settings):  # the flag the slot is at odds with
            return ConfigError(f"--config {self.path}: {error}", error.slots, error.settings)
        return error

    def sources(self, command_line: dict) -> dict:
        """setting -> "--config FILE" for each the file gives and `command_line` does not (what errors name)."""
        return dict.fromkeys(self.settings.keys() - command_line.keys(), f"--config {self.path}")

    def as_dict(self) -> dict:
        """config.json's record of the file and its settings."""
        settings = {k: list(v) if isinstance(v, tuple) else v for k, v in self.settings.items() if k != "isv"}
        return {"path": str(self.path.resolve()), "settings": settings, "isv": dict(self.settings.get("isv", ()))}

    def as_flags(self) -> list[str]:
        """The file's settings as flags (FLAG=VALUE: a value starting with '-' stays one)."""
        return [f"--set={n}={v!r}" for n, v in self.settings.get("isv", ())] + [
            f"{SETTINGS[k].flag}={_flag_text(v)}" for k, v in self.settings.items() if k != "isv"]


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


def _unknown_key(key: str) -> str:
    """Why `key` is no setting: the setting a flag's spelling stands for, or names close to it."""
    for s in TABLE:
        if key in (s.flag.lstrip("-"), s.flag.lstrip("-").replace("-", "_")):
            return f"unknown setting '{key}' (the setting of {s.flag} is {s.name})"
    hint = did_you_mean(key, SETTINGS, "a config file holds training settings by name, e.g. n_backtests, and an [isv] "
                                       "table")
    return f"unknown setting '{key}' ({hint})"


def _isv_table(path: Path, table) -> tuple[tuple[str, float], ...]:
    """The [isv] table's slots, each checked as --set checks it."""
    if not isinstance(table, dict):
        raise ConfigError(f"--config {path}: isv must be a table of slots ([isv], then NAME = VALUE lines)")
    for name, value in table.items():
        if not FLOAT.accepts(value):
            raise ConfigError(f"--config {path}: [isv] {name} = {_toml(value)}: expected a number")
        if problem := setting_problem(name, float(value)):
            raise ConfigError(f"--config {path}: [isv] {name}: {problem}")
    return tuple((name, float(value)) for name, value in table.items())
