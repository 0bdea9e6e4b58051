"""Trades in the data: each source's trade fields and feed delay from hand-made rows of known trades, FLAG_NO_TRADES
where a source says nothing of them, skipped rows' trades carried into the next kept row, trade prices validated."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_files import NEEDS_DBN, write_lobster
from foxc.data import validate
from foxc.data.dbn import read_dbn
from foxc.data.lobster import read_lobster
from foxc.data.parquet import read_parquet, write_parquet
from foxc.data.record import FLAG_NO_TRADES, LEVELS, PRICE_UNDEF, SNAPSHOT_DTYPE
from foxc.data.source import load
from foxc.data.stream import FileStream
from foxc.data.synthetic import generate
from foxc.data.validate import DataError, ValidationConfig

TICK = 250_000_000
NONE = (PRICE_UNDEF, 0)  # a side without trades: (price, volume)
TRADES = ("sell_lo_px", "buy_hi_px", "last_px", "sell_lo_vol", "buy_hi_vol", "sell_vol", "buy_vol")


def book(n: int, seed: int = 1) -> np.ndarray:
    """Synthetic books with no trades in their trade fields (trade_count as generated)."""
    rec = generate(n, seed=seed)
    for name in TRADES:
        rec[name] = PRICE_UNDEF if name.endswith("_px") else 0
    rec["feed_delay_ns"] = 0
    return rec


def trades_of(rec, i) -> tuple:
    """(sell_lo px, vol, sell_vol), (buy_hi px, vol, buy_vol), last_px of row i."""
    r = rec[i]
    return ((int(r["sell_lo_px"]), int(r["sell_lo_vol"]), int(r["sell_vol"])),
            (int(r["buy_hi_px"]), int(r["buy_hi_vol"]), int(r["buy_vol"])), int(r["last_px"]))


EMPTY = ((PRICE_UNDEF, 0, 0), (PRICE_UNDEF, 0, 0), PRICE_UNDEF)


# ---- DBN ------------------------------------------------------------------------------------------------

def dbn_file(path, rec, events):
    """rec's books as DBN MBP-10 rows encoded by databento-dbn; events[i] = (action, side, price, size, ts_event)."""
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    meta = dbn.Metadata(dataset="GLBX.MDP3", start=int(rec["ts_ns"].min()), stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBP_10, symbols=["ESZ4"], version=3)
    sides = ("bid_px", "ask_px", "bid_sz", "ask_sz", "bid_ct", "ask_ct")
    body = []
    for i, (action, side, price, size, ts_event) in enumerate(events):
        levels = [dbn.BidAskPair(*(int(rec[k][i][lvl]) for k in sides)) for lvl in range(LEVELS)]
        body.append(bytes(dbn.MBP10Msg(publisher_id=1, instrument_id=int(rec["instrument_id"][i]), ts_event=ts_event,
                                       price=price, size=size, action=action, side=side, depth=0,
                                       ts_recv=int(rec["ts_ns"][i]), flags=0, levels=levels)))
    path.write_bytes(meta.encode() + b"".join(body))
    return path


def test_dbn_trades_by_their_aggressor_and_the_feed_delay(tmp_path):
    dbn = pytest.importorskip("databento_dbn", reason=NEEDS_DBN)
    rec = book(6)
    ts, bid, ask = rec["ts_ns"].tolist(), int(rec["bid_px"][2, 0]), int(rec["ask_px"][3, 0])
    A, T = dbn.Action.ADD, dbn.Action.TRADE
    events = [(A, dbn.Side.BID, bid, 4, ts[0] - 1000),
              (T, dbn.Side.ASK, bid, 3, ts[1] - 2500),   # a seller took 3 at the bid
              (T, dbn.Side.ASK, bid - TICK, 2, ts[2]),
              (T, dbn.Side.BID, ask, 5, ts[3] - 7),      # a buyer took 5 at the ask
              (T, dbn.Side.NONE, ask, 1, ts[4] + 9),     # no side; its event after its receive time
              (T, dbn.Side.BID, dbn.UNDEF_PRICE, 2, ts[5] - 1)]  # no price: counted, nothing else
    got, _, meta = read_dbn(dbn_file(tmp_path / "t.dbn", rec, events))
    assert [trades_of(got, i) for i in range(6)] == [
        EMPTY, ((bid, 3, 3), (PRICE_UNDEF, 0, 0), bid), ((bid - TICK, 2, 2), (PRICE_UNDEF, 0, 0), bid - TICK),
        ((PRICE_UNDEF, 0, 0), (ask, 5, 5), ask), ((PRICE_UNDEF, 0, 0), (PRICE_UNDEF, 0, 0), ask), EMPTY]
    assert got["trade_count"].tolist() == [0, 1, 1, 1, 1, 1]
    assert got["feed_delay_ns"].tolist() == [1000, 2500, 0, 7, 0, 1]
    assert meta["notes"] == ["1 trade without an aggressor side (side N): counted in trade_count and last_px only",
                             "1 row with the event time after the receive time (or none): feed delay 0"]


