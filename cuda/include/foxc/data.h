// Generated from foxc/data/features.py by `python -m foxc.data.features --write`. Do not edit.
#ifndef FOXC_DATA_H
#define FOXC_DATA_H

// features: float32 [K][B][FOXC_FEATURES] (time-major, as the encoder reads them): row (k, b) is
// snapshot k of backtest b's window, k = 0 the oldest.
#define FOXC_F_BID_PX     0           // 10: (bid_px[l] - mid) / tick; 0 for an empty level
#define FOXC_F_ASK_PX     10          // 10: (ask_px[l] - mid) / tick; 0 for an empty level
#define FOXC_F_BID_SZ     20          // 10: log1p(bid_sz[l])
#define FOXC_F_ASK_SZ     30          // 10: log1p(ask_sz[l])
#define FOXC_F_SPREAD     40          // (ask_px[0] - bid_px[0]) / tick
#define FOXC_F_IMBALANCE  41          // (bid_sz[0] - ask_sz[0]) / (bid_sz[0] + ask_sz[0]); 0 when both are 0
#define FOXC_F_DEPTH_IMB  42          // the same over all ten levels
#define FOXC_F_MID_REL    43          // (mid - mid of the window's newest snapshot) / tick
#define FOXC_F_LOG_DT     44          // log1p(microseconds since the previous snapshot)
#define FOXC_F_LOG_TRADES 45          // log1p(trade_count)
#define FOXC_FEATURES     46

// labels: float32 [FOXC_LABEL_PLANES][FOXC_HORIZONS][n_records] on the device (foxc/data/labels.py
// PLANES); gathered at each backtest's cursor into float32 [FOXC_LABEL_PLANES][B][FOXC_HORIZONS].
#define FOXC_HORIZONS      3
#define FOXC_LABEL_SOURCES 5           // mid_up, long_win, short_win, long_size, short_size
#define FOXC_LABEL_PLANES  7           // the five sources, then mid_weight, outcome_weight
#define FOXC_GATHER_BLOCK  128
#define FOXC_GATHER_MAX_K  128         // the window is staged in shared memory: K * 400 bytes (past 48 KB the plan opts in)

#endif  // FOXC_DATA_H
