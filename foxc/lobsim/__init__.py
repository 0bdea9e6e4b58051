"""The LOB simulator: N parallel backtests on the device (book, market fills, PnL) and an environment over it."""
from .env import LobEnv
from .layout import (ACTION_NAMES, FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, POSITION_DTYPE, REASON_EPISODE_END,
                     REASON_NAMES, REASON_SIGNAL, REASON_STOP_LOSS, SHORT, TRADE_DTYPE)
from .sim import LobSim, LobSimConfig, LobSimRawPtrs

__all__ = ["ACTION_NAMES", "FLAT_FROM_LONG", "FLAT_FROM_SHORT", "HOLD", "LONG", "LobEnv", "LobSim", "LobSimConfig",
           "LobSimRawPtrs", "POSITION_DTYPE", "REASON_EPISODE_END", "REASON_NAMES", "REASON_SIGNAL",
           "REASON_STOP_LOSS", "SHORT", "TRADE_DTYPE"]
