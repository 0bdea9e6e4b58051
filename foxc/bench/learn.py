"""Learning kernels: forward + backward of the encoder and heads, FP32 vs TF32, TFLOP/s against a measured GEMM peak.

Each part (encoder, heads, optimizer, the whole step) is captured into a graph and replayed, timed by events.
The peak is foxc's own GEMM (linear_fwd_<precision>) on a square problem (4096^3 on a GPU); FLOPs count the
matrix products only (2 M N K each). With --profile and/or --profile-steps A:B it runs learner steps 0..B
eagerly instead: --profile-steps opens the cuProfilerStart/Stop window on steps A..B (nsys, ncu), --profile
prints the per-kernel event table of those steps and writes OUT/profile.json.
"""
from __future__ import annotations

import numpy as np

from ..agent.layout import N_POSITION_FEATURES
from ..cli import PathArg, UserError, output_dir, positive_int, text_table as table
from ..isv import IsvBus
from ..nn import matmul, model
from ..nn.heads import N_ACTIONS, Q_OUTPUTS
from ..nn.layout import N_PERCEPTION
from ..profile import KernelProfiler, ProfilerWindow, add_profile_args, profile_window
from . import harness
from .report import write_json

ENCODERS = {"auto": None, "fused": True, "separate": False}


def encoder_flops(B, K, F, D) -> float:
    return 2.0 * (2 * K * B * F * 4 * D + 3 * B * D * D)  # fwd + dW of the input projection; out fwd, dW, dX


def heads_flops(B, D, R=model.RL_HIDDEN) -> float:
    """Forward: the perception head on h, the shared layer three times (s_t, s_tp1 online and target), then
    q, q_next, pi, v, v_next; backward: dW of every trained head, dz of the shared layer, dh of perception."""
    S = D + N_POSITION_FEATURES
    fwd = 2 * B * (D * N_PERCEPTION + 3 * S * R + R * (2 * Q_OUTPUTS + N_ACTIONS + 2))
    bwd = 2 * B * (2 * D * N_PERCEPTION + S * R + R * (2 * Q_OUTPUTS + N_ACTIONS + 1))
    return float(fwd + bwd)


def time_plans(rt, plans, iters: int) -> tuple[float, int]:
    """(ms per replay, kernels) of `plans` as a graph."""
    t, kernels = harness.time_graph(rt, plans, iters)
    return t.gpu_ms / iters, kernels


def peak_tflops(rt, precision: str, n: int, iters: int) -> float:
    rng = np.random.default_rng(0)
    x, w, y = (rt.device_array((n, n), np.float32, f"peak_{a}") for a in "xwy")
    b = rt.device_array(n, np.float32, "peak_b")
    x.upload(rng.standard_normal((n, n)).astype(np.float32))
    w.upload(rng.standard_normal((n, n)).astype(np.float32))
    b.upload(np.zeros(n, np.float32))
    ms, _ = time_plans(rt, [matmul.plan_linear(rt, y, x, w, b, n, n, n, matmul.ACT_IDENTITY, precision)], iters)
    for a in (x, w, b, y):
        a.close()
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def make_learner(rt, isv, shape, precision: str, encoder: str):
    learner = model.Learner(rt, isv, *shape, precision, fused_encoder=ENCODERS[encoder])
    learner.params.init(np.random.default_rng(1))
    learner.load_inputs(learner.random_inputs(np.random.default_rng(2)))
    return learner


def main(argv=None) -> int:
    ap = harness.parser("learn", __doc__)
    ap.add_argument("--n-backtests", type=positive_int, default=1024)
    ap.add_argument("--seq-len", type=positive_int, default=32, help="window K (default 32)")
    ap.add_argument("--features", type=positive_int, default=40)
    ap.add_argument("--iters", type=positive_int, default=50)
    ap.add_argument("--encoder", choices=tuple(ENCODERS), default="auto",
                    help="the encoder's kernels: fused projection and scan, separate, or auto (fused where they "
                         "fill the GPU): for A/B timing")
    add_profile_args(ap)
    ap.add_argument("--precision", choices=matmul.PRECISIONS, default=None,
                    help="the profiled step's precision (default f32; without a profile both are timed)")
    ap.add_argument("--out", type=PathArg("a directory"), default=None,
                    help="where --profile writes profile.json (default: here)")
    return harness.run(ap, argv, _main, check=_check_out)


