"""The training configuration: every setting of a run, its defaults per backend, and its checks."""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, fields

from ..agent.layout import ACTORS
from ..isv.registry import SLOTS, setting_problem

# What `python -m foxc.train` runs when a setting is not given. The reference backend runs the
# same pipeline at a size a CPU finishes in about a minute.
DEFAULTS = {
    "cuda": dict(n_backtests=1024, n_steps=5000, seq_len=32, per_capacity=65536, synthetic_rows=2_000_000,
                 eval_every=1000, eval_rows=262_144),
    "reference": dict(n_backtests=32, n_steps=150, seq_len=8, per_capacity=1024, synthetic_rows=200_000,
                      eval_every=0, eval_rows=8_192),
}


class ConfigError(ValueError):
    """A setting is out of range; the message names the flag. `slots`: the ISV slots a check of
    slots against other settings found at fault."""

    def __init__(self, message: str, slots: tuple[str, ...] = ()):
        super().__init__(message)
        self.slots = slots


@dataclass(frozen=True)
class TrainConfig:
    n_backtests: int
    n_steps: int
    seq_len: int
    per_capacity: int
    synthetic_rows: int
    data: str | None = None  # a file, directory or glob; None: the synthetic market named by `synthetic`
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
    holdout_frac: float = 0.1  # real data: the last fraction of the rows, held out for the evaluations
    isv: tuple[tuple[str, float], ...] = ()  # ISV slots set at the start of the run (name, value)

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
            (self.lots_per_entry >= 1, "--lots must be >= 1"),
            (self.fee_per_lot is None or self.fee_per_lot >= 0, "--fee must be >= 0"),
            (self.episode_steps >= 0, "--episode-steps must be >= 0"),
            (len(self.horizons) == 3 and all(h >= 1 for h in self.horizons), "--horizons needs three positive values"),
            (self.graph in ("auto", "on", "off"), "--graph must be auto, on or off"),
            (self.log_every >= 1, "--log-every must be >= 1"),
            (self.checkpoint_every >= 0, "--checkpoint-every must be >= 0"),
            (self.eval_every >= 0, "--eval-every must be >= 0"),
            (self.eval_rows >= 1000, "--eval-rows must be >= 1000"),
            (0.0 < self.holdout_frac < 1.0, "--holdout must be between 0 and 1"),
            (self.synthetic_rows >= 1000, "--synthetic-rows must be >= 1000"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"{message} (got {self._value_for(message)})")
        from ..data.markets import MARKETS
        if self.synthetic not in MARKETS:
            raise ConfigError(f"--synthetic must be one of {', '.join(MARKETS)} (got '{self.synthetic}')")
        for name, value in self.isv:
            problem = setting_problem(name, value)
            if problem:
                raise ConfigError(f"--set {name}: {problem}")
        self._check_isv_together()

    def _check_isv_together(self):
        """The checks of a slot against another setting, on the values the run starts with."""
        values = {s.name: s.bootstrap for s in SLOTS} | {"n_step": float(self.n_step)} | dict(self.isv_overrides())
        n = values["n_step"]
        if n > self.n_step:
            raise ConfigError(f"ISV n_step = {n:g} is above --n-step {self.n_step}, the length of the n-step rings "
                              f"(give --n-step {n:g} too)", ("n_step",))
        lo, hi = values["reward_clamp_min"], values["reward_clamp_max"]
        if lo > hi:
            raise ConfigError(f"ISV reward_clamp_min = {lo:g} is above reward_clamp_max = {hi:g}",
                              ("reward_clamp_min", "reward_clamp_max"))

    def _value_for(self, message: str):
        flag = message.split()[0].lstrip("-").replace("-", "_")
        aliases = {"lots": "lots_per_entry", "fee": "fee_per_lot", "holdout": "holdout_frac"}
        return getattr(self, aliases.get(flag, flag), "?")

    @classmethod
    def for_backend(cls, backend: str, **given) -> "TrainConfig":
        """Defaults of `backend` overridden by every setting in `given` that is not None."""
        settings = dict(DEFAULTS[backend])
        settings.update({k: v for k, v in given.items() if v is not None})
        if "isv" in settings:
            settings["isv"] = merge_isv(settings["isv"])
        return cls(**settings)

    @property
    def fee(self) -> float:
        """The fee per lot per side in price units: the flag's, else the synthetic market's own, else 0."""
        if self.fee_per_lot is not None:
            return self.fee_per_lot
        if self.data is None:
            from ..data.markets import MARKETS
            return MARKETS[self.synthetic].fee_per_lot
        return 0.0

    def isv_overrides(self) -> tuple[tuple[str, float], ...]:
        """The ISV slots this configuration sets at the start of a run: the gate and clamp switches,
        then every --set (which wins)."""
        return (("gate_enabled", 1.0 if self.gate == "on" else 0.0),
                ("reward_clamp_mode", 1.0 if self.loss_clamp == "seed" else 0.0), *self.isv)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["horizons"] = list(self.horizons)
        d["isv"] = [list(kv) for kv in self.isv]
        return d

    # settings that define the state's shapes and meaning: a resume must match them
    SHAPE_KEYS = ("n_backtests", "seq_len", "per_capacity", "n_step", "precision", "horizons", "lots_per_entry",
                  "fee_per_lot", "episode_steps", "data", "synthetic", "synthetic_rows", "seed", "actor")

    @staticmethod
    def field_names() -> list[str]:
        return [f.name for f in fields(TrainConfig)]


def merge_isv(*lists) -> tuple[tuple[str, float], ...]:
    """ISV settings (name, value) of several lists, later ones winning: one entry per slot, each in
    the place its name first appeared."""
    merged: dict[str, float] = {}
    for pairs in lists:
        merged.update((str(name), float(value)) for name, value in pairs)
    return tuple(merged.items())


def isv_setting(text: str) -> tuple[str, float]:
    """NAME=VALUE of --set (the name and the value's range are checked with the configuration)."""
    name, sep, value = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with a number, got '{text}'") from None


def horizons_setting(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three comma-separated integers, got '{text}'") from None


def add_config_arguments(ap: argparse.ArgumentParser):
    """The flags of every TrainConfig setting (`python -m foxc.train`, and the training flags a
    walk-forward passes to its folds); each defaults to None: the backend's default."""
    add = ap.add_argument
    add("--data", help="MBP-10 data: a file, directory or glob (Databento Parquet/DBN, LOBSTER CSV); "
                       "default: the synthetic market named by --synthetic")
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
        help="with --data: the last fraction of the rows, held out of training for the evaluations (default 0.1)")
    add("--set", dest="isv", action="append", type=isv_setting, metavar="NAME=VALUE",
        help="set an ISV slot (hyperparameter), e.g. --set lr_q=3e-4; repeatable; python -m foxc.isv lists the "
             "slots and their ranges")


def config_settings(namespace) -> dict:
    """The TrainConfig settings a parsed namespace gives (those not given are left out)."""
    names = set(TrainConfig.field_names())
    return {k: v for k, v in vars(namespace).items() if k in names and v is not None}


class _Refusing(argparse.ArgumentParser):
    def error(self, message):
        raise ConfigError(f"{self.prog}: {message}")


def parse_settings(argv: list[str], prog: str = "training flags") -> dict:
    """The TrainConfig settings of a list of training flags; an unknown flag or a bad value raises
    ConfigError naming it (no exit: the caller may be a walk-forward worker)."""
    ap = _Refusing(prog=prog, add_help=False)
    add_config_arguments(ap)
    return config_settings(ap.parse_args(argv))
