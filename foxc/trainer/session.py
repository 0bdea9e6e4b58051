"""What a run trains and is evaluated on, from its configuration: one path for the CLI and the benchmarks.

    data = run_data(cfg, log)   # data.market (training rows), data.labels, data.held, data.optimum, data.source
    trainer = Trainer(rt, cfg, data.market, data.labels, out, data.source, data.held, data.optimum, val=data.val)

`--data` names files (read, validated and labelled here) or a cache `python -m foxc.data prepare`
made of them (its rows left on disk, each shard verified and read with its labels when the device
dataset uploads it; foxc.data.cache.CacheRows). `--instrument ID` keeps one instrument's rows of the
files (foxc.data.select); it is part of the data's identity a resume checks (the files' sha256 mixes
in the instrument_id it kept: a symbol and its id are one), and a cache must have been prepared with
the same (and in the run's --tick, when one is given).
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
    """The identity of data files read whole, or (`instrument`: the id kept, foxc.data.select.selection_id) read for
    one instrument's rows: the same files read for another instrument are other data."""
    h = hashlib.sha256()
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    if instrument is not None:  # none: the identity the files had before --instrument existed
        h.update(f"\0--instrument {instrument}".encode())
    return h.hexdigest()


def selection(cfg, kept: str | None = None) -> dict:
    """What the run's data source records of --instrument (nothing without it): as given, and the instrument_id it
    `kept` in the files where it kept one (a resume whose --instrument keeps another names both)."""
    given = {"instrument_selection": cfg.instrument} if cfg.instrument is not None else {}
    return given | ({"instrument_id": int(kept)} if kept and kept.isdigit() else {})


def check_horizons(horizons, labelled: list[bool], rows: int, market=None, data=None) -> None:
    """Refuse a label horizon that leaves no labelled row (it reaches past the end of every segment);
    `labelled`: per horizon, whether some training row keeps a label. Where validation skipped most of the
    rows of --data (`market.report`), that is named as the cause, not the horizon."""
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
    """Refuse training rows where no episode can start: a start has a --seq-len window behind it and a step after
    it in its segment (foxc.data.cursors), so some segment must hold --seq-len + 1 snapshots; --horizons and
    --n-step need none (a label past the segment's end is masked, an n-step return ends with the episode).
    `rows`: the data's before `flag` (--holdout, or --val-frac) took its share. Where validation skipped most of them,
    that is named too."""
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
    """(rows, source) of the prepared cache --data names: its rows stay on disk (foxc.data.cache.CacheRows:
    each shard is verified against the manifest when it is read), labels as prepared (their horizons
    must be the run's, and so must its --instrument and --tick); the identity is the cache's."""
    rows = CacheRows(cfg.data, LabelConfig(horizons=cfg.horizons))
    check_selection(rows.path, rows.manifest, cfg.instrument, tick_units(cfg.tick))
    chosen = f" with --instrument {cfg.instrument}" if cfg.instrument is not None else ""
    log(f"data: cache {cfg.data} ({len(rows.manifest['shards'])} shard(s), prepared from {rows.manifest['data']}"
        f"{chosen}); each shard is verified as it is read")
    source = {"source": cfg.data, "cache": True, **selection(cfg), "files": rows.files, "rows": rows.n_rows,
              "sha256": rows.sha256}
    return rows, source


def run_data(cfg, log=lambda msg: None) -> RunData:
    """Load (or generate) the data, hold out the evaluation rows, label the training rows.

    Synthetic markets are evaluated on a fresh draw, real data on its held-out tail (--holdout), taken from
    training. A cache's rows stay on disk (labels None: the
    dataset reads each shard with its labels)."""
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
        optimum = market_optimum(named, fee_per_lot=cfg.fee)  # at the run's fee
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
