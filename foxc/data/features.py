"""The per-snapshot feature layout and its numpy computation; cuda/include/foxc/data.h is generated
from it (`python -m foxc.data.features --write`, also run by tools/build_cubins.py).

features: float32 [K, B, FEATURES] on the device (time-major, as the encoder reads them); window_features
below returns [B, K, FEATURES], the K snapshots of each window oldest first.
Prices are relative to the snapshot's own mid in ticks, sizes log1p, spread in ticks, level-1
and ten-level volume imbalance, the mid relative to the window's newest mid in ticks, log1p of
the microseconds since the previous snapshot, log1p of the trade count. Empty levels give 0.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ..cgen import GeneratedHeader, defines, header_text
from .labels import N_HORIZONS, N_PLANES, PLANES
from .record import LEVELS, PRICE_UNDEF, SNAPSHOT_BYTES

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

HORIZONS, LABEL_PLANES = N_HORIZONS, N_PLANES  # the label planes' shape, defined with them (labels.py)
LABEL_SOURCES = PLANES.index("mid_weight")  # the planes before the two weights are the heads' sources
GATHER_BLOCK = 128
GATHER_MAX_K = 128

HEADER_PATH = Path(__file__).resolve().parents[2] / "cuda" / "include" / "foxc" / "data.h"

FEATURE_NAMES = ([f"bid_px_{l}" for l in range(LEVELS)] + [f"ask_px_{l}" for l in range(LEVELS)]
                 + [f"bid_sz_{l}" for l in range(LEVELS)] + [f"ask_sz_{l}" for l in range(LEVELS)]
                 + ["spread", "imbalance", "depth_imbalance", "mid_rel", "log_dt", "log_trades"])


def render_header() -> str:
    body = ["// features: float32 [K][B][FOXC_FEATURES] (time-major, as the encoder reads them): row (k, b) is",
            "// snapshot k of backtest b's window, k = 0 the oldest.", *defines([
                ("FOXC_F_BID_PX", F_BID_PX, "10: (bid_px[l] - mid) / tick; 0 for an empty level"),
                ("FOXC_F_ASK_PX", F_ASK_PX, "10: (ask_px[l] - mid) / tick; 0 for an empty level"),
                ("FOXC_F_BID_SZ", F_BID_SZ, "10: log1p(bid_sz[l])"),
                ("FOXC_F_ASK_SZ", F_ASK_SZ, "10: log1p(ask_sz[l])"),
                ("FOXC_F_SPREAD", F_SPREAD, "(ask_px[0] - bid_px[0]) / tick"),
                ("FOXC_F_IMBALANCE", F_IMBALANCE, "(bid_sz[0] - ask_sz[0]) / (bid_sz[0] + ask_sz[0]); 0 when both are 0"),
                ("FOXC_F_DEPTH_IMB", F_DEPTH_IMB, "the same over all ten levels"),
                ("FOXC_F_MID_REL", F_MID_REL, "(mid - mid of the window's newest snapshot) / tick"),
                ("FOXC_F_LOG_DT", F_LOG_DT, "log1p(microseconds since the previous snapshot)"),
                ("FOXC_F_LOG_TRADES", F_LOG_TRADES, "log1p(trade_count)"),
                ("FOXC_FEATURES", FEATURES, "")]), "",
            "// labels: float32 [FOXC_LABEL_PLANES][FOXC_HORIZONS][n_records] on the device (foxc/data/labels.py",
            "// PLANES); gathered at each backtest's cursor into float32 [FOXC_LABEL_PLANES][B][FOXC_HORIZONS].",
            *defines([
                ("FOXC_HORIZONS", HORIZONS, ""),
                ("FOXC_LABEL_SOURCES", LABEL_SOURCES, "mid_up, long_win, short_win, long_size, short_size"),
                ("FOXC_LABEL_PLANES", LABEL_PLANES, "the five sources, then mid_weight, outcome_weight"),
                ("FOXC_GATHER_BLOCK", GATHER_BLOCK, ""),
                ("FOXC_GATHER_MAX_K", GATHER_MAX_K,
                 f"the window is staged in shared memory: K * {SNAPSHOT_BYTES} bytes (past 48 KB the plan opts in)")])]
    return header_text("FOXC_DATA_H", "foxc.data.features", "foxc/data/features.py", body)


HEADER = GeneratedHeader(HEADER_PATH, render_header, "foxc.data.features", "foxc/data/features.py")


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


def window_features(records: np.ndarray, rows: np.ndarray, tick: int) -> np.ndarray:
    """float32 [B, K, FEATURES] of the windows of `rows` (int [B, K], oldest first; the newest's mid the reference)."""
    window = records[np.asarray(rows, np.int64)]
    newest = window[:, -1]
    touch = (newest["bid_px"][:, 0] != PRICE_UNDEF) & (newest["ask_px"][:, 0] != PRICE_UNDEF)
    mid2_newest = np.where(touch, newest["bid_px"][:, 0] + newest["ask_px"][:, 0], 0)
    return snapshot_features(window, tick, mid2_newest[:, None])


if __name__ == "__main__":
    sys.exit(HEADER.main())
