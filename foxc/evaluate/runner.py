"""A policy walked over a data window with learning off, on the LOB simulator: the one evaluator.

The window is cut into at most `n_backtests` consecutive chunks (never across a segment), each one backtest's
episode walked once from its first snapshot to its last: every snapshot is acted on once, and each chunk ends flat
(the forced close counted as a trade). The equity curve is the running sum, in snapshot order, of each step's change
of mark-to-mid equity net of fees (exact int64 money); its final value equals the trades' net PnL, which is checked.

A policy is a callable `policy(ctx: PolicyContext) -> actions` or `-> (actions, probs)`: int [B] actions, and the
float [B, 5] distribution they were chosen from (optional; it gives the policy entropy); `ctx.greedy` says whether to
take the most probable action or to sample (`ctx.rng`). It may carry `name` and `is_baseline`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..component import Component
from ..data.record import segment_runs, snapshot_records
from ..driver import open_runtime
from ..lobsim.env import LobEnv
from ..lobsim.kernels import BOOK_OK, snapshot_verdicts
from ..lobsim.layout import HOLD, N_ACTIONS, N_PASSIVE_ACTIONS, TRADE_DTYPE, split_actions
from ..lobsim.passive import PassiveConfig
from ..numbers import whole
from ..rng import generator
from .metrics import summarize

EVAL_TRADE_DTYPE = np.dtype(TRADE_DTYPE.descr[:-1] + [("chunk", np.uint32)])


@dataclass
class PolicyContext:
    records: np.ndarray   # the evaluated window: SNAPSHOT_DTYPE records, time order
    cursor: np.ndarray    # int64 [B]: index into `records` of the snapshot each backtest acts on
    active: np.ndarray    # bool [B]: False once a backtest has finished its chunk (its action is ignored)
    lots: np.ndarray      # int32 [B]: position before this step (> 0 long, < 0 short)
    step: int             # steps taken so far
    tick: int             # price units per tick
    greedy: bool
    rng: np.random.Generator
    sim: object = None    # the simulator's device state (foxc.lobsim.LobSim): what a device policy reads

    @property
    def obs(self) -> np.ndarray:
        """The snapshot each backtest acts on, [B] SNAPSHOT_DTYPE."""
        return self.records[self.cursor]


def split_decision(out, n: int, n_actions: int = N_ACTIONS) -> tuple[np.ndarray, np.ndarray | None]:
    """A policy's return value as (actions int32 [n], probs float64 [n, n_actions] or None), checked."""
    actions, probs = (out if isinstance(out, tuple) else (out, None))
    actions = np.asarray(actions)
    if actions.shape != (n,) or not np.issubdtype(actions.dtype, np.integer):
        raise ValueError(f"a policy must return integer actions of shape ({n},), got {actions.dtype}{actions.shape}")
    if probs is not None:
        probs = np.asarray(probs, np.float64)
        if probs.shape == (n, N_ACTIONS) and n_actions > N_ACTIONS:  # a market-order policy beside quoting ones
            probs = np.pad(probs, ((0, 0), (0, n_actions - N_ACTIONS)))
        if probs.shape != (n, n_actions):
            raise ValueError(f"a policy's probs must have shape ({n}, {n_actions}), got {probs.shape}")
        ok = np.isfinite(probs).all(axis=1) & (probs >= 0).all(axis=1) & (np.abs(probs.sum(axis=1) - 1) <= 1e-3)
        if not ok.all():  # NaN gave an entropy of 0, rows summing past 1 a negative one
            i = int(np.argmin(ok))
            raise ValueError(f"a policy's probs must be finite, non-negative and sum to 1 per row (its action "
                             f"distribution), got {probs[i].tolist()} at row {i}")
    return actions.astype(np.int32), probs


@dataclass(frozen=True)
class EvalConfig:
    n_backtests: int = 16          # chunks of the window evaluated side by side
    fee_per_lot: int = 0           # per lot per side, money units (×1e9)
    lots_per_entry: int = 1
    greedy: bool = True            # most probable action, else sampled from the policy's distribution
    seed: int = 0                  # the sampling stream of a non-greedy policy
    trade_log_cap: int = 64
    backend: str | None = None     # auto | cuda | reference (None: $FOXC_BACKEND or auto)
    passive: PassiveConfig | None = None  # resting orders: the policy's actions 5..8 quote (split_actions)

    def __post_init__(self):
        if not whole(self.n_backtests) or self.n_backtests < 1:  # 0 ran one chunk, 2.5 failed in range()
            raise ValueError(f"EvalConfig.n_backtests must be a whole number >= 1, got {self.n_backtests!r}")
        object.__setattr__(self, "n_backtests", int(self.n_backtests))