# ---- LOBSTER --------------------------------------------------------------------------------------------

def test_lobster_executions_are_trades_by_the_resting_orders_direction(tmp_path):
    rec = book(5)
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(5) * 1000
    bid, ask = (rec[side][:, 0] // 100_000 for side in ("bid_px", "ask_px"))
    events = [(1, 100, bid[0], 1),
              (4, 30, bid[1], 1),     # a visible buy order executed: the seller was the aggressor
              (5, 20, ask[2], -1),    # a hidden sell order executed: a buyer was
              (3, 10, ask[3], -1),    # a cancel
              (4, 7, ask[4], 0)]      # no direction
    got, _, meta = read_lobster(write_lobster(tmp_path, rec, 10, events=events))
    units = lambda x: int(x) * 100_000  # noqa: E731
    assert [trades_of(got, i) for i in range(5)] == [
        EMPTY, ((units(bid[1]), 30, 30), (PRICE_UNDEF, 0, 0), units(bid[1])),
        ((PRICE_UNDEF, 0, 0), (units(ask[2]), 20, 20), units(ask[2])), EMPTY,
        ((PRICE_UNDEF, 0, 0), (PRICE_UNDEF, 0, 0), units(ask[4]))]
    assert got["trade_count"].tolist() == [0, 1, 1, 0, 1] and not got["feed_delay_ns"].any()
    assert not (got["flags"] & FLAG_NO_TRADES).any()
    assert meta["notes"][-1] == ("1 trade without an aggressor side (a direction not 1 or -1, or a hidden order's: "
                                 "NASDAQ masks it from 2014-07-14, and a file of no date may be later): counted in "
                                 "trade_count and last_px only")


@pytest.mark.parametrize("day, known", [("2014-07-11", True), ("2014-07-14", False), (None, False)])
def test_a_hidden_orders_direction_from_2014_07_14_says_no_side(tmp_path, day, known):
    """LOBSTER: from 2014-07-14 NASDAQ's feed gives a hidden order executed as a buy order, whichever it was."""
    rec = book(3)
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(3) * 1000
    bid = rec["bid_px"][:, 0] // 100_000
    events = [(1, 100, bid[0], 1), (5, 20, bid[1], 1), (4, 30, bid[2], 1)]
    path = write_lobster(tmp_path, rec, 2, day=day or "2012-06-21", events=events)
    if day is None:
        for kind in ("orderbook", "message"):
            src = next(tmp_path.glob(f"*_{kind}_2.csv"))
            path = src.rename(tmp_path / f"plain_{kind}_2.csv")
        path = tmp_path / "plain_orderbook_2.csv"
    got, _, _ = read_lobster(path)
    assert got["sell_vol"].tolist() == [0, 20 if known else 0, 30] and got["last_px"][1] == bid[1] * 100_000


def test_a_lobster_message_file_of_fewer_than_six_columns_is_refused(tmp_path):
    rec = book(3)
    path = write_lobster(tmp_path, rec, 1)
    message = path.with_name(path.name.replace("orderbook", "message"))
    message.write_text("".join(",".join(line.split(",")[:2]) + "\n" for line in message.read_text().splitlines()))
    with pytest.raises(DataError, match="2 columns, expected at least 6"):
        read_lobster(path)


# ---- Parquet --------------------------------------------------------------------------------------------

def databento_table(rec, events, drop=()) -> pa.Table:
    """rec's books in Databento's MBP-10 Parquet layout; events[i] = (action, side, price, size, ts_event)."""
    cols = {"ts_recv": pa.array(rec["ts_ns"].astype(np.uint64))}
    for side in ("bid", "ask"):
        for lvl in range(LEVELS):
            cols[f"{side}_px_{lvl:02d}"] = pa.array(rec[f"{side}_px"][:, lvl])
            cols[f"{side}_sz_{lvl:02d}"] = pa.array(rec[f"{side}_sz"][:, lvl])
    for k, name in enumerate(("action", "side", "price", "size", "ts_event")):
        cols[name] = pa.array([e[k] for e in events], (pa.string(), pa.string(), pa.int64(), pa.uint32(),
                                                        pa.uint64())[k])
    return pa.table({k: v for k, v in cols.items() if k not in drop})


def test_parquet_databento_columns_are_read_as_dbn_rows(tmp_path):
    rec = book(4)
    ts, bid, ask = rec["ts_ns"].tolist(), int(rec["bid_px"][1, 0]), int(rec["ask_px"][2, 0])
    events = [("A", "B", bid, 4, ts[0] - 10), ("T", "A", bid, 3, ts[1] - 20), ("T", "B", ask, 6, ts[2] + 1),
              ("T", "N", ask, 1, ts[3] - 40)]
    pq.write_table(databento_table(rec, events), tmp_path / "d.parquet")
    got, _, meta = read_parquet(tmp_path / "d.parquet")
    assert [trades_of(got, i) for i in range(4)] == [
        EMPTY, ((bid, 3, 3), (PRICE_UNDEF, 0, 0), bid), ((PRICE_UNDEF, 0, 0), (ask, 6, 6), ask),
        ((PRICE_UNDEF, 0, 0), (PRICE_UNDEF, 0, 0), ask)]
    assert got["feed_delay_ns"].tolist() == [10, 20, 0, 40] and got["trade_count"].tolist() == [0, 1, 1, 1]
    assert not (got["flags"] & FLAG_NO_TRADES).any()
    assert meta["notes"][-2:] == ["1 trade without an aggressor side (side not A or B): counted in trade_count and "
                                  "last_px only", "1 row with the event time after the receive time (or none): feed "
                                  "delay 0"]

    pq.write_table(databento_table(rec, events, drop=("side",)), tmp_path / "d.parquet")  # no sides: prices only
    got, _, meta = read_parquet(tmp_path / "d.parquet")
    assert [trades_of(got, i)[2] for i in range(4)] == [PRICE_UNDEF, bid, ask, ask]
    assert not got["sell_vol"].any() and not got["buy_vol"].any() and (got["flags"] & FLAG_NO_TRADES).all()
    assert any(n.startswith("no side column: trades' sides are unknown (every row FLAG_NO_TRADES)") for n in
               meta["notes"])

    pq.write_table(databento_table(rec, events, drop=("action", "side", "price", "size")), tmp_path / "d.parquet")
    got, _, meta = read_parquet(tmp_path / "d.parquet")
    assert (got["last_px"] == PRICE_UNDEF).all() and (got["flags"] == FLAG_NO_TRADES).all()
    assert "no action or side or price or size column: trades' sides are unknown (no trade prices; every row " \
           "FLAG_NO_TRADES): resting orders fill only when the opposite touch moves through them" in meta["notes"]


def test_records_round_trip_through_foxcs_parquet(tmp_path):
    rng = np.random.default_rng(3)
    rec = book(600)
    n = len(rec)
    rec["prev_ts_ns"], rec["segment"] = 0, 0  # load() sets them; the file holds neither
    rec["trade_count"] = rng.integers(0, 5, n)
    for side, sign in (("sell_lo", -1), ("buy_hi", 1)):
        traded = rng.random(n) < 0.4
        rec[f"{side}_px"] = np.where(traded, rec["bid_px"][:, 0] + sign * rng.integers(0, 3, n) * TICK, PRICE_UNDEF)
        rec[f"{side}_vol"] = np.where(traded, rng.integers(1, 50, n), 0)
        rec[f"{side.split('_')[0]}_vol"] = rec[f"{side}_vol"] + np.where(traded, rng.integers(0, 9, n), 0)
    rec["last_px"] = np.where(rng.random(n) < 0.5, rec["ask_px"][:, 0], PRICE_UNDEF)
    rec["feed_delay_ns"] = rng.integers(0, 10**6, n)
    rec["flags"] = rng.integers(0, 256, n) | np.where(rng.random(n) < 0.3, FLAG_NO_TRADES, 0)
    write_parquet(tmp_path / "r.parquet", rec)
    got, bad, _ = read_parquet(tmp_path / "r.parquet")
    assert got.tobytes() == rec.tobytes() and not bad.any()


# ---- skipped rows' trades -------------------------------------------------------------------------------

def crossed(rec, i):
    rec["bid_px"][i] = rec["ask_px"][i] + TICK


def test_a_skipped_rows_trades_go_into_the_next_kept_row():
    rec = book(8)
    p = int(rec["bid_px"][3, 0])
    for i in (1, 2, 5, 7):
        crossed(rec, i)
    rec["sell_lo_px"][[1, 2, 3]], rec["sell_lo_vol"][[1, 2, 3]], rec["sell_vol"][[1, 2, 3]] = \
        [p - TICK, p - TICK, p], [2, 3, 1], [4, 3, 1]
    rec["buy_hi_px"][2], rec["buy_hi_vol"][2], rec["buy_vol"][2] = p + 2 * TICK, 6, 6
    rec["last_px"][[1, 2, 3]] = [p - TICK, p + 2 * TICK, p]
    rec["trade_count"][[1, 2, 3]] = [2, 2, 1]
    rec["last_px"][5], rec["buy_hi_px"][5], rec["buy_hi_vol"][5], rec["buy_vol"][5] = p, p, 1, 1
    rec["last_px"][7] = p  # after the last kept row: nowhere to go
    for rows in (1, 2, 3, 8):  # chunks of any size: the file read whole
        validator = validate.Validator(ValidationConfig())
        kept = np.concatenate([validator.keep(rec[i:i + rows].copy(), None) for i in range(0, len(rec), rows)])
        validator.finish()
        assert kept["ts_ns"].tolist() == rec["ts_ns"][[0, 3, 4, 6]].tolist()
        assert trades_of(kept, 1) == ((p - TICK, 5, 8), (p + 2 * TICK, 6, 6), p), rows  # its own last: the latest
        assert trades_of(kept, 2) == EMPTY and trades_of(kept, 3) == ((PRICE_UNDEF, 0, 0), (p, 1, 1), p)
        assert kept["trade_count"].tolist() == rec["trade_count"][[0, 3, 4, 6]].tolist()  # the reader's, as it was
        assert validator.trade_notes() == ["the trades of 1 skipped row were left out: no later row of the "
                                           "instrument was kept"]


def test_a_skipped_rows_trades_stay_with_their_instrument(tmp_path):
    """Into its instrument's next kept row; another instrument's rows, left out by --instrument, give none."""
    rec = book(9)
    rec["instrument_id"] = [1, 2, 1, 2, 1, 1, 1, 1, 1]
    p = int(rec["bid_px"][2, 0])
    crossed(rec, 2)
    for i, px in ((1, p - 3 * TICK), (2, p - TICK), (3, p - 2 * TICK)):
        rec["sell_lo_px"][i], rec["sell_lo_vol"][i], rec["sell_vol"][i], rec["last_px"][i] = px, 1, 1, px
    write_parquet(tmp_path / "two.parquet", rec)
    for rows in (1, 3, 100):
        stream = FileStream(tmp_path / "two.parquet", rows=rows, instrument="1")
        kept = np.concatenate(list(stream))
        assert kept["ts_ns"].tolist() == rec["ts_ns"][[0, 4, 5, 6, 7, 8]].tolist()
        assert trades_of(kept, 1) == ((p - TICK, 1, 1), (PRICE_UNDEF, 0, 0), p - TICK), rows
        assert trades_of(kept, 0) == EMPTY and stream.summary().notes == []


def test_a_skipped_row_whose_trade_is_refused_gives_none(tmp_path):
    rec = book(4)
    crossed(rec, 1)
    rec["sell_lo_px"][1], rec["sell_lo_vol"][1], rec["sell_vol"][1] = -TICK, 1, 1  # at or below zero
    kept, skipped = validate.apply(rec, None, ValidationConfig())
    assert trades_of(kept, 1) == EMPTY and skipped["nonpositive_price"] == 1


@pytest.mark.parametrize("name", ["sell_lo_px", "buy_hi_px", "last_px"])
def test_a_trade_price_between_ticks_loads_as_printed(tmp_path, name):
    """A hidden order's midpoint execution prints between ticks: the trade is kept at its price (a resting order,
    on the tick, is then traded through or not); tests/test_data_tick.py refuses a book price off the tick."""
    rec = book(300)
    rec[name][200] = rec["bid_px"][200, 0] + TICK // 2
    if name != "last_px":
        rec[f"{name[:-3]}_vol"][200] = rec[f"{name.split('_')[0]}_vol"][200] = 1
    write_parquet(tmp_path / "mid.parquet", rec)
    got = load(tmp_path / "mid.parquet").records
    assert got[name][200] == rec[name][200] and len(got) == 300


def test_a_trade_price_out_of_range_skips_its_row_as_a_books_would():
    rec = book(5)
    rec["last_px"][1] = 10**18
    rec["buy_hi_px"][3], rec["buy_hi_vol"][3], rec["buy_vol"][3] = 0, 2, 2
    kept, skipped = validate.apply(rec, None, ValidationConfig())
    assert {k: v for k, v in skipped.items() if v} == {"price_out_of_range": 1, "nonpositive_price": 1}
    assert len(kept) == 3 and SNAPSHOT_DTYPE == kept.dtype


def test_a_skipped_rows_trades_do_not_cross_into_the_next_instruments_rows():
    """A roll (ids one after another): the trades of the old contract's last rows are not the new one's."""
    rec = book(5)
    rec["instrument_id"] = [1, 1, 1, 2, 2]
    crossed(rec, 2)
    p = int(rec["bid_px"][1, 0])
    rec["sell_lo_px"][2], rec["sell_lo_vol"][2], rec["sell_vol"][2], rec["last_px"][2] = p, 4, 4, p
    kept, _ = validate.apply(rec, None, ValidationConfig())
    assert [trades_of(kept, i) for i in range(4)] == [EMPTY] * 4
    stream_notes = validate.Validator(ValidationConfig())
    stream_notes.keep(rec.copy(), None)
    stream_notes.finish()
    assert stream_notes.trade_notes() == ["the trades of 1 skipped row were left out: no later row of the instrument "
                                          "was kept"]


def test_inspect_says_what_the_rows_hold_of_trades(tmp_path, capsys):
    """`foxc.data inspect` prints each side's traded volume and the feed delay, or that the source knows none."""
    from foxc.data.__main__ import main
    rec = generate(400, seed=2)  # the synthetic market's trades
    write_parquet(tmp_path / "with.parquet", rec)
    assert main(["inspect", str(tmp_path / "with.parquet")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("trades"))
    share = ((rec["sell_vol"] > 0) | (rec["buy_vol"] > 0)).mean()
    assert line == (f"trades      {share:.1%} of rows; seller-initiated {int(rec['sell_vol'].sum()):,}, buyer-initiated "
                    f"{int(rec['buy_vol'].sum()):,} lots; feed delay median 0.0 µs, max 0.0 µs")
    assert rec["sell_vol"].sum() > 0 and rec["buy_vol"].sum() > 0
    pq.write_table(databento_table(rec, [("A", "N", 0, 0, 0)] * len(rec), drop=("action", "side", "price", "size")),
                   tmp_path / "without.parquet")
    assert main(["inspect", str(tmp_path / "without.parquet")]) == 0
    assert ("trades      none known (FLAG_NO_TRADES): resting orders fill only when the opposite touch moves through "
            "them") in capsys.readouterr().out
