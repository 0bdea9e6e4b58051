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

// One MBP-10 snapshot; the layout of numpy's SNAPSHOT_DTYPE.
struct __align__(8) FoxcSnapshot {
    long long ts_ns;  // time, ns since the Unix epoch, UTC (Databento: ts_recv; LOBSTER: New York time stored as UTC)
    long long prev_ts_ns;  // the previous snapshot's ts_ns in the same segment (its own ts_ns for the first)
    long long bid_px[FOXC_LEVELS];  // bid prices × 1e9, best first; PRICE_UNDEF when the level is empty
    long long ask_px[FOXC_LEVELS];  // ask prices × 1e9, best first; PRICE_UNDEF when the level is empty
    unsigned int bid_sz[FOXC_LEVELS];  // displayed size at each bid level; 0 when empty
    unsigned int ask_sz[FOXC_LEVELS];  // displayed size at each ask level; 0 when empty
    unsigned int bid_ct[FOXC_LEVELS];  // orders at each bid level; 0 when the source does not say
    unsigned int ask_ct[FOXC_LEVELS];  // orders at each ask level; 0 when the source does not say
    unsigned int trade_count;  // trades since the previous snapshot
    unsigned int segment;  // its segment: a file, or one instrument's rows in it (windows never cross one)
    unsigned int instrument_id;  // the source's instrument id (0 when unknown)
    unsigned int flags;  // source flags (Databento's flags byte; 0 otherwise)
};
static_assert(sizeof(FoxcSnapshot) == 352, "FoxcSnapshot size");
static_assert(offsetof(FoxcSnapshot, ts_ns) == 0, "FoxcSnapshot.ts_ns offset");
static_assert(offsetof(FoxcSnapshot, prev_ts_ns) == 8, "FoxcSnapshot.prev_ts_ns offset");
static_assert(offsetof(FoxcSnapshot, bid_px) == 16, "FoxcSnapshot.bid_px offset");
static_assert(offsetof(FoxcSnapshot, ask_px) == 96, "FoxcSnapshot.ask_px offset");
static_assert(offsetof(FoxcSnapshot, bid_sz) == 176, "FoxcSnapshot.bid_sz offset");
static_assert(offsetof(FoxcSnapshot, ask_sz) == 216, "FoxcSnapshot.ask_sz offset");
static_assert(offsetof(FoxcSnapshot, bid_ct) == 256, "FoxcSnapshot.bid_ct offset");
static_assert(offsetof(FoxcSnapshot, ask_ct) == 296, "FoxcSnapshot.ask_ct offset");
static_assert(offsetof(FoxcSnapshot, trade_count) == 336, "FoxcSnapshot.trade_count offset");
static_assert(offsetof(FoxcSnapshot, segment) == 340, "FoxcSnapshot.segment offset");
static_assert(offsetof(FoxcSnapshot, instrument_id) == 344, "FoxcSnapshot.instrument_id offset");
static_assert(offsetof(FoxcSnapshot, flags) == 348, "FoxcSnapshot.flags offset");

#endif  // FOXC_SNAPSHOT_H
