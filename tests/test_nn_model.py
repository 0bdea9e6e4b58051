"""The model-level API on the reference backend: a whole step is deterministic, a captured graph
gives the same bits as eager launches, the learner fits a fixed batch, TF32 stays within its tolerance."""
import numpy as np
import pytest

from foxc.isv import IsvBus
from foxc.nn import functional as F
from foxc.nn import matmul, model
from kernel_check import rel_error, run_kernel


def make_learner(rt, seed, precision="f32", hidden=16, B=8, K=4, F=6, fused=None):
    isv = IsvBus(rt)
    learner = model.Learner(rt, isv, B, K, F, hidden, precision, fused_encoder=fused)
    rng = np.random.default_rng(seed)
    learner.params.init(rng)
    learner.load_inputs(learner.random_inputs(rng))
    return learner, isv


def test_layout_is_aligned_and_disjoint():
    tensors, size = model.layout(40)
    end = 0
    for t in tensors:
        assert t.offset % model.ALIGN == 0 and t.offset >= end
        end = t.offset + t.size
    assert end <= size
    assert [t.name for t in tensors][:2] == ["enc_w_in", "enc_b_in"]


def test_two_runs_same_bits_and_graph_equals_eager(ref_rt, rng):
    seed = int(rng.integers(2**31))
    a, _ = make_learner(ref_rt, seed)
    b, _ = make_learner(ref_rt, seed)
    for _ in range(3):
        model.launch_all(a.step, ref_rt.stream)
    with ref_rt.capture(name="learn") as cap:
        model.launch_all(b.step, ref_rt.stream)
    for _ in range(3):
        cap.graph.launch(ref_rt.stream)
    for buf in ("theta", "adam_m", "adam_v", "target"):
        assert np.array_equal(getattr(a.params, buf).download(), getattr(b.params, buf).download()), buf
    assert np.array_equal(a.params.adam_steps.download(), np.full(len(a.params.tensors), 3))


def test_learner_fits_a_fixed_batch(ref_rt, rng):
    learner, isv = make_learner(ref_rt, int(rng.integers(2**31)))
    isv["lr_encoder"] = isv["lr_perception"] = 1e-2
    first = None
    for _ in range(30):
        model.launch_all(learner.step, ref_rt.stream)
        loss = float(learner.losses.host[3])  # the perception BCE
        first = loss if first is None else first
    assert loss < 0.8 * first, (first, loss)
    scale, norm = learner.optimizer.clip.clip.download()
    assert norm > 0 and 0 < scale <= 1


def test_tf32_against_fp32(ref_rt, rng):
    M, K, N = 64, 128, 96
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    b = np.zeros(N, np.float32)
    y32, *_ = run_kernel(ref_rt, matmul.LINEAR_FWD["f32"], matmul.gemm_grid(M, N), 256, [np.zeros((M, N), np.float32), x, w, b, M, K, N, 0])
    y19, *_ = run_kernel(ref_rt, matmul.LINEAR_FWD["tf32"], matmul.gemm_grid(M, N), 256, [np.zeros((M, N), np.float32), x, w, b, M, K, N, 0])
    err = rel_error(y19, y32)
    print(f"tf32 vs fp32 relative error {err:.2e}")
    assert 1e-5 < err < 5e-4


@pytest.mark.parametrize("precision", ["f32", "tf32"])
def test_tf32_learner_tracks_fp32(ref_rt, rng, precision):
    seed = int(rng.integers(2**31))
    a, _ = make_learner(ref_rt, seed, "f32")
    b, _ = make_learner(ref_rt, seed, precision)
    model.launch_all(a.forward_backward, ref_rt.stream)
    model.launch_all(b.forward_backward, ref_rt.stream)
    err = rel_error(b.params.grad.download(), a.params.grad.download())
    print(f"{precision} gradient vs fp32: relative error {err:.2e}")
    assert err < (1e-7 if precision == "f32" else 5e-3)


@pytest.mark.parametrize("precision", ["f32", "tf32"])
def test_fused_projection_scan_matches_the_unfused_encoder(ref_rt, precision):
    """ssm_proj_scan_fwd / ssm_scan_bwd_dw (hidden a multiple of 32) against linear_fwd + the scans +
    matmul_tn_ones: the fused forward's gates are the activations of the unfused z (the output gate at
    the last step only), the states and h have the same bits (TF32: both round the projection's
    operands); the input projection's gradients differ by their summation order (TF32: and by the
    fused pass rounding x and dz, where the unfused one takes dW in FP32 at this size); every other
    gradient has the same bits."""
    runs = {}
    for flag in (True, False):
        learner, _ = make_learner(ref_rt, 11, precision, hidden=32, B=40, K=5, F=7, fused=flag)
        assert len(learner.encoder.forward) == (2 if flag else 3)
        assert (learner.encoder.z is None) == flag and (learner.encoder.gates is None) != flag
        model.launch_all(learner.forward_backward, ref_rt.stream)
        kept = learner.encoder.gates if flag else learner.encoder.z
        runs[flag] = (learner.params.host("grad"), [a.download() for a in
                                                    (kept, learner.encoder.states, learner.encoder.h)])
    (g1, f1), (g0, f0) = runs[True], runs[False]
    D3 = 3 * 32  # the fused forward writes the output gate at the last step only
    gates = np.concatenate(F.ssm_parts(f0[0], 32), axis=-1)
    assert np.array_equal(f1[0][:, :, :D3], gates[:, :, :D3]) and np.array_equal(f1[0][-1], gates[-1])
    assert all(np.array_equal(a, b) for a, b in zip(f1[1:], f0[1:]))
    for name in g1:
        if name in ("enc_w_in", "enc_b_in"):
            err = rel_error(g1[name], g0[name])
            assert (err < 1e-6) if precision == "f32" else (0 < err < 2e-3), (name, err)
        else:
            assert np.array_equal(g1[name], g0[name]), name


def test_fused_encoder_only_where_it_fills_the_gpu(ref_rt):
    from foxc.nn import ssm
    assert not ssm.proj_scan_fills_gpu(256, 128) and ssm.proj_scan_fills_gpu(1024, 128)
    small, _ = make_learner(ref_rt, 3, "f32", hidden=32, B=40, K=5, F=7)
    assert len(small.encoder.forward) == 3  # 40 windows x 32 channels: unfused


def test_an_unknown_precision_is_refused_naming_the_accepted_ones(ref_rt):
    """Learner(precision="fp16") was a KeyError 'fp16' from the kernel table, after the parameters were allocated."""
    with pytest.raises(ValueError, match=r"^precision must be one of f32, tf32, got 'fp16'$"):
        model.Learner(ref_rt, None, 8, 4, 6, 16, precision="fp16")


def test_unknown_inputs_and_buffers_are_refused_listing_the_known_ones(ref_rt):
    """load_inputs({"feature": ...}) and params.host("adam") were AttributeErrors."""
    learner, _ = make_learner(ref_rt, 1)
    with pytest.raises(ValueError, match=r"^unknown learner input 'feature': known are features, labels, mask, h_t, "
                                         r"h_tp1, action, ret, gamma_n, done, weight$"):
        learner.load_inputs({"feature": np.zeros((4, 8, 6), np.float32)})
    with pytest.raises(ValueError, match=r"^unknown parameter buffer 'adam': known are theta, grad, adam_m, adam_v$"):
        learner.params.host("adam")
