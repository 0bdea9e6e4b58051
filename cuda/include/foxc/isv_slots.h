// Generated from foxc/isv/registry.py by `python -m foxc.isv.header --write`. Do not edit.
#ifndef FOXC_ISV_SLOTS_H
#define FOXC_ISV_SLOTS_H

#define ISV_N_SLOTS 74
#define ISV_STEP_WRAP 16777216.0f

#define ISV_STEP_LO                  0  // training steps modulo 2^24 (exact in float32); incremented on the device
#define ISV_STEP_HI                  1  // how many times step_lo wrapped at 2^24; step = step_hi * 2^24 + step_lo
#define ISV_LR_ENCODER               2  // AdamW learning rate of the encoder; Adam's usual 3e-4 for a small model
#define ISV_LR_Q                     3  // AdamW learning rate of the C51 Q head; lower than the encoder's, as bootstrapped targets move
#define ISV_LR_POLICY                4  // AdamW learning rate of the policy head; matches Q so actor and critic move together
#define ISV_LR_VALUE                 5  // AdamW learning rate of the value head (a plain regression)
#define ISV_LR_PERCEPTION            6  // AdamW learning rate of the perception heads (supervised BCE)
#define ISV_GAMMA                    7  // discount per step; a 100-step effective horizon, the longest label horizon
#define ISV_TAU                      8  // target network soft-update rate per step (200-step time constant)
#define ISV_N_STEP                   9  // n of the n-step return in use (1 to 8, at most the ring's allocated length)
#define ISV_PER_ALPHA               10  // PER priority exponent; 0.6 from the PER paper's proportional variant
#define ISV_PER_BETA                11  // PER importance-sampling exponent, annealed towards 1 by the controller
#define ISV_REWARD_CLAMP_LO         12  // lower reward clamp after PopArt scaling (ticks while PopArt is frozen at var 1)
#define ISV_REWARD_CLAMP_HI         13  // upper reward clamp after PopArt scaling (ticks while PopArt is frozen at var 1)
#define ISV_REWARD_SCALE            14  // multiplier on the raw reward (the equity change in ticks per lot) before normalisation
#define ISV_POPART_MEAN             15  // PopArt running mean of the raw reward
#define ISV_POPART_VAR              16  // PopArt running variance of the raw reward; 1 so the first steps are unscaled
#define ISV_POPART_RATE             17  // PopArt EMA rate; 0 (frozen at var 1): rewards are in ticks, a scale that holds still, and a moving scale would move every target under the C51 support
#define ISV_GATE_THRESHOLD          18  // confidence gate (gate_enabled): an entry whose Boltzmann probability is below this becomes HOLD; the controller keeps it in [0.05, 0.95]
#define ISV_DRAWDOWN_PENALTY_RATE   19  // reward penalty per unit of the open trade's normalised drawdown per step (penalty only); 0: off, it taxes holding, where the edge is
#define ISV_STOP_LOSS_THRESHOLD     20  // open trade's drawdown from its peak equity, over mean_abs_pnl_ema, that forces a flat exit; 0: off
#define ISV_MEAN_ABS_PNL_EMA        21  // EMA of |PnL| per closed trade: the drawdown normaliser; 1 until trades close
#define ISV_LOSS_EMA_Q              22  // EMA of the C51 cross-entropy loss
#define ISV_LOSS_EMA_PI             23  // EMA of the policy loss
#define ISV_LOSS_EMA_V              24  // EMA of the value loss
#define ISV_LOSS_EMA_BCE            25  // EMA of the perception BCE loss
#define ISV_C51_V_MIN               26  // lowest atom of the C51 support, in ticks (the reward's unit)
#define ISV_C51_V_MAX               27  // highest atom of the C51 support, in ticks: discounted returns of one lot over ~100 snapshots
#define ISV_ENTROPY_COEF            28  // not read: the policy head is distilled from Q and has no entropy bonus (kept for the slot index)
#define ISV_GRAD_CLIP_NORM          29  // global gradient-norm clip per update
#define ISV_RL_TO_ENCODER_LAMBDA    30  // not read: replayed states are not the rows the encoder just encoded, so the RL heads do not train the encoder (kept for the slot index)
#define ISV_EXPLORATION_FLOOR       31  // not read: exploration is the epsilon schedule explore_eps_* (kept for the slot index)
#define ISV_LOSS_EMA_RATE           32  // EMA rate of the loss EMAs (about 100 steps)
#define ISV_LR_MIN                  33  // floor of every plateau-decayed learning rate
#define ISV_LR_DECAY_FACTOR         34  // learning-rate multiplier when a head's loss plateaus
#define ISV_LR_PLATEAU_PATIENCE     35  // steps without improvement before a head's learning rate decays
#define ISV_LR_PLATEAU_IMPROVEMENT  36  // a loss EMA below best x this counts as an improvement (0.5 %)
#define ISV_LR_WARMUP_STEPS         37  // steps before plateau detection starts (losses are noisy while the buffer fills)
#define ISV_BEST_LOSS_Q             38  // plateau controller: best C51 loss EMA seen
#define ISV_PLATEAU_COUNT_Q         39  // plateau controller: steps since the C51 loss improved
#define ISV_BEST_LOSS_PI            40  // plateau controller: best policy loss EMA seen
#define ISV_PLATEAU_COUNT_PI        41  // plateau controller: steps since the policy loss improved
#define ISV_BEST_LOSS_V             42  // plateau controller: best value loss EMA seen
#define ISV_PLATEAU_COUNT_V         43  // plateau controller: steps since the value loss improved
#define ISV_BEST_LOSS_BCE           44  // plateau controller: best perception loss EMA seen
#define ISV_PLATEAU_COUNT_BCE       45  // plateau controller: steps since the perception loss improved
#define ISV_PER_BETA_ANNEAL_STEPS   46  // steps over which PER beta rises linearly to 1 (full IS correction)
#define ISV_ENTROPY_TARGET          47  // not read (no entropy controller: see entropy_coef)
#define ISV_ENTROPY_COEF_RATE       48  // not read (no entropy controller: see entropy_coef)
#define ISV_ENTROPY_COEF_MIN        49  // not read (no entropy controller: see entropy_coef)
#define ISV_ENTROPY_COEF_MAX        50  // not read (no entropy controller: see entropy_coef)
#define ISV_ACTION_ENTROPY_EMA      51  // EMA of the sampling distribution's entropy (rate loss_ema_rate)
#define ISV_REWARD_CLIP_FRAC_EMA    52  // EMA of the fraction of scaled rewards that hit a clamp bound (rate loss_ema_rate)
#define ISV_REWARD_CLIP_TARGET      53  // adaptive clamp: widen when more than 1 % of rewards clip, narrow below 0.25 %
#define ISV_REWARD_CLAMP_RATE       54  // relative step of the adaptive clamp bounds per step
#define ISV_REWARD_CLAMP_MIN        55  // the adaptive clamp never narrows below +-5 (ticks): a reversal across a wide spread costs several
#define ISV_REWARD_CLAMP_MAX        56  // the adaptive clamp never widens beyond +-10 (ticks)
#define ISV_EXPLORE_EPS_START       57  // probability per step that an exploration segment starts (a random valid action, its position then held), at step 0
#define ISV_EXPLORE_EPS_END         58  // that probability after explore_eps_steps; greedy evaluation never explores
#define ISV_EXPLORE_EPS_STEPS       59  // steps over which epsilon falls linearly from explore_eps_start to explore_eps_end
#define ISV_DISTILL_TEMPERATURE     60  // the policy head learns softmax(Q / this) over the valid actions, Q in ticks
#define ISV_EXPLORE_HOLD_STEPS      61  // mean length of an exploration segment in steps (geometric): about the signal's persistence, so exploring shows what holding earns
#define ISV_GATE_ENABLED            62  // 1: the seed's confidence gate acts (off by default: measured no better, BENCHMARKS.md)
#define ISV_GATE_HOLD_TARGET        63  // the HOLD fraction the gate's threshold controller steers towards
#define ISV_GATE_LAMBDA             64  // the gate threshold's step per unit of (target - HOLD fraction EMA) per step
#define ISV_GATE_MAX_HOLD_FRAC      65  // above this HOLD fraction EMA the gate lets every entry through (a 15 % floor of trading)
#define ISV_GATE_WARMUP_STEPS       66  // steps before the gate acts
#define ISV_HOLD_FRAC_EMA           67  // EMA (rate 0.1) of the fraction of backtests whose action is HOLD
#define ISV_REWARD_CLAMP_MODE       68  // 0: symmetric clamp widened and narrowed by the clip fraction; 1: the seed's asymmetric loss clamp
#define ISV_REWARD_CLAMP_WIN        69  // the seed's clamp (mode 1): rewards above this are clipped; the loss side adapts as a multiple of it
#define ISV_REWARD_POS_EMA          70  // EMA (rate loss_ema_rate) of the mean positive raw reward
#define ISV_REWARD_NEG_EMA          71  // EMA (rate loss_ema_rate) of the mean magnitude of the negative raw rewards
#define ISV_PRICE_UNIT_TICKS        72  // the agent's unit of price in ticks: the training data's median spread; prices, spreads, rewards and Q are in it
#define ISV_ENTRY_MARGIN            73  // greedy acting opens or reverses a position only when the C51 mean of that action beats staying out (HOLD when flat, the exit when reversing) by more than this, in price units (spreads): an unsure agent stays flat

#endif  // FOXC_ISV_SLOTS_H