def _check_out(args):
    """--out and --precision set what a profile runs: refused without one, not ignored."""
    if args.out is not None and not args.profile:
        raise UserError(f"--out {args.out}: only with --profile (it says where profile.json goes)")
    if args.precision is not None and not (args.profile or args.profile_steps):
        raise UserError(f"--precision {args.precision}: only with --profile or --profile-steps (without them the "
                        "benchmark times both precisions)")
    args.out, args.precision = args.out or ".", args.precision or "f32"
    if args.profile:
        output_dir("--out", args.out)


def _main(args, rt) -> int:
    if rt.backend == "cuda":
        shape, iters, peak_n = (args.n_backtests, args.seq_len, args.features, model.HIDDEN_DIM), args.iters, 4096
    else:  # numpy: tiny shapes, a smoke run
        shape, iters, peak_n = (8, 4, 6, 16), 2, 64
    B, K, F, D = shape
    isv = IsvBus(rt, device_resident=True)  # as in the trainer: kernels read device memory
    if args.profile or args.profile_steps:
        return profile_step(rt, args, make_learner(rt, isv, shape, args.precision, args.encoder), shape)
    rows, peaks = [], {}
    for precision in matmul.PRECISIONS:
        peaks[precision] = peak_tflops(rt, precision, peak_n, iters)
        learner = make_learner(rt, isv, shape, precision, args.encoder)
        enc = learner.encoder
        # the perception head's forward runs in the RL heads' launch; each pass's dW splits sum in their own row
        parts = [("encoder fwd+bwd", enc.forward + enc.backward, encoder_flops(B, K, F, D)),
                 ("heads fwd+bwd", learner.heads, heads_flops(B, D)),
                 ("gradient splits", [learner.partials], 0.0),
                 ("optimizer", learner.update, 0.0),
                 ("whole step", learner.step, encoder_flops(B, K, F, D) + heads_flops(B, D))]
        for what, plans, flops in parts:
            ms, kernels = time_plans(rt, plans, iters)
            tflops = flops / (ms * 1e-3) / 1e12 if flops else 0.0
            rows.append({"precision": precision, "what": what, "kernels": kernels, "ms": round(ms, 4),
                         "gflop": round(flops / 1e9, 3), "tflops": round(tflops, 3),
                         "pct_of_peak": round(100 * tflops / peaks[precision], 1) if flops else ""})
    print(f"backend {rt.backend}: {rt.device_name}; B={B} K={K} F={F} D={D}")
    print(f"measured peak (own GEMM, {peak_n}^3): " + ", ".join(f"{p} {v:.2f} TFLOP/s" for p, v in peaks.items()))
    print(table(rows, ["precision", "what", "kernels", "ms", "gflop", "tflops", "pct_of_peak"]))
    write_json(args.json, "learn", rt, rows, {"peak_tflops": peaks, "shape": {"B": B, "K": K, "F": F, "D": D}})
    step = {r["precision"]: r for r in rows if r["what"] == "whole step"}
    print(f"summary: step fp32 {step['f32']['ms']} ms, tf32 {step['tf32']['ms']} ms "
          f"({step['f32']['ms'] / max(step['tf32']['ms'], 1e-9):.2f}x); peak fp32 {peaks['f32']:.1f}, "
          f"tf32 {peaks['tf32']:.1f} TFLOP/s ({rt.backend})")
    return 0


def profile_step(rt, args, learner, shape) -> int:
    """Eager learner steps 0..B with the profiler window and/or the kernel table on the steps asked for."""
    timed, window = profile_window(args), ProfilerWindow(rt, args.profile_steps)
    last = max(w.last for w in (timed, args.profile_steps) if w is not None)
    print(f"backend {rt.backend}: {rt.device_name}; B={shape[0]} K={shape[1]} F={shape[2]} D={shape[3]} "
          f"{args.precision}; eager learner steps 0..{last}")
    with KernelProfiler(rt, timed) as profiler:
        for step in range(last + 1):
            window.before_step(step)
            if timed is not None:
                profiler.launch(step, learner.step)
            else:
                for plan in learner.step:
                    plan.launch(rt.stream)
            window.after_step(step)
        window.close()
        rt.synchronize()
        if timed is None:
            print(f"summary: {last + 1} eager learner steps, profiler window {args.profile_steps} ({rt.backend})")
            return 0
        profiler.report(args.out)
        s, top = profiler.summary(), profiler.rows()[0]
    write_json(args.json, "learn-profile", rt, s["kernels"], {k: v for k, v in s.items() if k != "kernels"})
    print(f"summary: learner step ({args.precision}) {s['gpu_ms_per_step']:.3f} ms over {s['steps']} profiled steps, "
          f"{s['launches_per_step']} launches; top {top['kernel']} {100 * top['share']:.1f}% ({rt.backend})")
    return 0
