"""The axes of a sweep: what `--grid` and `--range` name, the values they take, and the points they make.

An axis names a training setting (foxc.trainer.config.SETTINGS, as a --config file spells it) or an ISV slot;
`isv.NAME` names the slot where a setting has the same name (`isv.n_step` sets only the slot). A value is read as its
flag reads it, so every error names the flag's rule. Settings that would change what the points are measured on, or
no result, are refused (REFUSED says why). Points: the grid axes' product, crossed with N draws over the range axes
(the same draws under every grid combination).
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from ..errors import UserError
from ..isv.registry import SLOTS, did_you_mean, slot
from ..rng import generator
from ..trainer.config import SETTINGS, merge_isv, parse_settings

MEASURED = "every point must be measured on the same data and held-out rows: give it as a training flag"
BOOKKEEPING = "it changes how a run logs, saves or runs, not what it learns: give it as a training flag"
REFUSED = {"seed": "each point runs with seeds 0..S-1: give --seeds S",
           **dict.fromkeys(("data", "instrument", "tick", "synthetic", "synthetic_rows", "fee_per_lot",
                            "lots_per_entry", "eval_rows", "holdout_frac"), MEASURED),
           **dict.fromkeys(("log_every", "checkpoint_every", "eval_every", "graph"), BOOKKEEPING)}
SLOT_PREFIX = "isv."
DRAWN_DIGITS = 4  # significant digits of a random draw: a value a flag can give again


@dataclass(frozen=True)
class Target:
    """What an axis sets: a training setting (`setting`) or an ISV slot (`slot`)."""
    name: str
    setting: str | None = None
    slot: str | None = None

    @classmethod
    def named(cls, name: str, flag: str) -> "Target":
        if name in REFUSED:
            raise UserError(f"{flag} {name}: not an axis: {REFUSED[name]}")
        if name in SETTINGS and name != "isv":  # isv.NAME: a slot
            return cls(name, setting=name)
        slot_name = name.removeprefix(SLOT_PREFIX)
        if any(s.name == slot_name for s in SLOTS):
            return cls(name, slot=slot_name)
        known = [k for k in [*SETTINGS, *(s.name for s in SLOTS)] if k not in REFUSED and k != "isv"]
        hint = did_you_mean(slot_name, known, "python -m foxc.isv lists the slots")
        raise UserError(f"{flag} {name}: no training setting or ISV slot of that name ({hint})")

    def parse(self, text: str, flag: str):
        """The value of `text`, read as the target's flag reads it."""
        option = f"--set={self.slot}" if self.slot else SETTINGS[self.setting].flag
        settings = parse_settings([f"{option}={text}"], f"{flag} {self.name}")
        return settings["isv"][0][1] if self.slot else settings[self.setting]

    def fragment(self, value) -> dict:
        """The TrainConfig settings that give `value`."""
        return {"isv": ((self.slot, float(value)),)} if self.slot else {self.setting: value}

    @functools.cached_property
    def number(self) -> str | None:
        """'int' or 'float' for a numeric target, else None."""
        if self.slot:
            valid = slot(self.slot).valid
            return "int" if getattr(valid, "integer", False) else "float"
        return SETTINGS[self.setting].kind.number


@dataclass(frozen=True)
class Axis:
    target: Target
    values: tuple = ()          # a grid axis's values
    bounds: tuple = ()          # a range axis's (lo, hi, log)

    @property
    def name(self) -> str:
        return self.target.name

    def describe(self) -> str:
        if self.values:
            return f"`{self.name}`: {', '.join(show(v) for v in self.values)}"
        lo, hi, log = self.bounds
        return f"`{self.name}`: {'log-uniform' if log else 'uniform'} in [{show(lo)}, {show(hi)}]" + \
            (" (integers)" if self.target.number == "int" else "")

    def draw(self, u: float):
        """The value at quantile `u` of the range (log-uniform with `log`), rounded to DRAWN_DIGITS
        significant digits or to an integer, and kept inside the range."""
        lo, hi, log = self.bounds
        if self.target.number == "int" and not log:
            return min(int(hi), int(math.floor(lo + u * (hi - lo + 1))))
        value = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if log else lo + u * (hi - lo)
        value = round(value) if self.target.number == "int" else float(f"{value:.{DRAWN_DIGITS}g}")
        return min(max(value, lo), hi)


