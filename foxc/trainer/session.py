"""What a run trains and is evaluated on, from its configuration (`run_data`): one path for the CLI and the benchmarks.

`--data` names files (read, validated and labelled here) or a prepared cache (its rows left on disk, each shard
verified as the device dataset reads it). `--instrument` is part of the data's identity a resume checks (the files'
sha256 mixes in the instrument_id it kept: a symbol and its id are one); a cache must have been prepared with it.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import numpy as np

from ..data.cursors import episode_rows
from ..data.market import tick_units
from ..data.record import PRICE_SCALE
from .config import ConfigError
from .heldout import holdout_market, synthetic_rows, validation_split
from ..data.cache import CacheRows, check_selection, is_cache
from ..data import labels as data_labels  # compute_labels looked up when called, as a function's import did
from ..data.labels import LabelConfig, PLANES
from ..data.markets import MARKETS
from ..data.select import selection_id
from ..data.source import labelled_need, load, no_room
from ..evaluate.optimum import market_optimum


@dataclass
class RunData:
    market: object          # MarketData, or a cache's CacheRows: the rows training draws from
    labels: np.ndarray | None  # their label planes (None for a cache: read with its shards)
    held: object | None     # MarketData of held-out rows for the greedy evaluations, or None
    optimum: float | None   # the synthetic market's optimal PnL, ticks per snapshot per lot; None on real data
    source: dict            # what the checkpoint meta and config.json record about the data
    val: object | None = None  # MarketData of the validation rows the run's policy is chosen on (--val-frac)


def files_digest(files, instrument: str | None = None) -> str:
    """The identity of data files read whole, or for one `instrument`'s rows (selection_id): other data."""
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    if instrument is not None:  # none: the identity the files had before --instrument existed
        h.update(f"\0--instrument {instrument}".encode())
    return h.hexdigest()


def selection(cfg, kept: str | None = None) -> dict:
    """What the data source records of --instrument: as given, and the instrument_id it `kept` (if one)."""
    given = {"instrument_selection": cfg.instrument} if cfg.instrument is not None else {}
    return given | ({"instrument_id": int(kept)} if kept and kept.isdigit() else {})


def check_horizons(horizons, labelled: list[bool], rows: int, market=None, data=None) -> None:
    """Refuse a horizon that leaves no labelled row (`labelled`: per horizon); where validation skipped most of the
    rows of --data, that is named as the cause."""
    empty = [h for h, any_row in zip(horizons, labelled) if not any_row]
    if not empty:
        return
    given = ",".join(map(str, horizons))
    cause = data and market.report.most_skipped()
    if cause:
        kept = market.report.rows_kept
        training = f" ({rows:,} of them for training)" if rows != kept else ""
        raise ConfigError(f"--data {data}: {cause}: the {kept:,} kept{training} leave no labelled row at horizon "
                          f"{empty[0]} of --horizons {given} (python -m foxc.data inspect {data} shows the skips per "
                          "file)")
    raise ConfigError(f"--horizons {given}: horizon {empty[0]} leaves no labelled row in the {rows:,} training "
                      "snapshots (each horizon must be shorter than a segment)")


def check_episode_starts(cfg, market, rows: int, flag: str = "--holdout") -> None:
    """Refuse training rows where no episode can start: some segment must hold a --seq-len window and a step after
    it (foxc.data.cursors). `rows`: the data's before `flag` (--holdout or --val-frac) took its share."""
    first, end = market.segment_bounds()
    longest, need, n = int((end - first).max()), episode_rows(cfg.seq_len - 1), market.n_rows
    if longest >= need:
        return
    value = cfg.holdout_frac if flag == "--holdout" else cfg.val_frac
    held = f" ({flag} {value} held out {rows - n:,} of the {rows:,})" if rows > n else ""
    remedy = f"give {f'a smaller {flag}, ' if held else ''}a shorter --seq-len or more data"
    cause = cfg.data and market.report.most_skipped()
    if cause:
        remedy += f"; python -m foxc.data inspect {cfg.data} shows the skips per file"
    raise ConfigError(f"--data {cfg.data}: {f'{cause}: ' if cause else ''}an episode needs a segment of {need} "
                      f"snapshots (a --seq-len {cfg.seq_len} window and a step after it), and the longest segment of "
                      f"the {n:,} training snapshots{held} holds {longest:,} ({remedy})")


