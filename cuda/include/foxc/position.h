// What the agent reads off a simulator position record (cuda/agent/state.cu, cuda/trainer/bridge.cu).
#ifndef FOXC_POSITION_H
#define FOXC_POSITION_H
#include "foxc/lobsim.h"

// The open trade's drawdown from its peak, in price units per lot: while a position is held
// without fills its equity moves with its unrealized PnL, so the fall from the peak is
// trail_hwm (the best unrealized PnL since entry) minus the unrealized PnL now; 0 when flat.
// Earlier trades' losses do not count: they neither trip the stop-loss of a new trade nor
// penalise holding no position.
__device__ __forceinline__ float trade_drawdown(const FoxcPosition& p, float money_scale)
{
    if (p.lots == 0) return 0.0f;
    const long long fall = p.trail_hwm - p.unrealized_pnl;
    return (float)((double)(fall > 0 ? fall : 0) * (double)money_scale);
}

#endif  // FOXC_POSITION_H
