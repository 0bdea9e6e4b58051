// Generated from foxc/replay/layout.py by `python -m foxc.replay.layout --write`. Do not edit.
#ifndef FOXC_REPLAY_H
#define FOXC_REPLAY_H

#define REPLAY_ROW_BLOCK     128         // threads of the kernels that copy state rows (any row width)
#define REPLAY_N_STEP_MAX    8           // the longest n-step ring a buffer may allocate
#define RING_ACTION          0           // ring entry column: action as a float (exact: small integers)
#define RING_REWARD          1           // scaled reward
#define RING_REWARD_RAW      2           // raw reward
#define RING_DONE            3           // 1 when the episode ended at this step
#define RING_LOG_PI          4           // log pi_old of the action
#define RING_COLS            5
#define TR_ACTION            0           // transition column: action as a float
#define TR_RETURN            1           // n-step return of scaled rewards
#define TR_RETURN_RAW        2           // n-step return of raw rewards
#define TR_DONE              3           // 1 when the episode ended inside the window: no bootstrap
#define TR_LOG_PI            4           // log pi_old of the first action
#define TR_GAMMA_N           5           // gamma^m, m = steps in the window
#define TR_STEPS             6           // m, as a float
#define TR_COLS              8           // padded to 32 bytes
#define CTR_WRITE_HEAD       0           // counter: next slot to write
#define CTR_LENGTH           1           // filled slots, at most capacity
#define CTR_FLUSH_BASE       2           // write head before the latest flush
#define CTR_FLUSH_TOTAL      3           // transitions emitted by the latest flush (may exceed capacity)
#define CTR_COUNT            4
#define REPLAY_PRIORITY_EPS  1e-6f       // added to |TD| so no stored transition has priority 0
#define REPLAY_SUBTREE_SPAN  1024        // leaves one block of replay_update_tree owns and sums up
#define REPLAY_SUBTREE_BLOCK 512         // its block: one thread per node of the subtree's widest level
#define REPLAY_WALK_DEPTH    4           // tree levels per lookahead round of replay_sample's walk (30 nodes, a warp)
#define REPLAY_ROW_WARPS     4           // items a block of replay_sample / replay_next_state takes: one a warp

#endif  // FOXC_REPLAY_H