def split_axis(text: str, flag: str) -> tuple[str, str]:
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise UserError(f"{flag} '{text}': expected NAME={'V1,V2,...' if flag == '--grid' else 'LO:HI[:log]'}")
    return name, rest


def grid_axis(text: str) -> Axis:
    """`NAME=V1,V2,...` (values separated by ';' when one holds commas, as horizons do)."""
    name, rest = split_axis(text, "--grid")
    target = Target.named(name, "--grid")
    parts = [p.strip() for p in rest.split(";" if ";" in rest else ",")]
    if not rest.strip():
        raise UserError(f"--grid {name}: no values")
    if "" in parts:
        raise UserError(f"--grid {name}: an empty value in '{rest}'")
    values = tuple(target.parse(p, "--grid") for p in parts)
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise UserError(f"--grid {name}: {show(twice[0])} given twice")
    return Axis(target, values=values)


def range_axis(text: str) -> Axis:
    """`NAME=LO:HI` (uniform) or `NAME=LO:HI:log` (log-uniform, for learning rates and such)."""
    name, rest = split_axis(text, "--range")
    target = Target.named(name, "--range")
    if target.number is None:
        raise UserError(f"--range {name}: not a number setting (give its values with --grid)")
    parts = rest.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise UserError(f"--range {name}: expected LO:HI or LO:HI:log, got '{rest}'")
    lo, hi = (target.parse(p.strip(), "--range") for p in parts[:2])
    log = len(parts) == 3
    if not lo < hi:
        raise UserError(f"--range {name}: LO {show(lo)} must be below HI {show(hi)}")
    if log and lo <= 0:
        raise UserError(f"--range {name}: a log range needs LO > 0, got {show(lo)}")
    return Axis(target, bounds=(lo, hi, log))


def parse_axes(grid: list[str], ranges: list[str], draws: int | None) -> list[Axis]:
    """The grid axes, then the range axes; a name or target given twice, ranges without --random or
    the reverse, or no axis at all are refused."""
    axes = [grid_axis(t) for t in grid] + [range_axis(t) for t in ranges]
    if ranges and not draws:
        raise UserError(f"--range {axes[len(grid)].name}: give --random N, the number of points to draw")
    if draws and not ranges:
        raise UserError("--random: give the axes to draw from with --range NAME=LO:HI[:log]")
    if not axes:
        raise UserError("nothing to sweep: give --grid NAME=V1,V2,... or --random N with --range NAME=LO:HI")
    for i, axis in enumerate(axes):
        same = [a for a in axes[:i] if (a.target.setting, a.target.slot) == (axis.target.setting, axis.target.slot)]
        if same:
            flag = "--grid" if axis.values else "--range"
            raise UserError(f"{flag} {axis.name}: a second axis of {same[0].name} (one axis per setting)")
    return axes


def points(axes: list[Axis], draws: int | None, sweep_seed: int) -> list[dict]:
    """Every point as {axis name: value}: the grid's product, crossed with `draws` random draws of the
    range axes (foxc.rng's generator of `sweep_seed`, stream "sweep")."""
    grid = [a for a in axes if a.values]
    ranged = [a for a in axes if a.bounds]
    combos = [dict(zip([a.name for a in grid], values)) for values in itertools.product(*(a.values for a in grid))]
    if not ranged:
        return combos
    u = generator(sweep_seed, "sweep").random((draws, len(ranged)))
    drawn = [{a.name: a.draw(float(q)) for a, q in zip(ranged, row)} for row in u]
    return [{**c, **d} for c in combos for d in drawn]


def settings_of(base: dict, axes: list[Axis], point: dict) -> dict:
    """The TrainConfig settings of a point: `base` with each axis's value set (an axis wins)."""
    settings = dict(base)
    for axis in axes:
        fragment = axis.target.fragment(point[axis.name])
        if "isv" in fragment:
            fragment["isv"] = merge_isv(settings.get("isv", ()), fragment["isv"])
        settings.update(fragment)
    return settings


def show(value) -> str:
    """A value as a flag would give it (horizons comma-separated)."""
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)
