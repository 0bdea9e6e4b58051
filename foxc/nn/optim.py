"""AdamW, gradient-norm clipping and the target soft update (cuda/nn/optim.cu).

Graph-safe by construction: the learning rates, clip norm and tau are read from the ISV on the
device, Adam's step counts live in a device array bumped by `grad_norm_clip`, and the clip
scale is computed on the device and read by `adamw_all`, which updates every tensor of the flat
parameter buffer and then the target in one launch. The norm is a two-stage reduction with a
fixed grid (its second stage in the last block of the same launch), so it is bit-stable.
"""
from __future__ import annotations

import numpy as np

from ..driver import KernelSpec, f32, i32, i64, ptr, reference
from ..isv.registry import slot_index
from .layout import ADAMW_MAX_TENSORS

MODULE = "nn/optim"
BLOCK = 256
MAX_BLOCKS = 1024
SUMSQ_BLOCKS = 128  # part of the norm's definition (the order of its additions): keep fixed
ADAM_BETA1, ADAM_BETA2, ADAM_EPS, ADAM_WD = 0.9, 0.999, 1e-8, 0.01

GRAD_NORM_CLIP = KernelSpec("grad_norm_clip", MODULE, (
    ptr("partials"), ptr("clip"), ptr("grad"), i64("n"), ptr("isv"), ptr("steps"), i32("n_steps"), ptr("ticket")),
    doc="partials[k] = sum of grad^2 over block k's chunks; the last block (integer ticket): clip[0] = "
        "min(1, grad_clip_norm / norm), clip[1] = norm, steps[i] += 1 for i < n_steps; grid SUMSQ_BLOCKS, block 256")
ADAMW_ALL = KernelSpec("adamw_all", MODULE, (
    ptr("theta"), ptr("grad"), ptr("m"), ptr("v"), ptr("target"), ptr("clip"), ptr("steps"), ptr("table"),
    i32("n_tensors"), ptr("isv"), i64("n"), i64("target_begin"), i64("target_n"),
    f32("beta1"), f32("beta2"), f32("eps"), f32("wd")),
    doc="AdamW on every tensor of a flat buffer (table: begin, end, lr_slot), then the target soft update")




def _adamw_np(th, grad, mv, vv, scale, step, lr, beta1, beta2, eps, wd):
    """AdamW in place on float32 views th, mv, vv (what adamw_element does per element)."""
    one = np.float32(1)
    t = np.float32(step)
    bc1 = max(one - np.power(beta1, t), np.float32(1e-12))
    bc2 = max(one - np.power(beta2, t), np.float32(1e-12))
    g = grad * scale
    mv[:] = beta1 * mv + (one - beta1) * g
    vv[:] = beta2 * vv + (one - beta2) * g * g
    th -= lr * ((mv / bc1) / (np.sqrt(vv / bc2) + eps) + wd * th)


@reference(GRAD_NORM_CLIP)
def _grad_norm_clip(launch, partials, clip, grad, n, isv, steps, n_steps, ticket):
    blocks = launch.grid[0]
    _grad_sumsq_partial(partials, grad, n, blocks)
    _grad_clip_scale(clip, partials, blocks, isv)  # the last block's part; ticket stays 0
    steps.i32(int(n_steps))[:] += 1


def _grad_sumsq_partial(partials, grad, n, blocks):
    """Every block's part of grad_norm_clip: partials[k] = sum of grad^2 over block k's chunks."""
    g = grad.f32(int(n)).astype(np.float64)
    owner = (np.arange(g.size) // BLOCK) % blocks
    partials.f32(blocks)[:] = np.bincount(owner, weights=g * g, minlength=blocks)


def _grad_clip_scale(clip, partials, n_partials, isv):
    """clip_scale: clip[0] = min(1, grad_clip_norm / norm), clip[1] = norm."""
    norm = np.float32(np.sqrt(partials.f32(int(n_partials)).sum(dtype=np.float64)))
    limit = isv.f32()[slot_index("grad_clip_norm")]
    out = clip.f32(2)
    out[0] = limit / norm if (limit > 0 and norm > limit) else np.float32(1)
    out[1] = norm


@reference(ADAMW_ALL)
def _adamw_all(launch, theta, grad, m, v, target, clip, steps, table, n_tensors, isv, n, target_begin, target_n,
               beta1, beta2, eps, wd):
    n, n_tensors = int(n), int(n_tensors)
    tab = table.i32(3 * n_tensors).reshape(n_tensors, 3)
    th, g, mv, vv = theta.f32(n), grad.f32(n), m.f32(n), v.f32(n)
    lrs, scale, st = isv.f32(), clip.f32(1)[0], steps.i32(n_tensors)
    for j, (begin, end, lr_slot) in enumerate(tab):
        sl = slice(int(begin), int(end))
        _adamw_np(th[sl], g[sl], mv[sl], vv[sl], scale, st[j], lrs[int(lr_slot)], beta1, beta2, eps, wd)
    b0, tn = int(target_begin), int(target_n)
    tau = isv.f32()[slot_index("tau")]
    t = target.f32(tn)
    t += tau * (th[b0:b0 + tn] - t)


def grid_for(n: int) -> int:
    return max(1, min(-(-int(n) // BLOCK), MAX_BLOCKS))


class GradClip:
    """The global gradient norm of a flat gradient buffer and the scale AdamW applies: one launch.
    With `steps` (Adam's device step counts, n_steps of them) it also bumps them."""

    def __init__(self, rt, grad, n: int, isv, name: str = "grad", steps=None, n_steps: int = 0):
        self.partials = rt.device_array(SUMSQ_BLOCKS, np.float32, f"{name}_sumsq_partials")
        self.clip = rt.device_array(2, np.float32, f"{name}_clip")  # [scale, norm]
        self.ticket = rt.device_array(1, np.uint32, f"{name}_ticket")  # finished blocks: 0 between launches
        self.ticket.upload(np.zeros(1, np.uint32))
        if steps is None:
            steps, n_steps = self.ticket, 0  # a valid pointer, never written through
        self.plans = [rt.plan(GRAD_NORM_CLIP, SUMSQ_BLOCKS, BLOCK, dict(
            partials=self.partials, clip=self.clip, grad=grad, n=n, isv=isv, steps=steps, n_steps=n_steps,
            ticket=self.ticket))]

    def launch(self, stream):
        for p in self.plans:
            p.launch(stream)


def plan_adamw_all(rt, n_tensors: int, n: int, beta1=ADAM_BETA1, beta2=ADAM_BETA2, eps=ADAM_EPS, wd=ADAM_WD,
                   **args):
    """AdamW over every tensor of the flat buffers (table: int32 [n_tensors, 3] of begin, end, ISV lr
    slot), then target[0:target_n] soft-updated from the new theta[target_begin:]; one launch. The
    buffers and the target's range by their parameter names."""
    if not 0 < n_tensors <= ADAMW_MAX_TENSORS:
        raise ValueError(f"adamw_all takes 1..{ADAMW_MAX_TENSORS} tensors, got {n_tensors}")
    return rt.plan(ADAMW_ALL, grid_for(n), BLOCK, dict(args, n_tensors=n_tensors, n=n, beta1=beta1, beta2=beta2,
                                                       eps=eps, wd=wd))
