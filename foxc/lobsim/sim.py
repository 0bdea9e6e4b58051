"""N parallel LOB backtests on the device: their state, the raw pointer table and the step's launch plans.

    sim = LobSim(rt, LobSimConfig(n_backtests=B, fee_per_lot=...), snapshots, cursor, episode_end)
    sim.actions / sim.stop_loss     # device inputs the learner (or a host policy) writes
    sim.launch_step(rt.stream)      # lobsim_step: book_update -> submit_market -> pnl_track
    sim.rewards / sim.dones         # device outputs

The simulator owns everything per backtest except the market data and the
cursors: `snapshots` (FoxcSnapshot records), `cursor[b]` (int64 index of b's
current snapshot) and `episode_end[b]` (index of the last snapshot of b's
episode) are given, so the trainer's dataset and the standalone `LobEnv` drive
it alike. Hot per-step state is structure-of-arrays (the book is level-major,
element (l, b) at l·B + b, so a warp's accesses coalesce); the position record
is one 176-byte struct per backtest, read and written whole by the fill.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..data.record import LEVELS, PRICE_SCALE, PRICE_UNDEF, SNAPSHOT_DTYPE
from ..driver import DevPtr
from ..component import Component, Persistent
from ..numbers import finite, whole
from .kernels import LOBSIM_STEP, LOBSIM_STEP_PASSIVE, PASSIVE_STATE
from .layout import POSITION_DTYPE, TRADE_DTYPE
from .layout import KERNEL_QUEUE_MODELS
from .passive import PassiveConfig

BLOCK = 128
PASSIVE_COUNTS = ("q_posts", "q_rejects", "q_fill_lots")  # per side: orders sent, refused post-only, lots filled
MONEY_UNITS = " of money units (prices ×1e9: 5_000_000 is 0.005 per lot per side)"
MAX_LOTS_PER_ENTRY = 1_000_000  # keeps |lots| × price × 2 well inside int64 for prices up to 1e6
F32_TINY, F32_MAX = float(np.finfo(np.float32).tiny), float(np.finfo(np.float32).max)  # kernels read float32


@dataclass(frozen=True)
class LobSimConfig:
    """Prices and money are integers ×1e9 (PRICE_SCALE): fee_per_lot=50_000_000 is 0.05 per lot per side."""

    n_backtests: int
    lots_per_entry: int = 1
    fee_per_lot: int = 0
    min_price: int = 1  # reasonable price range (×1e9); snapshots with a price outside are skipped
    max_price: int = 10_000_000 * PRICE_SCALE
    atr_alpha: float = 0.05  # EMA rate of the mid's ATR (about 20 snapshots)
    reward_scale: float = 1.0 / PRICE_SCALE  # reward = Δequity × scale: price units per lot by default
    trade_log_cap: int = 64
    passive: PassiveConfig | None = None  # resting orders (lobsim_step_passive); None: market orders only

    def __post_init__(self):
        for name, unit in (("n_backtests", ""), ("lots_per_entry", ""), ("fee_per_lot", MONEY_UNITS),
                           ("min_price", " (×1e9)"), ("max_price", " (×1e9)"), ("trade_log_cap", "")):
            value = getattr(self, name)  # a fraction would be cut (fee_per_lot=0.005 is no fee at all)
            if not whole(value):
                raise ValueError(f"{name} must be a whole number{unit}, got {value!r}")
            object.__setattr__(self, name, int(value))
        if not 1 <= self.n_backtests < 2**31:
            raise ValueError(f"n_backtests must be 1 to 2^31 - 1, got {self.n_backtests}")
        if not 1 <= self.lots_per_entry <= MAX_LOTS_PER_ENTRY:
            raise ValueError(f"lots_per_entry must be 1 to {MAX_LOTS_PER_ENTRY}, got {self.lots_per_entry}")
        if not 0 < self.min_price <= self.max_price < PRICE_UNDEF:
            raise ValueError(f"need 0 < min_price <= max_price < PRICE_UNDEF, got {self.min_price}, {self.max_price}")
        if not 0 <= self.fee_per_lot <= self.max_price:  # past int64 it failed in an upload
            raise ValueError(f"fee_per_lot must be 0 to max_price, the simulator's largest price ({self.max_price:,} "
                             f"money units), got {self.fee_per_lot}")
        for name, low, high, meaning in (("atr_alpha", F32_TINY, 1.0, "the EMA rate of the mid's ATR"),
                                         ("reward_scale", F32_TINY, F32_MAX, "reward per money unit, a float32")):
            value = getattr(self, name)  # NaN or inf ran on (NaN rewards, an ATR never updated), and so did a value
            if not finite(value) or not low <= value <= high:  # float32 rounds to 0 or inf
                raise ValueError(f"{name} must be a number from {low:.2g} to {high:.2g} ({meaning}), got {value!r}")
            object.__setattr__(self, name, float(value))
        if not 1 <= self.trade_log_cap <= 1 << 16:
            raise ValueError(f"trade_log_cap must be 1 to 65536, got {self.trade_log_cap}")
        q = self.passive
        if q is not None:
            if q.queue not in KERNEL_QUEUE_MODELS:
                raise ValueError(f"passive queue model {q.queue!r}: the simulator has {', '.join(KERNEL_QUEUE_MODELS)}")
            if not -self.max_price <= q.maker_fee <= self.max_price or q.max_position > MAX_LOTS_PER_ENTRY:
                raise ValueError(f"passive maker_fee must be within ±max_price and max_position at most "
                                 f"{MAX_LOTS_PER_ENTRY}, got {q.maker_fee}, {q.max_position}")


@dataclass(frozen=True)
class LobSimRawPtrs:
    """Every stable device pointer and kernel handle a simulator step needs, built once.

    Each pointer is a DevPtr, which keeps its allocation alive for as long as the table
    (and every launch plan made from it) lives.
    """

    snapshots: DevPtr
    cursor: DevPtr
    episode_end: DevPtr
    # book
    bid_px: DevPtr
    ask_px: DevPtr
    bid_sz: DevPtr
    ask_sz: DevPtr
    book_ts: DevPtr
    book_idx: DevPtr
    mid_x2: DevPtr
    atr_ema: DevPtr
    skip_range: DevPtr
    skip_crossed: DevPtr
    # orders
    actions: DevPtr
    stop_loss: DevPtr
    fee_per_lot: DevPtr
    pos: DevPtr
    trade_log: DevPtr
    # accounts
    rewards: DevPtr
    dones: DevPtr
    # the step kernel: the backend's verified kernel object (`.handle` is the CUfunction on CUDA)
    step_fn: object
    # dimensions
    n_backtests: int
    trade_log_cap: int
    pos_bytes: int = POSITION_DTYPE.itemsize


class LobSim(Component):
    """The simulator's device state and its step kernel's launch plan."""

    def __init__(self, rt, config: LobSimConfig, snapshots, cursor, episode_end):
        self.rt = rt
        self.config = config
        n = self.n = config.n_backtests
        for what, arr in (("cursor", cursor), ("episode_end", episode_end)):
            if arr.dtype != np.int64 or arr.size != n:
                raise ValueError(f"{what} must be int64[{n}], got {arr.dtype}[{arr.size}]")
        if snapshots.dtype != SNAPSHOT_DTYPE:
            raise ValueError("snapshots must be a device array of SNAPSHOT_DTYPE records")
        self.snapshots, self.cursor, self.episode_end = snapshots, cursor, episode_end
        keep = self.persistent = Persistent()  # the whole book and account state; rewards are per step

        def dev(shape, dtype, name):
            return keep(name, rt.device_array(shape, dtype, f"lobsim.{name}"))
        self.bid_px = dev((LEVELS, n), np.int64, "bid_px")
        self.ask_px = dev((LEVELS, n), np.int64, "ask_px")
        self.bid_sz = dev((LEVELS, n), np.uint32, "bid_sz")
        self.ask_sz = dev((LEVELS, n), np.uint32, "ask_sz")
        self.book_ts = dev(n, np.int64, "book_ts")
        self.book_idx = dev(n, np.int64, "book_idx")
        self.mid_x2 = dev(n, np.int64, "mid_x2")
        self.atr_ema = dev(n, np.float32, "atr_ema")
        self.skip_range = dev(n, np.uint32, "skip_range")
        self.skip_crossed = dev(n, np.uint32, "skip_crossed")
        self.actions = dev(n, np.int32, "actions")
        self.stop_loss = dev(n, np.uint32, "stop_loss")
        self.fee_per_lot = dev(n, np.int64, "fee_per_lot")
        self.pos = dev(n, POSITION_DTYPE, "pos")
        self.trade_log = dev((n, config.trade_log_cap), TRADE_DTYPE, "trade_log")
        self.rewards = rt.device_array(n, np.float32, "lobsim.rewards")
        self.dones = dev(n, np.float32, "dones")
        self.passive = config.passive
        if self.passive is not None:  # per side and backtest, [2, n]: the quotes in, the resting orders' state
            self.quotes = dev((2, n), np.int32, "quotes")
            for name, dtype, _ in PASSIVE_STATE:
                setattr(self, name, dev((2, n), dtype, name))
            for name in PASSIVE_COUNTS:
                setattr(self, name, dev((2, n), np.uint32, name))
        self.reset_state()
        self.ptrs = self._raw_ptrs()
        # lobsim_step's arguments by name: a kernel that steps the simulator and goes on (the trainer's
        # backtest_step) takes them, then its own
        self.step_args = self._step_args(self.ptrs)
        # and lobsim_step_passive's (its resting orders' arrays and settings after them) with resting orders
        self.all_step_args = self.step_args if self.passive is None else {**self.step_args, **self._passive_args()}
        self.grid = (n + BLOCK - 1) // BLOCK
        if self.passive is None:
            self.plans = [rt.plan(LOBSIM_STEP, self.grid, BLOCK, self.step_args)]
        else:
            self.plans = [rt.plan(LOBSIM_STEP_PASSIVE, self.grid, BLOCK, self.all_step_args)]

    def _raw_ptrs(self) -> LobSimRawPtrs:
        arrays = {f.name: getattr(self, f.name).ptr for f in fields(LobSimRawPtrs)
                  if f.type == "DevPtr"}
        return LobSimRawPtrs(**arrays, step_fn=self.rt.kernel(LOBSIM_STEP), n_backtests=self.n,
                             trade_log_cap=self.config.trade_log_cap)

    def _step_args(self, t: LobSimRawPtrs) -> dict:
        c = self.config
        books = ("cursor", "episode_end", "bid_px", "ask_px", "bid_sz", "ask_sz", "book_ts", "book_idx", "mid_x2",
                 "atr_ema", "skip_range", "skip_crossed", "actions", "stop_loss", "fee_per_lot", "pos", "trade_log",
                 "rewards", "dones")
        return dict(snaps=t.snapshots, **{name: getattr(t, name) for name in books}, min_px=c.min_price,
                    max_px=c.max_price, atr_alpha=c.atr_alpha, reward_scale=c.reward_scale, trade_cap=t.trade_log_cap,
                    lots_per_entry=c.lots_per_entry, n=t.n_backtests)

    def _passive_args(self) -> dict:
        q = self.passive
        names = ("quotes", *(name for name, _, _ in PASSIVE_STATE), *PASSIVE_COUNTS)
        return {**{name: getattr(self, name).ptr for name in names}, "maker_fee": q.maker_fee,
                "entry_latency": q.entry_latency_ns, "cancel_latency": q.cancel_latency_ns, "tick": q.tick,
                "queue_model": KERNEL_QUEUE_MODELS.index(q.queue), "power": q.power, "partial": int(q.partial),
                "max_position": q.max_position}

    def reset_state(self, fee_per_lot: np.ndarray | None = None):
        """Flat positions, empty books, no resting orders, zero counters (host uploads: call outside a capture)."""
        n = self.n
        if self.passive is not None:
            self.quotes.upload(np.zeros((2, n), np.int32))
            for name, dtype, empty in (*PASSIVE_STATE, *((c, np.uint32, 0) for c in PASSIVE_COUNTS)):
                getattr(self, name).upload(np.full((2, n), empty, dtype))
        self.bid_px.upload(np.full((LEVELS, n), PRICE_UNDEF, np.int64))
        self.ask_px.upload(np.full((LEVELS, n), PRICE_UNDEF, np.int64))
        for arr in (self.bid_sz, self.ask_sz, self.book_ts, self.mid_x2, self.atr_ema, self.skip_range,
                    self.skip_crossed, self.actions, self.stop_loss, self.pos, self.trade_log, self.rewards,
                    self.dones):
            arr.upload(np.zeros(arr.shape, arr.dtype))
        self.book_idx.upload(np.full(n, -2, np.int64))  # follows no cursor, so the first mid starts the ATR
        fees = np.full(n, self.config.fee_per_lot, np.int64) if fee_per_lot is None else np.asarray(fee_per_lot)
        if fees.shape != (n,) or fees.dtype != np.int64 or (fees < 0).any():
            raise ValueError(f"fee_per_lot must be int64[{n}] and never negative")
        self.fee_per_lot.upload(fees)

    def launch_step(self, stream):
        """lobsim_step (book_update -> submit_market -> pnl_track) on `stream` (capturable: no host work)."""
        for plan in self.plans:
            plan.launch(stream)

    # --- host views (downloads: not for the hot path) -------------------
    def positions(self) -> np.ndarray:
        return self.pos.download()

    def book(self) -> dict[str, np.ndarray]:
        """The book per backtest: bid_px/ask_px/bid_sz/ask_sz as [n, LEVELS]."""
        return {name: getattr(self, name).download().T.copy() for name in ("bid_px", "ask_px", "bid_sz", "ask_sz")}

    def trades(self, b: int) -> np.ndarray:
        """Backtest b's logged trades still in the ring, oldest first."""
        logged = int(self.positions()["trades"][b])
        ring = self.trade_log.download()[b]
        cap = self.config.trade_log_cap
        order = [(logged - k) % cap for k in range(min(logged, cap), 0, -1)]
        return ring[order]

    def accounts(self) -> dict:
        """Totals over all backtests since the reset, money in price units per lot (`stats` keeps the raw
        fixed-point integers)."""
        t = self.stats()
        return {"trades": t["trades"], "wins": t["wins"], "win_rate": t["wins"] / t["trades"] if t["trades"] else None,
                "net_pnl": t["pnl_sum"] / PRICE_SCALE, "fees": t["fees_paid"] / PRICE_SCALE,
                **{k: t[k] for k in ("unfilled_lots", "forced_lots", "skipped_unreasonable", "skipped_crossed",
                                     "episodes")}}

    def stats(self) -> dict:
        """Totals over all backtests, for reports (money as the simulator's integers: price x 1e9 x lots)."""
        p = self.positions()
        return {"trades": int(p["trades"].sum()), "wins": int(p["wins"].sum()),
                "pnl_sum": int(p["pnl_sum"].sum()), "fees_paid": int(p["fees_paid"].sum()),
                "unfilled_lots": int(p["unfilled_lots"].sum()), "forced_lots": int(p["forced_lots"].sum()),
                "skipped_unreasonable": int(self.skip_range.download().sum()),
                "skipped_crossed": int(self.skip_crossed.download().sum()),
                "episodes": int(p["episodes"].sum()),
                **({name: self._per_side(name).sum(axis=1).tolist() for name in PASSIVE_COUNTS}
                   if self.passive is not None else {})}  # [bid, ask] each

    def _per_side(self, name) -> np.ndarray:
        return getattr(self, name).download().reshape(2, self.n)

    def orders(self) -> dict[str, np.ndarray]:
        """The resting orders' state per side and backtest ([2, n] each: PASSIVE_STATE's names and the counts)."""
        return {name: self._per_side(name) for name in (*(s for s, _, _ in PASSIVE_STATE), *PASSIVE_COUNTS)}

    def buffers(self) -> list:
        return [*self.persistent.arrays.values(), self.rewards]

    def close(self):
        super().close()
        self.plans = []