@dataclass
class Evaluation:
    policy: str
    is_baseline: bool
    metrics: dict
    chunks: np.ndarray         # int64 [C, 2]: [start, stop) row ranges of the window
    trades: np.ndarray         # EVAL_TRADE_DTYPE, time order
    equity: np.ndarray         # int64 [n]: equity after acting on each snapshot of the window
    actions: np.ndarray        # int32 [n]: the action taken at each snapshot
    probs: np.ndarray | None   # float64 [n, 5] or None
    sim: dict = field(default_factory=dict)


def chunk_bounds(records: np.ndarray, n_chunks: int) -> np.ndarray:
    """[start, stop) of up to `n_chunks` consecutive pieces of about equal length, cut at every segment end."""
    n = len(records)
    length = -(-n // max(1, n_chunks))
    first, last = segment_runs(records["segment"])
    out = []
    for a, b in zip(first, last + 1):
        for s in range(int(a), int(b), length):
            out.append((s, min(s + length, int(b))))
    return np.asarray(out, np.int64).reshape(-1, 2)


def chunk_standard_error(delta: np.ndarray, chunks: np.ndarray, block: int | None = None) -> float | None:
    """The standard error of the PnL per snapshot (money) from the chunks' totals s_i over lengths l_i (separate
    backtests: nearly independent), the ratio estimator's sqrt(sum (s_i - m l_i)^2 / (C (C - 1))) / mean(l),
    m = sum s / sum l; `block`: each chunk cut into pieces of at most that many first (batch means). None for one."""
    if block is not None:
        chunks = np.asarray([(s, min(s + block, b)) for a, b in chunks for s in range(int(a), int(b), block)],
                            np.int64).reshape(-1, 2)
    C = len(chunks)
    if C < 2:
        return None
    sums = np.add.reduceat(delta.astype(np.float64), chunks[:, 0])
    lens = (chunks[:, 1] - chunks[:, 0]).astype(np.float64)
    m = sums.sum() / lens.sum()
    return float(np.sqrt(np.sum((sums - m * lens) ** 2) / (C * (C - 1))) / lens.mean())


def _harvest(ring: np.ndarray, counts: np.ndarray, taken: np.ndarray, cap: int, out: list):
    for b in np.flatnonzero(counts > taken):
        ks = np.arange(taken[b], counts[b])
        rows = ring[b, ks % cap]
        t = np.zeros(rows.size, EVAL_TRADE_DTYPE)
        for name in EVAL_TRADE_DTYPE.names[:-1]:  # the trade log's fields, its padding left out
            t[name] = rows[name]
        t["chunk"] = b
        out.append(t)
        taken[b] = counts[b]


class Evaluator(Component):
    """One evaluation window on the simulator, built once (the records uploaded once), `run` for any number of
    policies, each from fresh accounts."""

    def __init__(self, records: np.ndarray, config: EvalConfig = EvalConfig(), *, tick: int = 1, rt=None):
        snapshot_records(records, "records", least=2)
        if not whole(tick) or tick < 1:
            raise ValueError(f"tick must be the integer price units per tick (price × 1e9, e.g. "
                             f"SynthParams.tick_units), got {tick!r}")
        self.records = np.ascontiguousarray(records)
        self.config, self.tick = config, int(tick)
        self.chunks = chunk_bounds(self.records, config.n_backtests)
        self.rt = rt if rt is not None else open_runtime(config.backend)
        self.env = LobEnv(self.records, len(self.chunks), rt=self.rt, fee_per_lot=config.fee_per_lot,
                          lots_per_entry=config.lots_per_entry, trade_log_cap=config.trade_log_cap,
                          passive=config.passive)
        self.n_actions = N_ACTIONS if config.passive is None else N_PASSIVE_ACTIONS
        self.verdicts = snapshot_verdicts(self.records, self.env.sim.config.min_price, self.env.sim.config.max_price)

    def run(self, policy) -> Evaluation:
        """Run `policy` once over every snapshot of the window (learning off) and compute the figures."""
        records, config, env, cap, chunks = self.records, self.config, self.env, self.config.trade_log_cap, self.chunks
        start, lens = chunks[:, 0], chunks[:, 1] - chunks[:, 0]
        B, n = len(chunks), len(records)
        delta = np.zeros(n, np.int64)
        actions = np.full(n, -1, np.int32)
        probs_at = None
        in_position = np.zeros(n, bool)
        trades: list[np.ndarray] = []
        taken = np.zeros(B, np.int64)
        env.reset(config.seed)
        env.cursors.place(start, chunks[:, 1] - 1)  # each backtest walks its own chunk, once
        equity = np.zeros(B, np.int64)
        lots = np.zeros(B, np.int32)
        rng = generator(config.seed, "evaluation")
        for t in range(int(lens.max())):
            active = t < lens
            cursor = start + np.minimum(t, lens - 1)
            ctx = PolicyContext(records, cursor, active, lots, t, self.tick, config.greedy, rng, env.sim)
            act, probs = split_decision(policy(ctx), B, self.n_actions)
            act = np.where(active, act, HOLD).astype(np.int32)
            on_device = env.cursors.cursor.download()
            if not (on_device[active] == cursor[active]).all():
                raise RuntimeError("the simulator's cursors left their chunks")
            if config.passive is not None:  # the agent's actions: market orders and both sides' quotes
                if ((act < 0) | (act >= self.n_actions)).any():  # (LobEnv checks market actions; these it cannot)
                    raise ValueError(f"a policy's actions must be 0..{self.n_actions - 1}, got "
                                     f"{act.min()}..{act.max()}")
                market, quotes = split_actions(act)
                _, _, info = env.step(market, quotes=quotes)
            else:
                _, _, info = env.step(act)
            at = cursor[active]
            actions[at] = act[active]
            if probs is not None:
                probs_at = np.zeros((n, self.n_actions)) if probs_at is None else probs_at
                probs_at[at] = probs[active]
            delta[at] = info["equity"][active] - equity[active]
            equity, lots = info["equity"], info["lots"]
            in_position[at] = lots[active] != 0
            counts = info["trades"].astype(np.int64)
            if (counts - taken).max() >= cap // 2:
                _harvest(env.sim.trade_log.download(), counts, taken, cap, trades)
        pos = env.sim.positions()
        _harvest(env.sim.trade_log.download(), pos["trades"].astype(np.int64), taken, cap, trades)
        sim = {k: int(pos[k].sum()) for k in ("unfilled_lots", "forced_lots", "invalid_actions")}
        sim["skipped_snapshots"] = int((self.verdicts != BOOK_OK).sum())
        trades_arr = np.concatenate(trades) if trades else np.zeros(0, EVAL_TRADE_DTYPE)
        trades_arr = trades_arr[np.argsort(trades_arr["chunk"], kind="stable")]
        metrics = summarize(trades_arr, delta, records["ts_ns"], actions, probs_at, in_position)
        metrics["chunks"] = B
        # every snapshot is acted on once (by one chunk): net PnL per snapshot, in ticks per lot, is
        # comparable with a synthetic market's optimum (foxc.evaluate.optimum)
        metrics["pnl_ticks"] = metrics["net_pnl"] / self.tick / n / config.lots_per_entry
        se = chunk_standard_error(delta, chunks)
        metrics["pnl_ticks_se"] = None if se is None else se / self.tick / config.lots_per_entry
        if metrics["net_pnl"] != metrics["final_equity"]:
            raise RuntimeError(f"the trades' net PnL {metrics['net_pnl']} differs from the final equity "
                               f"{metrics['final_equity']}: a chunk did not end flat or a trade was lost")
        name = getattr(policy, "name", None) or getattr(policy, "__name__", None) or type(policy).__name__
        return Evaluation(name, bool(getattr(policy, "is_baseline", True)),
                          metrics, chunks, trades_arr, np.cumsum(delta), actions, probs_at, sim)

    def buffers(self) -> list:
        return [self.env]


def evaluate(policy, records: np.ndarray, config: EvalConfig = EvalConfig(), *, tick: int = 1, rt=None) -> Evaluation:
    """Run `policy` once over every snapshot of `records` (learning off) and compute the figures."""
    with Evaluator(records, config, tick=tick, rt=rt) as ev:
        return ev.run(policy)
