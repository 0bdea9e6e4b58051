"""The single source of truth for ISV slots: index, name, bootstrap value, valid settings and why.

Indices are append-only (checkpoints store the bus by index; tests/golden/isv_slots.txt holds them): add new slots at
the end. cuda/include/foxc/isv_slots.h is generated from this table (`python -m foxc.isv.header --write`), without the
ranges, so a range changes no kernel. A slot is a setting (its Range: what `--set NAME=VALUE` and a config file's
[isv] table may give it) or Internal: state the trainer's controllers own, or a slot no kernel reads.
"""
from __future__ import annotations

import argparse
import difflib
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """The values a user may set a slot to: lo..hi, each end open or closed; `why` when the
    bounds are not plain from the slot's doc."""
    lo: float
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    why: str = ""

    def __contains__(self, value: float) -> bool:
        if self.integer and value != int(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def __str__(self) -> str:
        lo, hi = f"{self.lo:g}", f"{self.hi:g}"
        if self.integer:
            return f"{lo} or {hi}" if self.hi == self.lo + 1 else f"{lo}..{hi}"
        if math.isinf(self.hi):
            return f"{'>' if self.lo_open else '>='} {lo}"
        if math.isinf(self.lo):
            return f"{'<' if self.hi_open else '<='} {hi}"
        return f"{'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"

    def requirement(self) -> str:
        """What a value must be, as the end of "NAME must be ..."."""
        if self.integer:
            return f"{self}" if self.hi == self.lo + 1 else f"an integer from {self.lo:g} to {self.hi:g}"
        return f"in {self}" if self.lo > -math.inf and self.hi < math.inf else f"{self}"


@dataclass(frozen=True)
class Internal:
    """A slot no user sets: `state` the trainer's kernels write as it trains, or `unused` (read by
    no kernel, kept for its index)."""
    kind: str
    why: str = ""

    def __str__(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Slot:
    index: int
    name: str
    bootstrap: float
    valid: Range | Internal
    doc: str

    @property
    def macro(self) -> str:
        return "ISV_" + self.name.upper()

    @property
    def settable(self) -> bool:
        return isinstance(self.valid, Range)

    @property
    def read(self) -> bool:
        """Whether a kernel reads the slot (an unused one is kept only for its index)."""
        return not (isinstance(self.valid, Internal) and self.valid.kind == "unused")


# The step counter lives in two float slots because float32 counts integers
# exactly only up to 2^24 (16.7M steps: hours at 2,000 steps/s).
STEP_WRAP = 1 << 24

LR = Range(0.0, 1.0, lo_open=True)
FRACTION = Range(0.0, 1.0)  # probabilities, fractions of the batch, EMA rates
STEPS = Range(0.0)  # step counts; 0: at once
NONNEGATIVE = Range(0.0)  # 0: off
POSITIVE = Range(0.0, lo_open=True)
SWITCH = Range(0, 1, integer=True)
STATE = Internal("state")
UNUSED = Internal("unused")
CLAMP_BOUND = Internal("state", "the reward controller sets it every step from reward_clamp_min/max, "
                                "or from reward_clamp_win in reward_clamp_mode 1")
ZERO_ON_SUPPORT = "the support must hold a flat position's return, 0: v_min < 0 < v_max"

_TABLE = [
    ("step_lo", 0.0, STATE, "training steps modulo 2^24 (exact in float32); incremented on the device"),
    ("step_hi", 0.0, STATE, "how many times step_lo wrapped at 2^24; step = step_hi * 2^24 + step_lo"),
    ("lr_encoder", 3e-4, LR, "AdamW learning rate of the encoder; Adam's usual 3e-4 for a small model"),
    ("lr_q", 1e-4, LR, "AdamW learning rate of the C51 Q head; lower than the encoder's, as bootstrapped targets move"),
    ("lr_policy", 1e-4, LR, "AdamW learning rate of the policy head; matches Q so actor and critic move together"),
    ("lr_value", 3e-4, LR, "AdamW learning rate of the value head (a plain regression)"),
    ("lr_perception", 3e-4, LR, "AdamW learning rate of the perception heads (supervised BCE)"),
    ("gamma", 0.99, Range(0.0, 0.9999, why="the fused controller holds it there: an undiscounted return has no fixed point"),
     "discount per step; a 100-step effective horizon, the longest label horizon"),
    ("tau", 0.005, Range(0.0, 1.0, lo_open=True, why="0 would freeze the target network for good"),
     "target network soft-update rate per step (200-step time constant)"),
    ("n_step", 3.0, Range(1, 8, integer=True, why="at most --n-step too: the n-step rings hold that many entries"),
     "n of the n-step return in use (1 to 8, at most the ring's allocated length)"),
    ("per_alpha", 0.6, FRACTION, "PER priority exponent; 0.6 from the PER paper's proportional variant"),
    ("per_beta", 0.4, FRACTION, "PER importance-sampling exponent, annealed towards 1 by the controller"),
    ("reward_clamp_lo", -5.0, CLAMP_BOUND,
     "lower reward clamp after PopArt scaling (ticks while PopArt is frozen at var 1)"),
    ("reward_clamp_hi", 5.0, CLAMP_BOUND,
     "upper reward clamp after PopArt scaling (ticks while PopArt is frozen at var 1)"),
    ("reward_scale", 1.0, POSITIVE, "multiplier on the raw reward (the equity change in ticks per lot) before normalisation"),
    ("popart_mean", 0.0, STATE, "PopArt running mean of the raw reward"),
    ("popart_var", 1.0, STATE, "PopArt running variance of the raw reward; 1 so the first steps are unscaled"),
    ("popart_rate", 0.0, FRACTION, "PopArt EMA rate; 0 (frozen at var 1): rewards are in ticks, a scale that holds still, and a moving scale would move every target under the C51 support"),
    ("gate_threshold", 0.5, Range(0.05, 0.95, why="the gate's controller holds it there"),
     "confidence gate (gate_enabled): an entry whose Boltzmann probability is below this becomes HOLD; the controller keeps it in [0.05, 0.95]"),
    ("drawdown_penalty_rate", 0.0, NONNEGATIVE, "reward penalty per unit of the open trade's normalised drawdown per step (penalty only); 0: off, it taxes holding, where the edge is"),
    ("stop_loss_threshold", 0.0, NONNEGATIVE, "open trade's drawdown from its peak equity, over mean_abs_pnl_ema, that forces a flat exit; 0: off"),
    ("mean_abs_pnl_ema", 1.0, STATE, "EMA of |PnL| per closed trade: the drawdown normaliser; 1 until trades close"),
    *[(f"loss_ema_{head}", 0.0, STATE, f"EMA of the {loss} loss")
      for head, loss in (("q", "C51 cross-entropy"), ("pi", "policy"), ("v", "value"), ("bce", "perception BCE"))],
    ("c51_v_min", -10.0, Range(-math.inf, 0.0, hi_open=True, why=ZERO_ON_SUPPORT),
     "lowest atom of the C51 support, in ticks (the reward's unit)"),
    ("c51_v_max", 10.0, Range(0.0, lo_open=True, why=ZERO_ON_SUPPORT),
     "highest atom of the C51 support, in ticks: discounted returns of one lot over ~100 snapshots"),
    ("entropy_coef", 0.01, UNUSED, "not read: the policy head is distilled from Q and has no entropy bonus (kept for the slot index)"),
    ("grad_clip_norm", 1.0, Range(0.0, why="0: no clipping"), "global gradient-norm clip per update"),
    ("rl_to_encoder_lambda", 0.0, UNUSED, "not read: replayed states are not the rows the encoder just encoded, so the RL heads do not train the encoder (kept for the slot index)"),
    ("exploration_floor", 0.0, UNUSED, "not read: exploration is the epsilon schedule explore_eps_* (kept for the slot index)"),
    ("loss_ema_rate", 0.01, Range(0.0, 1.0, lo_open=True, why="0 would freeze every EMA and the controllers reading them"),
     "EMA rate of the loss EMAs (about 100 steps)"),
    ("lr_min", 1e-6, FRACTION, "floor of every plateau-decayed learning rate"),
    ("lr_decay_factor", 0.5, Range(0.0, 1.0, why="1: never decays; 0: straight to lr_min"),
     "learning-rate multiplier when a head's loss plateaus"),
    ("lr_plateau_patience", 2000.0, Range(1.0), "steps without improvement before a head's learning rate decays"),
    ("lr_plateau_improvement", 0.995, Range(0.0, 1.0, lo_open=True, why="above 1 a worse loss would count as an improvement"),
     "a loss EMA below best x this counts as an improvement (0.5 %)"),
    ("lr_warmup_steps", 1000.0, STEPS, "steps before plateau detection starts (losses are noisy while the buffer fills)"),
    *[row for head, loss in (("q", "C51"), ("pi", "policy"), ("v", "value"), ("bce", "perception"))
      for row in ((f"best_loss_{head}", 0.0, STATE, f"plateau controller: best {loss} loss EMA seen"),
                  (f"plateau_count_{head}", 0.0, STATE, f"plateau controller: steps since the {loss} loss improved"))],
    ("per_beta_anneal_steps", 100000.0, Range(0.0, why="0: beta is 1 from the first step"),
     "steps over which PER beta rises linearly to 1 (full IS correction)"),
    *[(name, bootstrap, UNUSED, "not read (no entropy controller: see entropy_coef)") for name, bootstrap in
      (("entropy_target", 1.0), ("entropy_coef_rate", 1e-3), ("entropy_coef_min", 1e-4), ("entropy_coef_max", 0.1))],
    ("action_entropy_ema", 0.0, STATE, "EMA of the sampling distribution's entropy (rate loss_ema_rate)"),
    ("reward_clip_frac_ema", 0.0, STATE, "EMA of the fraction of scaled rewards that hit a clamp bound (rate loss_ema_rate)"),
    ("reward_clip_target", 0.01, FRACTION, "adaptive clamp: widen when more than 1 % of rewards clip, narrow below 0.25 %"),
    ("reward_clamp_rate", 0.001, FRACTION, "relative step of the adaptive clamp bounds per step"),
    ("reward_clamp_min", 5.0, Range(0.0, lo_open=True, why="at most reward_clamp_max too"),
     "the adaptive clamp never narrows below +-5 (ticks): a reversal across a wide spread costs several"),
    ("reward_clamp_max", 10.0, Range(0.0, lo_open=True, why="at least reward_clamp_min too"),
     "the adaptive clamp never widens beyond +-10 (ticks)"),
    ("explore_eps_start", 1.0, FRACTION, "probability per step that an exploration segment starts (a random valid action, its position then held), at step 0"),
    ("explore_eps_end", 0.02, FRACTION, "that probability after explore_eps_steps; greedy evaluation never explores"),
    ("explore_eps_steps", 1000.0, STEPS, "steps over which epsilon falls linearly from explore_eps_start to explore_eps_end"),
    ("distill_temperature", 0.25, Range(0.0, lo_open=True, why="Q is divided by it"),
     "the policy head learns softmax(Q / this) over the valid actions, Q in ticks"),
    ("explore_hold_steps", 32.0, Range(1.0, why="a segment ends with probability 1 / this per step"),
     "mean length of an exploration segment in steps (geometric): about the signal's persistence, so exploring shows what holding earns"),
    ("gate_enabled", 0.0, SWITCH, "1: the seed's confidence gate acts (off by default: measured no better, BENCHMARKS.md)"),
    ("gate_hold_target", 0.5, FRACTION, "the HOLD fraction the gate's threshold controller steers towards"),
    ("gate_lambda", 0.01, Range(0.0, why="below 0 it would steer away from the target"),
     "the gate threshold's step per unit of (target - HOLD fraction EMA) per step"),
    ("gate_max_hold_frac", 0.85, FRACTION, "above this HOLD fraction EMA the gate lets every entry through (a 15 % floor of trading)"),
    ("gate_warmup_steps", 1000.0, STEPS, "steps before the gate acts"),
    ("hold_frac_ema", 0.0, STATE, "EMA (rate 0.1) of the fraction of backtests whose action is HOLD"),
    ("reward_clamp_mode", 0.0, SWITCH, "0: symmetric clamp widened and narrowed by the clip fraction; 1: the seed's asymmetric loss clamp"),
    ("reward_clamp_win", 1.0, POSITIVE, "the seed's clamp (mode 1): rewards above this are clipped; the loss side adapts as a multiple of it"),
    ("reward_pos_ema", 0.0, STATE, "EMA (rate loss_ema_rate) of the mean positive raw reward"),
    ("reward_neg_ema", 0.0, STATE, "EMA (rate loss_ema_rate) of the mean magnitude of the negative raw rewards"),
    ("price_unit_ticks", 1.0, Internal("run", "the trainer sets it from the training data's median spread"),
     "the agent's unit of price in ticks: the training data's median spread; prices, spreads, rewards and Q are in it"),
    ("entry_margin", 0.0, NONNEGATIVE,
     "greedy acting opens or reverses a position only when the C51 mean of that action beats staying out "
     "(HOLD when flat, the exit when reversing) by more than this, in price units (spreads): an unsure agent stays flat"),
]


SLOTS: tuple[Slot, ...] = tuple(Slot(i, name, float(boot), valid, doc) for i, (name, boot, valid, doc) in enumerate(_TABLE))
N_SLOTS = len(SLOTS)
_BY_NAME = {s.name: s for s in SLOTS}


def slot_index(name: str) -> int:
    try:
        return _BY_NAME[name].index
    except KeyError:
        raise KeyError(f"no ISV slot named '{name}'") from None


def slot(name: str) -> Slot:
    return SLOTS[slot_index(name)]


def did_you_mean(name: str, known, otherwise: str) -> str:
    """A hint for a name that names nothing: the known names close to it, else `otherwise`."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(close)}?" if close else otherwise


def unknown_slot(name: str) -> str:
    """Why `name` names no slot, with the names it may have meant."""
    return f"no ISV slot named '{name}' ({did_you_mean(name, _BY_NAME, 'python -m foxc.isv lists them')})"


def setting_problem(name: str, value: float) -> str | None:
    """Why a user may not set slot `name` to `value` (None: they may), to follow the name."""
    s = _BY_NAME.get(name)
    if s is None:
        return unknown_slot(name)
    if isinstance(s.valid, Internal):
        if s.valid.kind in ("state", "run"):
            return f"state the trainer owns, not a setting ({s.valid.why or 'its kernels write it as it trains'})"
        return "read by no kernel (kept for its slot index): setting it would change nothing"
    if not math.isfinite(value):
        return f"must be a finite number (got {value})"
    if value not in s.valid:
        return f"must be {s.valid.requirement()} (got {value:g})" + (f"; {s.valid.why}" if s.valid.why else "")
    return None


def isv_setting(text: str) -> tuple[str, float]:
    """NAME=VALUE of --set (the name and the value's range are checked with the configuration)."""
    name, sep, value = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with a number, got '{text}'") from None
