"""The model: named parameter tensors in flat device buffers, and the launch plans of its passes.

    params = Parameters(rt, n_features=F); params.init(rng)
    enc = Encoder(rt, params, batch=B, seq_len=K, features=x_dev)    # x: [K, B, F] time-major
    perc = PerceptionHead(rt, params, enc.h, labels, mask, batch=B)
    rl = RlHeads(rt, params, s_t, s_tp1, transition arrays..., isv, batch=B)   # s: the agent's states
    opt = Optimizer(rt, params, isv)
    for plan in enc.forward + perc.forward + perc.backward + rl.forward + rl.backward
                + enc.backward + opt.update: plan.launch(stream)

Built on their own, as above, each component's backward ends with the reduction of its own FP32
split passes; the Learner hands them one `GradPartials` instead, so a whole backward reduces its
splits in one launch after its last pass.

Every buffer is allocated at construction and every plan built once, so a whole training step
can be captured into one graph. Parameters, gradients and both Adam moments share one layout
(`Parameters.LAYOUT` order, each tensor 64-float aligned), so gradient clipping is one
reduction over one buffer and the checkpoint writer sees named tensors.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..isv.registry import slot_index
from . import heads, losses, matmul, optim, ssm
from .layout import C51_ATOMS, LOSS_NAMES, N_PERCEPTION, N_POSITION_FEATURES, POS_INDEX, n_actions, n_state_features
from .matmul import (ACT_IDENTITY, ACT_RELU, ACT_TANH, GradPartials, plan_act_bwd, plan_dw_db, plan_linear,
                     plan_linear_group, plan_matmul_nt, plan_row_split)

HIDDEN_DIM = 128
# The RL heads read the agent's state: h followed by the backtest's position features (foxc.agent.layout).
STATE_DIM = HIDDEN_DIM + N_POSITION_FEATURES
SIDE_COLUMN = HIDDEN_DIM + POS_INDEX["side"]  # where a state row holds the sign of its position
# The RL heads share one ReLU layer on the state: a linear head could not make the value of
# holding depend on the product of the position's side and the market signal.
RL_HIDDEN = 256
ALIGN = 64  # floats: 256-byte aligned tensors


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    offset: int
    lr_slot: str  # the ISV slot holding this tensor's learning rate
    fan_in: int   # for initialisation; 0: a bias, initialised to zero

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


def layout(n_features: int, hidden: int = HIDDEN_DIM, rl_hidden: int = RL_HIDDEN,
           orders: str = "market") -> tuple[list[Tensor], int]:
    """The trained tensors in buffer order, and the buffer's length in floats. `orders` (market, passive):
    the agent's action count (5, 9) and state features (4, 12) shape the RL heads."""
    D, S, R, A = hidden, hidden + n_state_features(orders), rl_hidden, n_actions(orders)
    Q_OUTPUTS = A * C51_ATOMS
    spec = [
        ("enc_w_in", (n_features, ssm.PARTS * D), "lr_encoder", n_features),
        ("enc_b_in", (ssm.PARTS * D,), "lr_encoder", 0),
        ("enc_w_out", (D, D), "lr_encoder", D),
        ("enc_b_out", (D,), "lr_encoder", 0),
        ("perception_w", (D, N_PERCEPTION), "lr_perception", D),
        ("perception_b", (N_PERCEPTION,), "lr_perception", 0),
        ("rl_w", (S, R), "lr_q", S),
        ("rl_b", (R,), "lr_q", 0),
        ("dqn_w", (R, Q_OUTPUTS), "lr_q", R),
        ("dqn_b", (Q_OUTPUTS,), "lr_q", 0),
        ("policy_w", (R, A), "lr_policy", R),
        ("policy_b", (A,), "lr_policy", 0),
        ("value_w", (R, 1), "lr_value", R),
        ("value_b", (1,), "lr_value", 0),
    ]
    tensors, offset = [], 0
    for name, shape, lr_slot, fan_in in spec:
        tensors.append(Tensor(name, shape, offset, lr_slot, fan_in))
        offset += -(-int(np.prod(shape)) // ALIGN) * ALIGN
    return tensors, offset


TARGET_TENSORS = ("rl_w", "rl_b", "dqn_w", "dqn_b")  # the target network (contiguous), soft-updated with tau


class Parameters:
    """theta, grad, Adam m and v (one layout), Adam step counts, and the C51 target copy."""

    BUFFERS = ("theta", "grad", "adam_m", "adam_v")  # the buffers of the tensors' layout

    def __init__(self, rt, n_features: int, hidden: int = HIDDEN_DIM, rl_hidden: int = RL_HIDDEN,
                 orders: str = "market"):
        self.rt = rt
        self.n_features, self.hidden, self.state_dim = n_features, hidden, hidden + n_state_features(orders)
        self.rl_hidden, self.orders, self.n_actions = rl_hidden, orders, n_actions(orders)
        self.q_outputs = self.n_actions * C51_ATOMS
        self.tensors, self.size = layout(n_features, hidden, rl_hidden, orders)
        self.by_name = {t.name: t for t in self.tensors}
        self.theta, self.grad, self.adam_m, self.adam_v = (rt.device_array(self.size, np.float32, name)
                                                           for name in self.BUFFERS)
        self.adam_steps = rt.device_array(len(self.tensors), np.int32, "adam_steps")
        t0, t1 = self.by_name[TARGET_TENSORS[0]], self.by_name[TARGET_TENSORS[-1]]
        self.target_offset = t0.offset
        self.target_size = t1.offset + t1.size - t0.offset
        self.target = rt.device_array(self.target_size, np.float32, "dqn_target")

    def ptr(self, name: str, buffer: str = "theta"):
        """Device address of tensor `name` in theta, grad, adam_m or adam_v; '<name>_target' for the target copy."""
        if name.endswith("_target"):
            return self.target.at(self.by_name[name[:-len("_target")]].offset - self.target_offset)
        return self._buffer(buffer).at(self.by_name[name].offset)

    def init(self, rng: np.random.Generator):
        """Uniform(+-1/sqrt(fan_in)) weights, zero biases, zero moments and steps; the target copies online."""
        theta = np.zeros(self.size, np.float32)
        for t in self.tensors:
            if t.fan_in:
                bound = 1.0 / np.sqrt(t.fan_in)
                theta[t.offset:t.offset + t.size] = rng.uniform(-bound, bound, t.size)
        self.load(theta)

    def load(self, theta: np.ndarray):
        self.theta.upload(theta.astype(np.float32))
        for zeroed in (self.grad, self.adam_m, self.adam_v):
            zeroed.upload(np.zeros(self.size, np.float32))
        self.adam_steps.upload(np.zeros(len(self.tensors), np.int32))
        self.target.upload(theta[self.target_offset:self.target_offset + self.target_size].astype(np.float32))

    def host(self, buffer: str = "theta") -> dict[str, np.ndarray]:
        """Named host copies of one buffer (synchronizes through the download)."""
        flat = self._buffer(buffer).download()
        return {t.name: flat[t.offset:t.offset + t.size].reshape(t.shape) for t in self.tensors}

    def _buffer(self, name: str):
        if name not in self.BUFFERS:
            raise ValueError(f"unknown parameter buffer {name!r}: known are {', '.join(self.BUFFERS)}")
        return getattr(self, name)

    def close(self):
        for a in (self.theta, self.grad, self.adam_m, self.adam_v, self.adam_steps, self.target):
            a.close()


class Linear:
    """Plans of one linear layer Y = act(X W + b) over given buffers, and of its backward.

    backward: dpre = act'(dY) (in place over dY when act is not identity), dW = X^T dpre,
    db = colsum(dpre) and, when dX is given, dX (+)= dpre W^T. With precision "tf32" the forward and dX
    run on the tensor cores (`matmul.gemm_kernel` picks the tiling); dW and db stay one FP32 pass
    below the size where 64x64 TF32 tiles fill the GPU (`matmul.layer_precision`), else dW takes a
    TF32 split pass and db an FP32 one. Every pass leaves split partials that `partials` (the
    backward's GradPartials) adds up; without it, the layer's own reduction follows its passes.
    Layers sharing a `grads_together` key (and a GradPartials) take their FP32 dW + db passes in one
    launch, where the first of them stands in the backward.
    """

    def __init__(self, rt, params, w: str, b: str, X, Y, rows: int, n_in: int, n_out: int, act=ACT_IDENTITY,
                 precision="f32", dY=None, dX=None, accumulate_dX=False, target=False, partials=None,
                 grads_together: str | None = None):
        sfx = "_target" if target else ""
        self.layer = (Y, X, params.ptr(w + sfx), params.ptr(b + sfx), rows, n_in, n_out, act)  # plan_linear's
        self._rt, self._precision = rt, precision
        W = self.layer[2]
        grads = matmul.layer_precision(rows, n_out, precision)  # dW and db: one FP32 pass below the fill
        self.backward = []
        if dY is None:
            return
        if act != ACT_IDENTITY:
            self.backward.append(plan_act_bwd(rt, dY, dY, Y, rows * n_out, act))
        own = partials is None
        partials = GradPartials(rt, params.grad, f"d{w}_splits") if own else partials
        w_at, b_at = params.by_name[w].offset, params.by_name[b].offset
        if grads == "f32":  # dW and db in one pass (matmul_tn_ones)
            self.backward.append(plan_dw_db(rt, partials, X, dY, rows, n_in, n_out, w_at, b_at, f"d{w}",
                                            grads_together))
        else:  # dW on the tensor cores, db in FP32: two split passes
            self.backward.append(plan_row_split(rt, partials, w_at, dY, rows, n_out, A=X, M=n_in, precision=grads,
                                                name=f"d{w}"))
            self.backward.append(plan_row_split(rt, partials, b_at, dY, rows, n_out, name=f"d{b}"))
        if own:
            self.backward.append(partials.finish())
        if dX is not None:
            self.backward.append(plan_matmul_nt(rt, dX, dY, W, rows, n_out, n_in, accumulate_dX, precision))

    @cached_property
    def forward(self) -> list:
        """The layer's own forward launch, planned when first asked for: a layer that runs in a group
        launch (`forward_together`) never needs one."""
        return [plan_linear(self._rt, *self.layer, self._precision)]


NARROW_GRADS = "narrow_heads_dw"  # the narrow heads' dW + db passes run as one launch (grads_together)


def forward_together(rt, layers: list[Linear], precision: str, name: str) -> list:
    """The forwards of independent layers of one tiling in one launch (matmul.plan_linear_group: each
    output keeps the bits of its own launch); one layer keeps its own plan."""
    if len(layers) == 1:
        return layers[0].forward
    return [plan_linear_group(rt, [layer.layer for layer in layers], precision, name)]


class Encoder:
    """features x[K, B, F] -> z = x W_in + b_in [K, B, 4D] -> selective scan -> y[B, D]
    -> h = tanh(y W_out + b_out). backward reads dh (written by the heads) and fills the
    encoder's gradients; dh is overwritten. Unfused, `z` holds the projection; fused, z lives only
    inside the forward scan and `gates` holds its activations [u, a, i, g] for the backward."""

    def __init__(self, rt, params: Parameters, batch: int, seq_len: int, features, precision="f32",
                 fused: bool | None = None, partials: GradPartials | None = None):
        B, K, F, D = batch, seq_len, params.n_features, params.hidden
        own = partials is None
        partials = GradPartials(rt, params.grad, "enc_grad_splits") if own else partials
        self.batch, self.seq_len = B, K
        self.states = rt.device_array((K, B, D), np.float32, "enc_states")
        self.y, self.h, self.dh, self.dy = (rt.device_array((B, D), np.float32, name)
                                            for name in ("enc_y", "h", "dh", "enc_dy"))
        # fused: False keeps linear_fwd + ssm_scan_fwd / ssm_scan_bwd + matmul_tn_ones, True takes the
        # fused kernels whenever the shapes fit, None (auto) only when they also fill the GPU
        fused = ssm.proj_scan_fits(D, F) and (ssm.proj_scan_fills_gpu(B, D) if fused is None else fused)
        out = Linear(rt, params, "enc_w_out", "enc_b_out", self.y, self.h, B, D, D, ACT_TANH, precision,
                     dY=self.dh, dX=self.dy, partials=partials)
        if fused:  # the projection inside the scans: z computed in the forward, its gates kept, dz never written
            self.z = self.dz = None
            self.gates = rt.device_array((K, B, ssm.PARTS * D), np.float32, "enc_gates")
            # precision "tf32": the projection's products on the tensor cores (the FP32 kernels are
            # bound by shared-memory loads and issue, not by moving z)
            scan_fwd = [ssm.plan_proj_scan_fwd(rt, K, B, D, F, precision, gates=self.gates, states=self.states, y=self.y,
                                               x=features, W=params.ptr("enc_w_in"), bias=params.ptr("enc_b_in"))]
            w_in, b_in = params.by_name["enc_w_in"], params.by_name["enc_b_in"]
            scan_bwd = [partials.add("denc_w_in", ssm.bwd_dw_splits(B), (F + 1) * ssm.PARTS * D, F * ssm.PARTS * D,
                                     w_in.offset, b_in.offset, lambda parts: ssm.plan_scan_bwd_dw(
                                         rt, K, B, D, F, precision, partials=parts, gates=self.gates,
                                         states=self.states, dy=self.dy, x=features))]
        else:
            self.gates = None
            self.z = rt.device_array((K, B, ssm.PARTS * D), np.float32, "enc_z")
            self.dz = rt.device_array((K, B, ssm.PARTS * D), np.float32, "enc_dz")
            inp = Linear(rt, params, "enc_w_in", "enc_b_in", features, self.z, K * B, F, ssm.PARTS * D,
                         precision=precision, dY=self.dz, partials=partials)
            scan_fwd = [*inp.forward, ssm.plan_scan_fwd(rt, K, B, D, states=self.states, y=self.y, z=self.z)]
            scan_bwd = [ssm.plan_scan_bwd(rt, K, B, D, dz=self.dz, z=self.z, states=self.states, dy=self.dy),
                        *inp.backward]
        self.forward = [*scan_fwd, *out.forward]
        self.backward = [*out.backward, *scan_bwd]
        if own:
            self.backward.append(partials.finish())


class PerceptionHead:
    """logits = h Wp + bp [B, 9]; masked BCE against labels; backward writes dh (not accumulated)."""

    def __init__(self, rt, params: Parameters, h, dh, labels, mask, batch: int, precision="f32",
                 partials: GradPartials | None = None, grads_together: str | None = None):
        B, D = batch, params.hidden
        self.logits, self.dlogits, self.loss = (rt.device_array((B, N_PERCEPTION), np.float32, f"perception_{name}")
                                                for name in ("logits", "dlogits", "loss"))
        self.linear = Linear(rt, params, "perception_w", "perception_b", h, self.logits, B, D, N_PERCEPTION,
                             precision=precision, dY=self.dlogits, dX=dh, partials=partials,
                             grads_together=grads_together)
        self.losses = [losses.plan_bce_masked(rt, self.dlogits, self.loss, self.logits, labels, mask, B, N_PERCEPTION)]
        self.backward = self.linear.backward

    @property
    def forward(self) -> list:
        """The head on its own: its layer, then the loss (the Learner launches the layer with the RL heads')."""
        return [*self.linear.forward, *self.losses]


class RlHeads:
    """The RL heads on replayed states: a shared ReLU layer z = relu(s W_rl + b_rl), then C51 Q (online
    and target), the policy and the value on z; their losses and backward.

    States s_t / s_tp1 [B, state_dim] are the agent's (h and the position features). Transition
    arrays (device, [B]): action i32, ret (n-step return), gamma_n, done, weight (PER importance
    weights). The C51 target takes the next state's best *valid* action from the target network
    (target copies of the shared layer and the Q head); the policy learns the Boltzmann policy of the
    online Q means (distillation); V regresses the n-step target. Only the C51 loss trains the shared
    layer (the policy and value heads read it as fixed features). backward leaves the gradients in
    params.grad. The heads do not train the encoder: a replayed state's h came from windows the
    encoder is not processing in this step. `td_error` (float32 [B]), when given, is where the C51
    loss writes |TD| (the replay's priority input reads it there), else the heads own one.
    The three trunk passes run as one launch, so do the two Q heads, their two distributions, the value
    and policy losses, and the narrow heads (policy, value, next value, and `with_narrow`: other heads'
    independent layers of that tiling, which the Learner hands in so the perception head's forward joins
    that launch); the policy's and value's dW + db passes run as one launch too (with every other pass
    of the same GradPartials keyed NARROW_GRADS: the Learner's perception head).
    """

    def __init__(self, rt, params: Parameters, s_t, s_tp1, action, ret, gamma_n, done, weight, isv,
                 batch: int, precision="f32", partials: GradPartials | None = None, td_error=None,
                 with_narrow: tuple[Linear, ...] = ()):
        B, S, R, A, Q_OUTPUTS = batch, params.state_dim, params.rl_hidden, params.n_actions, params.q_outputs
        own = partials is None
        partials = GradPartials(rt, params.grad, "rl_grad_splits") if own else partials
        self.rt, self.isv, self.batch = rt, isv, B
        arr = lambda shape, name, dt=np.float32: rt.device_array(shape, dt, name)  # noqa: E731
        self.z, self.dz = arr((B, R), "rl_z"), arr((B, R), "rl_dz")
        self.z_next, self.z_next_target = arr((B, R), "rl_z_next"), arr((B, R), "rl_z_next_target")
        self.q_logits, self.dq_logits = arr((B, Q_OUTPUTS), "q_logits"), arr((B, Q_OUTPUTS), "dq_logits")
        self.q_probs, self.q = arr((B, A, C51_ATOMS), "q_probs"), arr((B, A), "q_online")
        self.next_logits = arr((B, Q_OUTPUTS), "q_next_logits")
        self.next_probs, self.next_q = arr((B, A, C51_ATOMS), "q_next_probs"), arr((B, A), "q_next")
        self.pi_logits, self.dpi_logits = arr((B, A), "pi_logits"), arr((B, A), "dpi_logits")
        self.v, self.v_next, self.dv = arr((B, 1), "v"), arr((B, 1), "v_next"), arr((B, 1), "dv")
        self.advantage = arr(B, "advantage")
        if td_error is not None and (tuple(td_error.shape) != (B,) or td_error.dtype != np.float32):
            raise ValueError(f"td_error must be float32 ({B},), got {td_error.dtype} {tuple(td_error.shape)}")
        self.loss_q, self.td_error = arr(B, "loss_q"), td_error if td_error is not None else arr(B, "td_error")
        self.loss_pi, self.loss_v = arr(B, "loss_pi"), arr(B, "loss_v")
        lin = lambda *a, **k: Linear(rt, params, *a, precision=precision, partials=partials, **k)  # noqa: E731
        trunk = lin("rl_w", "rl_b", s_t, self.z, B, S, R, ACT_RELU, dY=self.dz)
        trunk_next = lin("rl_w", "rl_b", s_tp1, self.z_next, B, S, R, ACT_RELU)
        trunk_target = lin("rl_w", "rl_b", s_tp1, self.z_next_target, B, S, R, ACT_RELU, target=True)
        q = lin("dqn_w", "dqn_b", self.z, self.q_logits, B, R, Q_OUTPUTS, dY=self.dq_logits, dX=self.dz)
        q_next = lin("dqn_w", "dqn_b", self.z_next_target, self.next_logits, B, R, Q_OUTPUTS, target=True)
        pi = lin("policy_w", "policy_b", self.z, self.pi_logits, B, R, A, dY=self.dpi_logits,
                 grads_together=NARROW_GRADS)
        v = lin("value_w", "value_b", self.z, self.v, B, R, 1, dY=self.dv, grads_together=NARROW_GRADS)
        v_next = lin("value_w", "value_b", self.z_next, self.v_next, B, R, 1)
        side = params.hidden + POS_INDEX["side"]  # the side feature's column in a state row
        self.forward = [
            *forward_together(rt, [trunk, trunk_next, trunk_target], precision, "rl_trunks"),
            *forward_together(rt, [q, q_next], precision, "q_heads"),
            *forward_together(rt, [*with_narrow, pi, v, v_next], precision, "narrow_heads"),
            heads.plan_c51_distribution(rt, [(self.next_probs, self.next_q, self.next_logits, s_tp1.at(side)),
                                             (self.q_probs, self.q, self.q_logits, s_t.at(side))], isv, S, B, A),
            losses.plan_c51_loss(rt, B, A, grad_logits=self.dq_logits, loss=self.loss_q, td_error=self.td_error,
                                 logits=self.q_logits, next_probs=self.next_probs, next_q=self.next_q, action=action,
                                 ret=ret, gamma_n=gamma_n, done=done, weight=weight, isv=isv),
            losses.plan_value_policy_loss(rt, B, A, grad_v=self.dv, loss_v=self.loss_v, advantage=self.advantage, v=self.v,
                                          v_next=self.v_next, ret=ret, gamma_n=gamma_n, done=done,
                                          grad_pi=self.dpi_logits, loss_pi=self.loss_pi, pi_logits=self.pi_logits,
                                          q=self.q, isv=isv),
        ]
        self.backward = [*q.backward, *trunk.backward, *pi.backward, *v.backward]
        if own:
            self.backward.append(partials.finish())


class Optimizer:
    """Clip the global gradient norm and bump Adam's step counts (two launches), then AdamW on
    every tensor with its ISV learning rate and the C51 target's soft update with tau from the
    ISV, in one launch (`adamw_all`, driven by a per-tensor table of range and lr slot)."""

    def __init__(self, rt, params: Parameters, isv):
        n_tensors = len(params.tensors)
        self.table = rt.device_array((n_tensors, 3), np.int32, "adam_table")  # begin, end, lr slot
        self.table.upload(np.array([[t.offset, t.offset + t.size, slot_index(t.lr_slot)] for t in params.tensors],
                                   np.int32))
        self.clip = optim.GradClip(rt, params.grad, params.size, isv, steps=params.adam_steps, n_steps=n_tensors)
        self.update = [self.clip, optim.plan_adamw_all(
            rt, n_tensors, params.size, theta=params.theta, grad=params.grad, m=params.adam_m, v=params.adam_v,
            target=params.target, clip=self.clip.clip, steps=params.adam_steps, table=self.table, isv=isv,
            target_begin=params.target_offset, target_n=params.target_size)]


def launch_all(plans, stream):
    for p in plans:
        p.launch(stream)


class Learner:
    INPUTS = ("features", "labels", "mask", "h_t", "h_tp1", "action", "ret", "gamma_n", "done", "weight")

    """A whole learning step over device inputs it owns: encoder forward on a window batch,
    perception loss, RL losses on a replayed batch (states and transition scalars), all
    backward passes, gradient clipping, AdamW with ISV learning rates and the target update.

    Inputs to fill before a step (device arrays): `features` [K, B, F], `labels`/`mask` [B, 9],
    `h_t`/`h_tp1` [B, state_dim] (the agent's states: h then the position features), `action`
    (i32), `ret`, `gamma_n`, `done`, `weight` [B]. `inputs` may hand in any of them as another
    component's arrays (the trainer passes the dataset's features and the replay's sampled
    batch), so nothing is copied. `forward_backward` and `update` are plan lists; `step` = both,
    capturable into one graph; `learn` is `forward_backward` without the encoder's forward, for a
    caller that runs that first. `losses` (mapped, LOSS_NAMES order) holds the step's loss means;
    the batch's |TD| goes to `td_error` when given (the trainer's replay reads it there).
    """

    def __init__(self, rt, isv, batch: int, seq_len: int, n_features: int, hidden: int = HIDDEN_DIM,
                 precision: str = "f32", inputs: dict | None = None, rl_hidden: int = RL_HIDDEN,
                 fused_encoder: bool | None = None, td_error=None, orders: str = "market"):
        if precision not in matmul.PRECISIONS:  # before anything is allocated
            raise ValueError(f"precision must be one of {', '.join(matmul.PRECISIONS)}, got {precision!r}")
        given = dict(inputs or {})
        self._known_inputs(given)
        B, K = batch, seq_len
        self.rt, self.batch, self.seq_len = rt, B, K
        self.params = Parameters(rt, n_features, hidden, rl_hidden, orders)
        S = self.params.state_dim

        def arr(shape, name, dt=np.float32):
            key = name.removeprefix("replay_").replace("label_mask", "mask")
            if key in given:
                found = given[key]
                shape = (shape,) if isinstance(shape, int) else tuple(shape)
                if tuple(found.shape) != shape or found.dtype != np.dtype(dt):
                    raise ValueError(f"learner input '{key}' must be {np.dtype(dt)} {tuple(shape)}, "
                                     f"got {found.dtype} {tuple(found.shape)}")
                return found
            return rt.device_array(shape, dt, name)
        self.features = arr((K, B, n_features), "features")
        self.labels, self.mask = arr((B, N_PERCEPTION), "labels"), arr((B, N_PERCEPTION), "label_mask")
        self.h_t, self.h_tp1 = arr((B, S), "replay_h_t"), arr((B, S), "replay_h_tp1")
        self.action = arr(B, "replay_action", np.int32)
        self.ret, self.gamma_n, self.done = arr(B, "replay_ret"), arr(B, "replay_gamma_n"), arr(B, "replay_done")
        self.weight = arr(B, "replay_weight")
        # every FP32 split pass of the backward leaves its partials here; one launch adds them all
        self.partials = GradPartials(rt, self.params.grad)
        self.encoder = Encoder(rt, self.params, B, K, self.features, precision, fused_encoder, self.partials)
        self.perception = PerceptionHead(rt, self.params, self.encoder.h, self.encoder.dh, self.labels, self.mask,
                                         B, precision, self.partials, grads_together=NARROW_GRADS)
        self.rl = RlHeads(rt, self.params, self.h_t, self.h_tp1, self.action, self.ret, self.gamma_n, self.done,
                          self.weight, isv, B, precision, self.partials, td_error,
                          with_narrow=(self.perception.linear,))
        self.partials.finish()
        self.optimizer = Optimizer(rt, self.params, isv)
        # the batch means of the losses (C51, policy, value, perception BCE) where the host reads them
        self.losses = rt.mapped_array(len(LOSS_NAMES), np.float32, "losses")
        self.losses.host[:] = 0.0
        rl = self.rl
        self.loss_means = losses.plan_loss_means(rt, self.losses, rl.loss_q, rl.loss_pi, rl.loss_v,
                                                 self.perception.loss, B, B * N_PERCEPTION)
        # The RL heads' forward includes the perception head's layer (one launch with the narrow heads). After
        # it, two lanes share no array that either writes (the trainer's graph runs them side by side): the RL
        # heads' backward, and the perception loss with the loss means, its backward and then the encoder's.
        self.perception_backward = [*self.perception.losses, self.loss_means, *self.perception.backward]
        self.heads = [*self.rl.forward, *self.perception_backward, *self.rl.backward]  # the encoder's backward out
        self.learn = [*self.rl.forward, *self.perception_backward, *self.encoder.backward, *self.rl.backward,
                      self.partials]
        self.forward_backward = [*self.encoder.forward, *self.learn]
        self.update = self.optimizer.update
        self.step = self.forward_backward + self.update

    def load_inputs(self, inputs: dict[str, np.ndarray]):
        self._known_inputs(inputs)
        for name, value in inputs.items():
            getattr(self, name).upload(value)

    def _known_inputs(self, names):
        unknown = sorted(set(names) - set(self.INPUTS))
        if unknown:
            raise ValueError(f"unknown learner input{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}: "
                             f"known are {', '.join(self.INPUTS)}")

    def random_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A synthetic batch with every input in its valid range (tests and benchmarks)."""
        B, K, F, D = self.batch, self.seq_len, self.params.n_features, self.params.hidden
        f32 = np.float32

        def states():
            s = rng.uniform(-1, 1, (B, self.params.state_dim)).astype(f32)
            s[:, :D] = np.tanh(rng.standard_normal((B, D)))
            s[:, D + POS_INDEX["side"]] = rng.integers(-1, 2, B)
            return s
        return {
            "features": rng.standard_normal((K, B, F)).astype(f32),
            "labels": (rng.random((B, N_PERCEPTION)) < 0.5).astype(f32),
            "mask": (rng.random((B, N_PERCEPTION)) < 0.9).astype(f32),
            "h_t": states(),
            "h_tp1": states(),
            "action": rng.integers(0, self.params.n_actions, B).astype(np.int32),
            "ret": rng.standard_normal(B).astype(f32),
            "gamma_n": np.full(B, 0.99 ** 3, f32),
            "done": (rng.random(B) < 0.05).astype(f32),
            "weight": rng.uniform(0.3, 1.0, B).astype(f32),
        }
