// Generated from foxc/data/record.py by `python -m foxc.data.record --write`. Do not edit.
#ifndef FOXC_SNAPSHOT_H
#define FOXC_SNAPSHOT_H

#include <cstddef>
#ifndef __CUDACC__
#define __align__(n) alignas(n)  // lets a host compiler check the layout too
#endif

#define FOXC_LEVELS 10
#define FOXC_PRICE_SCALE 1000000000LL  // price units per 1.0
#define FOXC_PRICE_UNDEF 0x7FFFFFFFFFFFFFFFLL  // an empty level
#define FOXC_FLAG_NO_TRADES 256u  // the source says nothing of trades

// One MBP-10 snapshot; the layout of numpy's SNAPSHOT_DTYPE.
struct __align__(8) FoxcSnapshot {
    long long ts_ns;  // time, ns since the Unix epoch, UTC (Databento: ts_recv; LOBSTER: New York time stored as UTC)
    long long prev_ts_ns;  // the previous snapshot's ts_ns in the same segment (its own ts_ns for the first)
    long long feed_delay_ns;  // ts_ns minus the exchange's time of the event (Databento: ts_recv - ts_event; 0 where the source has one time): resting orders live on the exchange's clock
    long long bid_px[FOXC_LEVELS];  // bid prices × 1e9, best first; PRICE_UNDEF when the level is empty
    long long ask_px[FOXC_LEVELS];  // ask prices × 1e9, best first; PRICE_UNDEF when the level is empty
    long long sell_lo_px;  // lowest price a seller-initiated trade printed at since the previous snapshot; PRICE_UNDEF when none
    long long buy_hi_px;  // highest price a buyer-initiated trade printed at since the previous snapshot; PRICE_UNDEF when none
    long long last_px;  // price of the last trade since the previous snapshot (either side); PRICE_UNDEF when none
    unsigned int bid_sz[FOXC_LEVELS];  // displayed size at each bid level; 0 when empty
    unsigned int ask_sz[FOXC_LEVELS];  // displayed size at each ask level; 0 when empty
    unsigned int bid_ct[FOXC_LEVELS];  // orders at each bid level; 0 when the source does not say
    unsigned int ask_ct[FOXC_LEVELS];  // orders at each ask level; 0 when the source does not say
    unsigned int sell_lo_vol;  // volume of the seller-initiated trades at sell_lo_px (0: no such trade)
    unsigned int buy_hi_vol;  // volume of the buyer-initiated trades at buy_hi_px (0: no such trade)
    unsigned int sell_vol;  // volume of all seller-initiated trades since the previous snapshot
    unsigned int buy_vol;  // volume of all buyer-initiated trades since the previous snapshot
    unsigned int trade_count;  // trades since the previous snapshot
    unsigned int segment;  // its segment: a file, or one instrument's rows in it (windows never cross one)
    unsigned int instrument_id;  // the source's instrument id (0 when unknown)
    unsigned int flags;  // source flags (Databento's flags byte; 0 otherwise)
};
static_assert(sizeof(FoxcSnapshot) == 400, "FoxcSnapshot size");
static_assert(offsetof(FoxcSnapshot, ts_ns) == 0, "FoxcSnapshot.ts_ns offset");
static_assert(offsetof(FoxcSnapshot, prev_ts_ns) == 8, "FoxcSnapshot.prev_ts_ns offset");
static_assert(offsetof(FoxcSnapshot, feed_delay_ns) == 16, "FoxcSnapshot.feed_delay_ns offset");
static_assert(offsetof(FoxcSnapshot, bid_px) == 24, "FoxcSnapshot.bid_px offset");
static_assert(offsetof(FoxcSnapshot, ask_px) == 104, "FoxcSnapshot.ask_px offset");
static_assert(offsetof(FoxcSnapshot, sell_lo_px) == 184, "FoxcSnapshot.sell_lo_px offset");
static_assert(offsetof(FoxcSnapshot, buy_hi_px) == 192, "FoxcSnapshot.buy_hi_px offset");
static_assert(offsetof(FoxcSnapshot, last_px) == 200, "FoxcSnapshot.last_px offset");
static_assert(offsetof(FoxcSnapshot, bid_sz) == 208, "FoxcSnapshot.bid_sz offset");
static_assert(offsetof(FoxcSnapshot, ask_sz) == 248, "FoxcSnapshot.ask_sz offset");
static_assert(offsetof(FoxcSnapshot, bid_ct) == 288, "FoxcSnapshot.bid_ct offset");
static_assert(offsetof(FoxcSnapshot, ask_ct) == 328, "FoxcSnapshot.ask_ct offset");
static_assert(offsetof(FoxcSnapshot, sell_lo_vol) == 368, "FoxcSnapshot.sell_lo_vol offset");
static_assert(offsetof(FoxcSnapshot, buy_hi_vol) == 372, "FoxcSnapshot.buy_hi_vol offset");
static_assert(offsetof(FoxcSnapshot, sell_vol) == 376, "FoxcSnapshot.sell_vol offset");
static_assert(offsetof(FoxcSnapshot, buy_vol) == 380, "FoxcSnapshot.buy_vol offset");
static_assert(offsetof(FoxcSnapshot, trade_count) == 384, "FoxcSnapshot.trade_count offset");
static_assert(offsetof(FoxcSnapshot, segment) == 388, "FoxcSnapshot.segment offset");
static_assert(offsetof(FoxcSnapshot, instrument_id) == 392, "FoxcSnapshot.instrument_id offset");
static_assert(offsetof(FoxcSnapshot, flags) == 396, "FoxcSnapshot.flags offset");

#endif  // FOXC_SNAPSHOT_H
