"""A vectorised trading environment over the simulator: `reset(seed)`, `step(actions)`, no learner needed.

    env = LobEnv(snapshots, n_backtests=1024, episode_len=500, fee_per_lot=...)
    obs = env.reset(seed=7)                  # the snapshot each backtest acts on, [B] SNAPSHOT_DTYPE
    rewards, dones, info = env.step(actions) # actions: int [B] in HOLD..FLAT_FROM_SHORT

One step of backtest b at cursor t (its observation is snapshot t), two launches (lobsim_step, then
cursor_advance):
1. book_update applies snapshot t to b's book (unusable snapshots are skipped and counted);
2. submit_market turns the action into a target position and fills it on that book
   (at the episode's last snapshot the target is forced flat);
3. pnl_track marks the position to the mid of snapshot t+1 (the mid it is held
   through; the current book's mid at the episode's end) and returns the reward;
4. cursor_advance (foxc.data.cursors) moves the cursor to t+1, or draws a new episode where
   one ended.

Episodes: a start drawn uniformly among the snapshots that have at least one more in their
segment, the episode cut at `episode_len` snapshots or at its segment's last one, whichever
comes first (so long segments are drawn more often than short ones, and an episode that
starts near its segment's end is shorter).

Reward: the change of mark-to-mid equity over the step, net of fees, times
`reward_scale` (default 1e-9, so price units per lot): the position's price move
from t to t+1, minus the spread crossed and the fees of the step's fills. Summed
over an episode it is exactly the episode's PnL net of fees (up to float32 rounding
per step). `done` is 1 on an episode's last step; the position is then flat.
"""
from __future__ import annotations

import numpy as np

from ..component import Component
from ..data.cursors import Cursors
from ..data.record import LEVELS, SNAPSHOT_DTYPE, snapshot_records
from ..driver import open_runtime
from .layout import N_ACTIONS, QUOTE_JOIN, QUOTE_KEEP
from ..numbers import whole
from .sim import LobSim, LobSimConfig


