// Generated from foxc/isv/registry.py by `python -m foxc.isv.header --write`. Do not edit.
#ifndef FOXC_ISV_SLOTS_H
#define FOXC_ISV_SLOTS_H

#define ISV_N_SLOTS 33
#define ISV_STEP_WRAP 16777216.0f

#define ISV_STEP_LO                 0  // training steps modulo 2^24 (exact in float32); incremented on the device
#define ISV_STEP_HI                 1  // how many times step_lo wrapped at 2^24; step = step_hi * 2^24 + step_lo
#define ISV_LR_ENCODER              2  // AdamW learning rate of the encoder; Adam's usual 3e-4 for a small model
#define ISV_LR_Q                    3  // AdamW learning rate of the C51 Q head; lower than the encoder's, as bootstrapped targets move
#define ISV_LR_POLICY               4  // AdamW learning rate of the policy head; matches Q so actor and critic move together
#define ISV_LR_VALUE                5  // AdamW learning rate of the value head (a plain regression)
#define ISV_LR_PERCEPTION           6  // AdamW learning rate of the perception heads (supervised BCE)
#define ISV_GAMMA                   7  // discount per step; a 100-step effective horizon, the longest label horizon
#define ISV_TAU                     8  // target network soft-update rate per step (200-step time constant)
#define ISV_N_STEP                  9  // n of the n-step return in use (1 to 8, at most the ring's allocated length)
#define ISV_PER_ALPHA              10  // PER priority exponent; 0.6 from the PER paper's proportional variant
#define ISV_PER_BETA               11  // PER importance-sampling exponent, annealed towards 1 by the controller
#define ISV_REWARD_CLAMP_LO        12  // lower reward clamp after PopArt scaling, in standard deviations
#define ISV_REWARD_CLAMP_HI        13  // upper reward clamp after PopArt scaling, in standard deviations
#define ISV_REWARD_SCALE           14  // multiplier on the raw reward before normalisation
#define ISV_POPART_MEAN            15  // PopArt running mean of the raw reward
#define ISV_POPART_VAR             16  // PopArt running variance of the raw reward; 1 so the first steps are unscaled
#define ISV_POPART_RATE            17  // PopArt EMA rate (about 1,000 steps of memory)
#define ISV_GATE_THRESHOLD         18  // confidence gate: entries need the policy's probability above this; 0 gates nothing
#define ISV_DRAWDOWN_PENALTY_RATE  19  // reward penalty per unit of normalised drawdown per step (penalty only)
#define ISV_STOP_LOSS_THRESHOLD    20  // normalised drawdown from peak equity that forces a flat exit
#define ISV_MEAN_ABS_PNL_EMA       21  // EMA of |PnL| per closed trade: the drawdown normaliser; 1 until trades close
#define ISV_LOSS_EMA_Q             22  // EMA of the C51 cross-entropy loss
#define ISV_LOSS_EMA_PI            23  // EMA of the policy loss
#define ISV_LOSS_EMA_V             24  // EMA of the value loss
#define ISV_LOSS_EMA_BCE           25  // EMA of the perception BCE loss
#define ISV_C51_V_MIN              26  // lowest atom of the C51 support, in normalised reward units
#define ISV_C51_V_MAX              27  // highest atom of the C51 support; with gamma 0.99 and clamp 5, returns stay inside
#define ISV_ENTROPY_COEF           28  // policy entropy bonus coefficient
#define ISV_GRAD_CLIP_NORM         29  // global gradient-norm clip per update
#define ISV_RL_TO_ENCODER_LAMBDA   30  // scale of the RL heads' gradient on h added to the encoder's (grad_h_accumulate_scaled)
#define ISV_EXPLORATION_FLOOR      31  // minimum probability mixed into every action when sampling
#define ISV_LOSS_EMA_RATE          32  // EMA rate of the loss EMAs (about 100 steps)

#endif  // FOXC_ISV_SLOTS_H
