"""Data-test helpers: the DBN fixtures, the shared sample files, DBN written by Databento's encoder, LOBSTER CSVs."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from foxc.data.record import LEVELS, PRICE_UNDEF

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DBN_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.dbn*"))  # written by tools/make_dbn_fixtures.py
NEEDS_DBN = "needs Databento's encoder/decoder databento-dbn, a test extra: pip install -e '.[test]'"


def _shared_data() -> Path:
    """../shared/data beside the checkout (a worktree one level deeper looks one more level up)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        if (base / "shared" / "data").is_dir():
            return base / "shared" / "data"
    return ROOT.parent / "shared" / "data"


SHARED_DATA = _shared_data()


def shared_sample(name: str) -> Path:
    """A sample file of ../shared/data: skips (saying where it looked) when that folder is absent,
    fails when the folder is there but the file is not."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared sample data not on this machine (looked for {SHARED_DATA})")
    path = SHARED_DATA / name
    assert path.is_file(), f"{path} is missing from the shared sample data"
    return path


def dbn_tool():
    """tools/make_dbn_fixtures.py as a module (skips where databento-dbn is not installed)."""
    pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    spec = importlib.util.spec_from_file_location("make_dbn_fixtures", ROOT / "tools" / "make_dbn_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dbn_bytes(rec: np.ndarray, version: int = 2, symbol: str = "TEST", ts_out: bool = False,
              feed_delay_ns: int = 0) -> bytes:
    """Snapshots as a DBN stream of MBP-10 records, encoded by databento-dbn (not by foxc's dtype).

    ts_recv = ts_ns, ts_event = ts_ns - feed_delay_ns; action T (side B, a buyer, of 1 at the best bid) where
    trade_count > 0, else A; skips without databento-dbn."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    meta = dbn.Metadata(dataset="GLBX.MDP3", start=int(rec["ts_ns"].min()), stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBP_10, symbols=[symbol],
                        ts_out=ts_out, version=version)
    sides = ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct")
    cols = {k: rec[k].tolist() for k in sides}
    body = []
    for i, (ts, iid, flags, trades) in enumerate(zip(rec["ts_ns"].tolist(), rec["instrument_id"].tolist(),
                                                      rec["flags"].tolist(), rec["trade_count"].tolist())):
        levels = [dbn.BidAskPair(*(cols[k][i][lvl] for k in sides)) for lvl in range(LEVELS)]
        body.append(bytes(dbn.MBP10Msg(
            publisher_id=1, instrument_id=iid, ts_event=ts - feed_delay_ns, price=levels[0].bid_px, size=1,
            action=dbn.Action.TRADE if trades else dbn.Action.ADD, side=dbn.Side.BID, depth=0, ts_recv=ts,
            flags=flags, levels=levels, **({"ts_out": ts + 7} if ts_out else {}))))
    return meta.encode() + b"".join(body)


def write_lobster(folder: Path, rec: np.ndarray, levels: int, ticker="AAPL", day="2012-06-21",
                  message: bool = True, session: tuple[int, int] = (34_200_000, 57_600_000),
                  seconds: list[str] | None = None, events: list[tuple[int, int, int, int]] | None = None) -> Path:
    """orderbook_N.csv (+ message_N.csv) for the first `levels` levels of `rec` (prices in 1e-9 units),
    named TICKER_DAY_<session start ms>_<end ms>_...; the message times are `seconds` (as written) after midnight
    (New York time, as LOBSTER writes them), by default ts_ns modulo one day; each row's event (type, size, price
    × 1e4, direction) is `events`', by default where trade_count > 0 an execution (4) of 100 at the best bid of a
    buy order (1), or at the best ask of a sell order (-1) in a book without bids, else a new order (1)."""
    base = f"{ticker}_{day}_{session[0]}_{session[1]}"
    cols = []
    for lvl in range(levels):
        ask, bid = rec["ask_px"][:, lvl], rec["bid_px"][:, lvl]
        cols += [np.where(ask == PRICE_UNDEF, 9999999999, ask // 100_000), rec["ask_sz"][:, lvl],
                 np.where(bid == PRICE_UNDEF, -9999999999, bid // 100_000), rec["bid_sz"][:, lvl]]
    book = folder / f"{base}_orderbook_{levels}.csv"
    np.savetxt(book, np.stack(cols, 1).astype(np.int64), fmt="%d", delimiter=",")
    if message:
        if seconds is None:
            seconds = [f"{s:.9f}" for s in (rec["ts_ns"] % (86400 * 10**9)) / 1e9]
        if events is None:
            bid, ask = rec["bid_px"][:, 0], rec["ask_px"][:, 0]
            at_bid = bid != PRICE_UNDEF
            price = np.where(at_bid, bid, np.where(ask != PRICE_UNDEF, ask, 0)) // 100_000
            events = list(zip(np.where(rec["trade_count"] > 0, 4, 1).tolist(), [100] * len(rec), price.tolist(),
                              np.where(at_bid, 1, -1).tolist()))
        with open(folder / f"{base}_message_{levels}.csv", "w") as fh:
            for s, (kind, size, price, direction) in zip(seconds, events):
                fh.write(f"{s},{kind},1,{size},{price},{direction}\n")
    return book


PRICED = ("bid_px", "ask_px", "sell_lo_px", "buy_hi_px", "last_px")  # a record's prices: the book's, the trades'


def shift_prices(rec: np.ndarray, units: int) -> np.ndarray:
    """`rec` with every price it holds (the book's levels and the trades') moved by `units`, in place."""
    for name in PRICED:
        rec[name] = np.where(rec[name] == PRICE_UNDEF, PRICE_UNDEF, rec[name] + units)
    return rec


__all__ = ["DBN_FIXTURES", "FIXTURES", "LEVELS", "NEEDS_DBN", "PRICED", "SHARED_DATA", "dbn_bytes", "dbn_tool",
           "shared_sample", "shift_prices", "write_lobster"]