class LobEnv(Component):
    def __init__(self, snapshots: np.ndarray, n_backtests: int, *, episode_len: int = 0, rt=None,
                 backend: str | None = None, **config):
        """`snapshots`: SNAPSHOT_DTYPE records, segments contiguous; `episode_len`: snapshots per episode at
        most (0: to the segment's end); `config`: the other LobSimConfig fields (fee_per_lot, lots_per_entry, ...)."""
        snapshot_records(snapshots, "snapshots", least=2)
        if not whole(episode_len) or not 0 <= episode_len < 2**63:  # the cursors' int64
            raise ValueError(f"episode_len must be a whole number 0 to 2^63 - 1, got {episode_len!r}")
        sim_config = LobSimConfig(n_backtests=n_backtests, **config)  # its settings refused before any allocation
        n_backtests = sim_config.n_backtests
        self.rt = rt if rt is not None else open_runtime(backend)
        self.host_snapshots = np.ascontiguousarray(snapshots)
        self.n, self.episode_len = n_backtests, int(episode_len)
        self.cursors = Cursors(self.rt, self.host_snapshots["segment"], n_backtests, episode_len=self.episode_len,
                               stream="episodes")
        self.snapshots = self.rt.device_array(snapshots.size, SNAPSHOT_DTYPE, "env.snapshots")
        self.snapshots.upload(self.host_snapshots)
        self.sim = LobSim(self.rt, sim_config, self.snapshots,
                          self.cursors.cursor, self.cursors.episode_end)

    def reset(self, seed: int) -> np.ndarray:
        """Fresh accounts and a new episode for every backtest, drawn from `seed`; returns the observation."""
        if not whole(seed) or seed < 0:  # refused before any state is touched
            raise ValueError(f"seed must be a non-negative whole number, got {seed!r}")
        seed = int(seed)
        self.sim.reset_state()
        self.cursors.reset(seed)
        return self.observation()

    def launch_step(self, stream):
        """The whole step on the device (capturable): book, fill and PnL in one launch, then the cursors."""
        self.sim.launch_step(stream)
        self.cursors.advance(stream)

    def step(self, actions, stop_loss=None, quotes=None):
        """Apply `actions` (int [B]); `stop_loss` (bool [B], optional) forces open positions flat; `quotes` (int
        [2, B]: bid, ask; QUOTE_KEEP, QUOTE_CANCEL or QUOTE_JOIN + ticks behind the touch) only with resting
        orders (the config's `passive`; none given: every side keeps what it has).

        Returns (rewards float32 [B], dones float32 [B], info dict of per-backtest arrays)."""
        actions = _checked_actions(np.asarray(actions), self.n)
        if quotes is not None and self.sim.passive is None:
            raise ValueError("quotes need resting orders: LobEnv(..., passive=PassiveConfig(...))")
        if self.sim.passive is not None:
            quotes = np.zeros((2, self.n), np.int32) if quotes is None else np.asarray(quotes)
            if quotes.shape != (2, self.n) or quotes.dtype.kind not in "iu" or \
                    ((quotes < QUOTE_KEEP) | (quotes >= QUOTE_JOIN + LEVELS)).any():
                raise ValueError(f"quotes must be whole numbers {QUOTE_KEEP}..{QUOTE_JOIN + LEVELS - 1} of shape "
                                 f"(2, {self.n}), got {quotes.dtype} {quotes.shape}")
            self.sim.quotes.upload(quotes.astype(np.int32))
        stops = np.zeros(self.n, np.uint32) if stop_loss is None else np.asarray(stop_loss)
        if stops.shape != (self.n,):
            raise ValueError(f"stop_loss must have shape ({self.n},), got {stops.shape}")
        finite = np.isfinite(stops) if stops.dtype.kind == "f" else np.ones(self.n, bool)
        if stops.dtype.kind not in "biuf" or not finite.all():  # NaN != 0 and "x" != 0 stopped the position
            i = int(np.argmin(finite))
            got = f"dtype {stops.dtype}" if stops.dtype.kind not in "biuf" else f"{stops[i]} at backtest {i}"
            raise ValueError(f"stop_loss must be bools or finite numbers (nonzero: stop), got {got}")
        self.sim.actions.upload(actions)
        self.sim.stop_loss.upload((stops != 0).astype(np.uint32))
        self.launch_step(self.rt.stream)
        self.rt.stream.synchronize()
        pos = self.sim.positions()
        info = {name: pos[name].copy() for name in ("lots", "equity", "unrealized_pnl", "realized_pnl", "fees_paid",
                                                     "peak_equity", "trades", "wins", "pnl_sum", "last_episode_pnl")}
        info["cursor"] = self.cursors.cursor.download()
        return self.sim.rewards.download(), self.sim.dones.download(), info

    def observation(self) -> np.ndarray:
        """The snapshot each backtest acts on next (host copy)."""
        self.rt.stream.synchronize()
        return self.host_snapshots[self.cursors.cursor.download()]

    def buffers(self) -> list:
        return [self.sim, self.cursors, self.snapshots]


def _checked_actions(actions: np.ndarray, n: int) -> np.ndarray:
    """`actions` as int32 [n], each one of HOLD..FLAT_FROM_SHORT (whole numbers of any numeric dtype); anything
    else is a ValueError naming the value and its backtest (the kernel would take it for HOLD, or wrap it)."""
    if actions.shape != (n,):
        raise ValueError(f"actions must have shape ({n},), got {actions.shape}")
    if actions.dtype.kind not in "iuf":
        raise ValueError(f"actions must be numbers HOLD..FLAT_FROM_SHORT (0..{N_ACTIONS - 1}), "
                         f"got dtype {actions.dtype}")
    if actions.dtype.kind == "f":
        whole = np.isfinite(actions) & (actions == np.round(actions))
        if not whole.all():
            i = int(np.argmin(whole))
            raise ValueError(f"actions must be whole numbers 0..{N_ACTIONS - 1}, "
                             f"got {actions[i]} at backtest {i}")
    bad = (actions < 0) | (actions >= N_ACTIONS)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"actions must be HOLD..FLAT_FROM_SHORT (0..{N_ACTIONS - 1}), "
                         f"got {actions[i]} at backtest {i}")
    return actions.astype(np.int32)