def cache_data(cfg, log) -> tuple:
    """(rows, source) of the prepared cache --data names, its rows left on disk; its horizons, --instrument and
    --tick must be the run's."""
    rows = CacheRows(cfg.data, LabelConfig(horizons=cfg.horizons))
    check_selection(rows.path, rows.manifest, cfg.instrument, tick_units(cfg.tick))
    chosen = f" with --instrument {cfg.instrument}" if cfg.instrument is not None else ""
    log(f"data: cache {cfg.data} ({len(rows.manifest['shards'])} shard(s), prepared from {rows.manifest['data']}"
        f"{chosen}); each shard is verified as it is read")
    source = {"source": cfg.data, "cache": True, **selection(cfg), "files": rows.files, "rows": rows.n_rows,
              "sha256": rows.sha256}
    return rows, source


def run_data(cfg, log=lambda msg: None) -> RunData:
    """Load (or generate) the data, hold out the evaluation and validation rows, label the training rows (a
    cache's: None, read with each shard). A synthetic market is evaluated on a fresh draw, real data on its tail."""
    optimum, cached = None, is_cache(cfg.data)
    if cached:
        market, source = cache_data(cfg, log)
    elif cfg.data:
        market = load(cfg.data, tick=tick_units(cfg.tick), instrument=cfg.instrument)
        kept = selection_id(cfg.instrument, [f.get("instrument_id") for f in market.report.files.values()])
        source = {"source": cfg.data, **selection(cfg, kept), "files": market.files, "rows": len(market.records),
                  "sha256": files_digest(market.files, kept)}
    else:
        named = MARKETS[cfg.synthetic]
        n = min(cfg.synthetic_rows, named.window_rows or cfg.synthetic_rows)  # a market's window is its own
        market = synthetic_rows(n, "--synthetic-rows", seed=cfg.seed, params=named.params)
        optimum = market_optimum(named, fee_per_lot=cfg.fee, orders=cfg.orders,  # at the run's fees and orders
                                 maker_fee_per_lot=cfg.maker_fee)
        source = {"source": "synthetic", "market": cfg.synthetic, "rows": n, "seed": cfg.seed,
                  "optimum_ticks_per_snapshot": optimum,
                  "sha256": hashlib.sha256(market.records.view(np.uint8)).hexdigest()}
    if cfg.data:  # the tick it ran in, inferred or given: a resume's --tick is compared with it
        source["tick"] = market.tick / PRICE_SCALE
    held, rows = None, market.n_rows
    try:
        market, held = holdout_market(cfg, market)
        check_episode_starts(cfg, market, rows)
        trained = market.n_rows
        market, val = validation_split(cfg, market)
        check_episode_starts(cfg, market, trained, "--val-frac")
        t0 = time.perf_counter()
        if cached:
            labels, labelled = None, market.labelled()
            how = "labels from the cache"
        else:
            labels = data_labels.compute_labels(market.records, market.tick, LabelConfig(horizons=cfg.horizons))
            # outcome_weight: 1 where the horizon ends in its segment
            labelled = [bool(p.any()) for p in labels[PLANES.index("outcome_weight")]]
            how = f"labels in {time.perf_counter() - t0:.1f} s"
    except MemoryError:
        if cached:
            raise
        need = labelled_need(market.n_rows, len(cfg.horizons), held is None)
        if cfg.data is None:  # synthetic rows: fewer of them (a ConfigError: shown as is, not as --data's)
            raise ConfigError(str(no_room(f"--synthetic-rows {cfg.synthetic_rows:,}", None, need,
                                          "give fewer rows"))) from None
        raise no_room(cfg.data, cfg.data, need) from None
    check_horizons(cfg.horizons, labelled, market.n_rows, market, cfg.data)
    log(f"data: {market.n_rows:,} snapshots from {market.source} ({market.instrument or 'unnamed'}), "
        f"tick {market.tick / 1e9:g}, {market.n_segments} segment(s); {how}"
        + (f"; {val.n_rows:,} validation snapshots (--val-frac {cfg.val_frac})" if val is not None else "")
        + (f"; {min(len(held.records), cfg.eval_rows):,} held-out snapshots for evaluation" if held is not None else "")
        + (f"; optimum {optimum:.4f} ticks per snapshot" if optimum is not None else ""))
    return RunData(market, labels, held, optimum, source, val)
