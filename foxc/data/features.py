"""The per-snapshot feature layout (mirrors cuda/include/foxc/data.h) and its numpy computation.

features: float32 [K, B, FEATURES] on the device (time-major, as the encoder reads them); window_features
below returns [B, K, FEATURES], the K snapshots of each window oldest first.
Prices are relative to the snapshot's own mid in ticks, sizes log1p, spread in ticks, level-1
and ten-level volume imbalance, the mid relative to the window's newest mid in ticks, log1p of
the microseconds since the previous snapshot, log1p of the trade count. Empty levels give 0.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from .record import LEVELS, PRICE_UNDEF

F_BID_PX = 0
F_ASK_PX = 10
F_BID_SZ = 20
F_ASK_SZ = 30
F_SPREAD = 40
F_IMBALANCE = 41
F_DEPTH_IMB = 42
F_MID_REL = 43
F_LOG_DT = 44
F_LOG_TRADES = 45
FEATURES = 46

HORIZONS = 3
LABEL_SOURCES = 5
LABEL_PLANES = 7
GATHER_BLOCK = 128
GATHER_MAX_K = 128

HEADER_PATH = Path(__file__).resolve().parents[2] / "cuda" / "include" / "foxc" / "data.h"

FEATURE_NAMES = ([f"bid_px_{l}" for l in range(LEVELS)] + [f"ask_px_{l}" for l in range(LEVELS)]
                 + [f"bid_sz_{l}" for l in range(LEVELS)] + [f"ask_sz_{l}" for l in range(LEVELS)]
                 + ["spread", "imbalance", "depth_imbalance", "mid_rel", "log_dt", "log_trades"])


def header_constants(path: Path = HEADER_PATH) -> dict[str, int]:
    """The FOXC_* integer #defines of data.h, without the prefix."""
    found = re.findall(r"^#define FOXC_(\w+)\s+(\d+)", path.read_text(), re.M)
    return {name: int(value) for name, value in found}


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, 0.0)


def snapshot_features(rec: np.ndarray, tick: int, mid2_newest: np.ndarray) -> np.ndarray:
    """float32 [..., FEATURES] for records of any shape; mid2_newest broadcasts against rec's shape."""
    out = np.zeros(rec.shape + (FEATURES,), np.float32)
    bid, ask = rec["bid_px"], rec["ask_px"]
    touch = (bid[..., 0] != PRICE_UNDEF) & (ask[..., 0] != PRICE_UNDEF)
    mid2 = np.where(touch, bid[..., 0] + ask[..., 0], 0)
    for base, px in ((F_BID_PX, bid), (F_ASK_PX, ask)):
        ok = touch[..., None] & (px != PRICE_UNDEF)
        rel = (2 * np.where(ok, px, 0) - mid2[..., None]).astype(np.float64) / float(2 * tick)
        out[..., base:base + LEVELS] = np.where(ok, rel, 0.0)
    out[..., F_BID_SZ:F_BID_SZ + LEVELS] = np.log1p(rec["bid_sz"].astype(np.float64))
    out[..., F_ASK_SZ:F_ASK_SZ + LEVELS] = np.log1p(rec["ask_sz"].astype(np.float64))
    spread = (np.where(touch, ask[..., 0], 0) - np.where(touch, bid[..., 0], 0)).astype(np.float64)
    out[..., F_SPREAD] = spread / float(tick)
    b0 = rec["bid_sz"][..., 0].astype(np.float64)
    a0 = rec["ask_sz"][..., 0].astype(np.float64)
    out[..., F_IMBALANCE] = _ratio(b0 - a0, b0 + a0)
    bd = rec["bid_sz"].astype(np.uint64).sum(-1).astype(np.float64)
    ad = rec["ask_sz"].astype(np.uint64).sum(-1).astype(np.float64)
    out[..., F_DEPTH_IMB] = _ratio(bd - ad, bd + ad)
    mid2_newest = np.broadcast_to(mid2_newest, mid2.shape)
    rel = (mid2 - mid2_newest).astype(np.float64) / float(2 * tick)
    out[..., F_MID_REL] = np.where(touch & (mid2_newest != 0), rel, 0.0)
    dt = np.maximum(rec["ts_ns"] - rec["prev_ts_ns"], 0).astype(np.float64)
    out[..., F_LOG_DT] = np.log1p(dt / 1000.0)
    out[..., F_LOG_TRADES] = np.log1p(rec["trade_count"].astype(np.float64))
    return out


def window_features(records: np.ndarray, cursors: np.ndarray, K: int, tick: int) -> np.ndarray:
    """float32 [B, K, FEATURES] for the windows ending at `cursors` (which must not cross a segment)."""
    idx = np.asarray(cursors, np.int64)[:, None] - (K - 1) + np.arange(K)
    window = records[idx]
    newest = window[:, -1]
    touch = (newest["bid_px"][:, 0] != PRICE_UNDEF) & (newest["ask_px"][:, 0] != PRICE_UNDEF)
    mid2_newest = np.where(touch, newest["bid_px"][:, 0] + newest["ask_px"][:, 0], 0)
    return snapshot_features(window, tick, mid2_newest[:, None])
