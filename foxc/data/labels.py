"""Labels for the perception heads: five label sources at each horizon, and two weights. For snapshot i and horizon h,
with j = i + h in the same segment:
  mid_up          1 when the mid at j is above the mid at i (BCE target)
  long_win        1 when bid_0[j] − ask_0[i] − 2·fee > 0 (a long bought at the ask, sold at the bid, fee per side)
  short_win       the same for a short sold at bid_0[i], bought back at ask_0[j]
  long_size       tanh(pnl_long / (size_scale_ticks · tick)), the outcome's size in (−1, 1); short_size alike
  mid_weight      1 when j is in the segment and |Δmid| > dead_band_ticks · tick
  outcome_weight  1 when j is in the segment
Masked entries (weight 0) hold 0. Layout: float32 [N_PLANES, n_horizons, n], planes in PLANES' order."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..numbers import finite, whole
from .market import checked_tick
from .record import PRICE_SCALE, snapshot_records

PLANES = ("mid_up", "long_win", "short_win", "long_size", "short_size", "mid_weight", "outcome_weight")
N_PLANES = len(PLANES)
N_HORIZONS = 3  # every label plane, the gather and the perception head take three horizons
DEFAULT_HORIZONS = (10, 50, 100)


@dataclass(frozen=True)
class LabelConfig:
    horizons: tuple[int, ...] = DEFAULT_HORIZONS
    dead_band_ticks: float = 0.0  # |Δmid| at or below this many ticks is masked for mid_up
    fee_per_lot: float = 0.0  # in price (currency per unit), paid on each side
    size_scale_ticks: float = 4.0

    def __post_init__(self):
        h = self.horizons
        if not isinstance(h, (tuple, list)) or len(h) != N_HORIZONS or not all(whole(x) and x >= 1 for x in h):
            raise ValueError(f"LabelConfig: horizons {h!r}: three whole numbers of snapshots >= 1 are needed")
        object.__setattr__(self, "horizons", tuple(int(x) for x in h))  # slices take ints
        for name in ("dead_band_ticks", "fee_per_lot", "size_scale_ticks"):
            value, positive = getattr(self, name), name == "size_scale_ticks"  # the sizes divide by it
            if not finite(value) or value < 0 or (positive and value == 0):
                raise ValueError(f"LabelConfig: {name} {value!r}: must be a finite number "
                                 f"{'>' if positive else '>='} 0")

    @property
    def fee_units(self) -> float:
        return self.fee_per_lot * PRICE_SCALE


def compute_labels(rec: np.ndarray, tick: int, cfg: LabelConfig = LabelConfig()) -> np.ndarray:
    """float32 [N_PLANES, len(horizons), n]; O(n) per horizon, no Python loop over rows."""
    snapshot_records(rec, "records")
    if not isinstance(cfg, LabelConfig):
        raise TypeError(f"cfg must be a foxc.data.labels.LabelConfig, got a {type(cfg).__name__}")
    tick = checked_tick(tick)
    n = len(rec)
    out = np.zeros((N_PLANES, len(cfg.horizons), n), np.float32)
    # contiguous copies: each is read six times, and a record's fields lie 400 bytes apart
    bid, ask, seg = (np.ascontiguousarray(rec[name][:, 0] if name != "segment" else rec[name])
                     for name in ("bid_px", "ask_px", "segment"))
    mid2 = bid + ask  # twice the mid, exact in int64
    fee2 = 2.0 * cfg.fee_units
    scale = cfg.size_scale_ticks * tick
    for k, h in enumerate(cfg.horizons):
        m = n - h
        if m <= 0:
            continue
        i, j = slice(0, m), slice(h, n)
        valid = seg[j] == seg[i]
        dmid2 = mid2[j] - mid2[i]
        pnl_long = (bid[j] - ask[i]).astype(np.float64) - fee2
        pnl_short = (bid[i] - ask[j]).astype(np.float64) - fee2
        out[0, k, :m] = valid & (dmid2 > 0)
        out[1, k, :m] = valid & (pnl_long > 0)
        out[2, k, :m] = valid & (pnl_short > 0)
        out[3, k, :m] = np.where(valid, np.tanh(pnl_long / scale), 0.0)
        out[4, k, :m] = np.where(valid, np.tanh(pnl_short / scale), 0.0)
        out[5, k, :m] = valid & (np.abs(dmid2) > 2.0 * cfg.dead_band_ticks * tick)
        out[6, k, :m] = valid
    return out


def balance_counts(labels: np.ndarray) -> np.ndarray:
    """Per horizon: [rows, mid-labelled, ups, outcome-labelled, profitable longs, shorts]; they add over blocks."""
    counts = np.zeros((labels.shape[1], 6))
    for k in range(labels.shape[1]):
        w_mid, w_out = labels[5, k] > 0, labels[6, k] > 0
        counts[k] = (w_mid.size, w_mid.sum(), labels[0, k][w_mid].sum(), w_out.sum(), labels[1, k][w_out].sum(),
                     labels[2, k][w_out].sum())
    return counts


def balance(counts: np.ndarray, horizons) -> list[dict]:
    """Per horizon: the labelled fraction and the share of ups, profitable longs and shorts, from balance_counts."""
    share = lambda part, whole: float(part / whole) if whole else float("nan")  # noqa: E731
    return [{"horizon": int(h), "mid_labelled": float(rows and mid / rows), "mid_up": share(up, mid),
             "long_win": share(longs, out), "short_win": share(shorts, out)}
            for h, (rows, mid, up, out, longs, shorts) in zip(horizons, counts)]
