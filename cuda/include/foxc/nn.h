// Generated from foxc/nn/layout.py by `python -m foxc.nn.layout --write`. Do not edit.
#ifndef FOXC_NN_H
#define FOXC_NN_H

#define NN_SSM_PARTS             4           // input projection columns per channel: value, decay, input gate, output gate
#define NN_N_ACTIONS             5           // HOLD, LONG, SHORT, FLAT_FROM_LONG, FLAT_FROM_SHORT
#define NN_N_PASSIVE_ACTIONS     9           // and QUOTE_BID, QUOTE_ASK, QUOTE_BOTH, QUOTE_NONE
#define NN_C51_ATOMS             51
#define NN_N_PERCEPTION          9           // up/down, long wins, short wins at each label horizon
#define NN_ACT_IDENTITY          0           // activation codes of linear_fwd_* and act_bwd
#define NN_ACT_RELU              1
#define NN_ACT_TANH              2
#define NN_ACT_SIGMOID           3
#define NN_ADAMW_MAX_TENSORS     32          // adamw_all's table capacity
#define NN_GRAD_SPLITS_MAX       16          // reduce_grad_splits' table capacity (rows)
#define NN_GS_FIELDS             7           // int64 fields of a row of reduce_grad_splits' table
#define NN_GS_BEGIN              0
#define NN_GS_SIZE               1
#define NN_GS_SPLITS             2
#define NN_GS_PARTIALS           3
#define NN_GS_N_MAIN             4
#define NN_GS_OUT                5
#define NN_GS_TAIL               6
#define NN_LG_FIELDS             8           // int64 fields of a row of linear_fwd_*_group's table
#define NN_LG_Y                  0
#define NN_LG_X                  1
#define NN_LG_W                  2
#define NN_LG_BIAS               3
#define NN_LG_M                  4
#define NN_LG_K                  5
#define NN_LG_N                  6
#define NN_LG_ACT                7
#define NN_TG_FIELDS             8           // int64 fields of a row of matmul_tn_ones_f32_t32_group's table
#define NN_TG_C                  0
#define NN_TG_A                  1
#define NN_TG_B                  2
#define NN_TG_R                  3
#define NN_TG_M                  4
#define NN_TG_N                  5
#define NN_TG_R_CHUNK            6
#define NN_TG_Z_BEGIN            7
#define NN_PS_CHANNELS           32          // ssm_proj_scan_fwd: channels per block, one per lane
#define NN_PS_WINDOWS_PER_THREAD 2           // windows per thread
#define NN_PS_WARPS              8           // warps per block
#define NN_PS_MAX_FEATURES       48          // W_in rows held in shared memory
#define NN_PS_MIN_BLOCKS         2           // minimum resident blocks per SM (launch bounds)
#define NN_PS_F_UNROLL           4           // unrolling of the forward's loop over features
#define NN_PS_STEPS              4           // the forward's steps per chunk (projections computed together)

#endif  // FOXC_NN_H
