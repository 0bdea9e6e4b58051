"""The learning kernels' references against naive loop implementations or invariants."""
import numpy as np
import pytest

from foxc.agent.layout import FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, Q_INVALID, SHORT
from foxc.isv.registry import SLOTS, slot_index
from foxc.nn import functional as F
from foxc.nn import heads, losses, matmul, optim, ssm
from kernel_check import assert_close, poisoned, run_kernel
from nn_cases import DW_DB_PASSES, LINEAR_GROUPS, dw_db_grads, linear_group, reduce_grad_splits


def isv_values(**overrides):
    v = np.array([s.bootstrap for s in SLOTS], np.float32)
    for k, x in overrides.items():
        v[slot_index(k)] = x
    return v


def naive_matmul(a, b):
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = sum(float(a[i, k]) * float(b[k, j]) for k in range(a.shape[1]))
    return out


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_linear_forward(ref_rt, rng, precision, act):
    M, K, N = 7, 5, 9
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    y, *_ = run_kernel(ref_rt, matmul.LINEAR_FWD[precision], matmul.gemm_grid(M, N), 256,
                       [poisoned((M, N)), x, w, b, M, K, N, act])
    want = naive_matmul(x, w) + b
    want = {0: want, 1: np.maximum(want, 0), 2: np.tanh(want), 3: 1 / (1 + np.exp(-want))}[act]
    assert_close(y, want, 1e-6 if precision == "f32" else 2e-3)


def test_tf32_rounding_is_nearest_ties_away():
    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -10)
    x = np.array([one + ulp / 2, one + ulp / 4, -(one + ulp / 2), np.inf, 3.0], np.float32)
    got = F.round_tf32(x)
    assert got[0] == one + ulp and got[1] == one and got[2] == -(one + ulp)
    assert got[3] == np.inf and got[4] == 3.0


def test_matmul_nt_and_accumulate(ref_rt, rng):
    M, K, N = 6, 4, 5
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((N, K)).astype(np.float32)
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    c, *_ = run_kernel(ref_rt, matmul.MATMUL_NT["f32"], matmul.gemm_grid(M, N), 256, [poisoned((M, N)), a, b, M, K, N, 0])
    assert_close(c, naive_matmul(a, b.T), 1e-6)
    c, *_ = run_kernel(ref_rt, matmul.MATMUL_NT["f32"], matmul.gemm_grid(M, N), 256, [c0.copy(), a, b, M, K, N, 1])
    assert_close(c, c0 + naive_matmul(a, b.T), 1e-6)


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
def test_row_split_passes_and_column_sums(ref_rt, rng, precision):
    """dW (matmul_tn) and db (column_sum_partial) split over the rows, added by a GradPartials."""
    R, M, N = 300, 4, 6
    a = rng.standard_normal((R, M)).astype(np.float32)
    b = rng.standard_normal((R, N)).astype(np.float32)
    grad = ref_rt.device_array((M + 1) * N, np.float32, "grad")
    A = ref_rt.device_array((R, M), np.float32, "A"); A.upload(a)
    B = ref_rt.device_array((R, N), np.float32, "B"); B.upload(b)
    partials = matmul.GradPartials(ref_rt, grad)
    red_w = matmul.plan_row_split(ref_rt, partials, 0, B, R, N, A=A, M=M, precision=precision)
    red_b = matmul.plan_row_split(ref_rt, partials, M * N, B, R, N)
    assert red_w.splits > 1 and red_b.splits > 1  # the split path is exercised
    partials.finish()
    for p in (red_w, red_b, partials):
        p.launch(ref_rt.stream)
    g = grad.download()
    assert_close(g[:M * N].reshape(M, N), naive_matmul(a.T, b), 1e-6 if precision == "f32" else 2e-3)
    assert_close(g[M * N:], b.astype(np.float64).sum(axis=0), 1e-6)


def test_grad_partials_sum_every_pass_into_the_gradient_in_one_launch(ref_rt, rng):
    """Three layers' dW and db passes (split and not) share one workspace; one launch after the last
    pass writes every dW and db into the flat gradient buffer and nothing else (the gaps between
    tensors keep their bytes)."""
    shapes = [(300, 4, 6), (1000, 37, 67), (40, 3, 1)]
    layout, at = [], 0
    for R, M, N in shapes:
        layout.append((at, at + M * N + 5))  # dW, a gap, db, a gap
        at += (M + 1) * N + 10
    grad = ref_rt.device_array(at, np.float32, "grad")
    before = grad.download()
    partials = matmul.GradPartials(ref_rt, grad)
    passes, cases = [], []
    for (R, M, N), (out, tail) in zip(shapes, layout):
        a = rng.standard_normal((R, M)).astype(np.float32)
        b = rng.standard_normal((R, N)).astype(np.float32)
        A = ref_rt.device_array((R, M), np.float32, "A"); A.upload(a)
        B = ref_rt.device_array((R, N), np.float32, "B"); B.upload(b)
        passes.append(matmul.plan_dw_db(ref_rt, partials, A, B, R, M, N, out, tail))
        cases.append((a, b, A, B))
    with pytest.raises(RuntimeError, match="finish"):
        passes[0].launch(ref_rt.stream)  # no workspace yet
    assert partials.finish() is partials and len(partials.plans) == 1
    assert [p.splits > 1 for p in passes] == [True, True, False]
    for p in passes:
        p.launch(ref_rt.stream)
    partials.launch(ref_rt.stream)
    g = grad.download()
    written = np.zeros(at, bool)
    for (R, M, N), (out, tail), (a, b, *_) in zip(shapes, layout, cases):
        assert_close(g[out:out + M * N].reshape(M, N), naive_matmul(a.T, b), 1e-6)
        assert_close(g[tail:tail + N], b.astype(np.float64).sum(axis=0), 1e-6)
        written[out:out + M * N] = written[tail:tail + N] = True
    assert g[~written].tobytes() == before[~written].tobytes()


def test_gemm_kernel_choice():
    assert matmul.gemm_kernel("linear", 32768, 512, "f32")[1] == 64
    assert matmul.gemm_kernel("linear", 1024, 255, "f32")[1] == 32
    # TF32 below the 64x64 fill: the 32x32 mma kernels for the forward and dX, FP32 for 16-wide heads
    assert matmul.gemm_kernel("linear", 1024, 255, "tf32")[:2] == (matmul.TF32_T32["linear"], 32)
    assert matmul.gemm_kernel("nt", 1024, 136, "tf32")[:2] == (matmul.TF32_T32["nt"], 32)
    assert matmul.gemm_kernel("linear", 1024, 5, "tf32")[:2] == (matmul.LINEAR_FWD_T16, matmul.SKINNY_TILE)
    assert matmul.gemm_kernel("tn", 136, 255, "tf32")[:2] == (matmul.MATMUL_TN["tf32"], 64)  # Linear's big layers
    assert matmul.gemm_kernel("linear", 32768, 512, "tf32")[:2] == (matmul.LINEAR_FWD["tf32"], 64)
    assert matmul.gemm_kernel("linear", 1024, 5, "f32")[:2] == (matmul.LINEAR_FWD_T16, matmul.SKINNY_TILE)
    assert matmul.gemm_kernel("linear", 4096, 9, "tf32")[:2] == (matmul.LINEAR_FWD_T16_TALL, matmul.TALL_SKINNY_TILE)
    assert matmul.gemm_kernel("nt", 1024, 5, "f32")[1] == 32  # only the forward has a 16-wide tiling
    assert matmul.layer_precision(1024, 255, "tf32") == "f32" and matmul.layer_precision(1024, 255, "f32") == "f32"
    assert matmul.layer_precision(32768, 512, "tf32") == "tf32"


def test_row_split_covers_every_row():
    for R in [1, 15, 64, 1000, 32768, 524288]:
        for tiles in [1, 8, 300]:
            splits, chunk = matmul.row_split(R, tiles)
            assert chunk % 16 == 0 and splits * chunk >= R and (splits - 1) * chunk < R


def naive_scan(z, D):
    K, B, _ = z.shape
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    states = np.zeros((K, B, D))
    y = np.zeros((B, D))
    for b in range(B):
        for d in range(D):
            s = 0.0
            for t in range(K):
                s = sig(z[t, b, D + d]) * s + sig(z[t, b, 2 * D + d]) * np.tanh(z[t, b, d])
                states[t, b, d] = s
            y[b, d] = sig(z[K - 1, b, 3 * D + d]) * s
    return states, y


def test_ssm_scan_forward(ref_rt, rng):
    K, B, D = 5, 3, 4
    z = rng.standard_normal((K, B, 4 * D)).astype(np.float32)
    states, y, _ = run_kernel(ref_rt, ssm.SSM_SCAN_FWD, ssm.scan_grid(B, D), ssm.BLOCK,
                              [poisoned((K, B, D)), poisoned((B, D)), z, K, B, D])
    ws, wy = naive_scan(z.astype(np.float64), D)
    assert_close(states, ws, 1e-6)
    assert_close(y, wy, 1e-6)


def test_ssm_proj_scan_forward_equals_projection_then_scan(ref_rt, rng):
    """The fused projection + scan gives the bits of linear_fwd_f32 followed by ssm_scan_fwd, and the
    gates of that z."""
    K, B, D, nf = 5, 3, 32, 7
    x = rng.standard_normal((K, B, nf)).astype(np.float32)
    w = rng.standard_normal((nf, 4 * D)).astype(np.float32)
    bias = rng.standard_normal(4 * D).astype(np.float32)
    gates, states, y, *_ = run_kernel(ref_rt, ssm.SSM_PROJ_SCAN_FWD, ssm.proj_scan_grid(B, D), ssm.PS_THREADS,
                                  [poisoned((K, B, 4 * D)), poisoned((K, B, D)), poisoned((B, D)), x, w, bias,
                                   K, B, D, nf])
    z2, *_ = run_kernel(ref_rt, matmul.LINEAR_FWD["f32"], (1, 1, 1), 256,
                        [poisoned((K * B, 4 * D)), x, w, bias, K * B, nf, 4 * D, matmul.ACT_IDENTITY])
    s2, y2, _ = run_kernel(ref_rt, ssm.SSM_SCAN_FWD, ssm.scan_grid(B, D), ssm.BLOCK,
                           [poisoned((K, B, D)), poisoned((B, D)), z2.reshape(K, B, 4 * D), K, B, D])
    g2 = np.concatenate(F.ssm_parts(z2.reshape(K, B, 4 * D), D), axis=-1)
    assert np.array_equal(gates[:, :, :3 * D], g2[:, :, :3 * D]) and np.array_equal(gates[-1], g2[-1])
    assert np.isnan(gates[:-1, :, 3 * D:]).all()  # the output gate is written at the last step only
    assert np.array_equal(states, s2) and np.array_equal(y, y2)
    assert ssm.proj_scan_fits(128, 46) and not ssm.proj_scan_fits(100, 46) and not ssm.proj_scan_fits(128, 48)


@pytest.mark.parametrize("B", [3, 40])
def test_ssm_scan_bwd_dw_is_the_projections_weight_and_bias_gradient(ref_rt, rng, B):
    """Partials per block of PS_WINDOWS windows; reduced they give x^T dz and the column sums of dz, with dz
    from ssm_scan_bwd (which takes z where the fused backward takes z's gates)."""
    K, D, nf = 4, 32, 6
    x = rng.standard_normal((K, B, nf)).astype(np.float32)
    z = rng.standard_normal((K, B, 4 * D)).astype(np.float32)
    gates = np.concatenate(F.ssm_parts(z, D), axis=-1)
    states, _, _ = run_kernel(ref_rt, ssm.SSM_SCAN_FWD, ssm.scan_grid(B, D), ssm.BLOCK,
                              [poisoned((K, B, D)), poisoned((B, D)), z, K, B, D])
    dy = rng.standard_normal((B, D)).astype(np.float32)
    splits = ssm.bwd_dw_splits(B)
    parts, *_ = run_kernel(ref_rt, ssm.SSM_SCAN_BWD_DW, ssm.proj_scan_grid(B, D), ssm.PS_THREADS,
                           [poisoned((splits, nf + 1, 4 * D)), gates, states, dy, x, K, B, D, nf])
    [(dw, db)], _ = reduce_grad_splits(ref_rt, [(parts.reshape(splits, -1), nf * 4 * D)])
    dz, *_ = run_kernel(ref_rt, ssm.SSM_SCAN_BWD, ssm.scan_grid(B, D), ssm.BLOCK,
                        [poisoned(z.shape), z, states, dy, K, B, D])
    dz64 = dz.reshape(K * B, 4 * D).astype(np.float64)
    assert_close(dw, (x.reshape(K * B, nf).astype(np.float64).T @ dz64).ravel(), 1e-5)
    assert_close(db, dz64.sum(axis=0), 1e-5)


def test_c51_distribution(ref_rt, rng):
    B, stride = 6, 7
    logits = rng.standard_normal((B, heads.Q_OUTPUTS)).astype(np.float32) * 3
    isv = isv_values(c51_v_min=-4.0, c51_v_max=6.0)
    rows = rng.standard_normal((B, stride)).astype(np.float32)
    rows[:, 2] = [-1, 0, 1, 1, 0, -1]  # the side feature, column 2 of each row
    side = rows.ravel()[2:].copy()
    probs, q, _, _, unread_probs, unread_q, *_ = run_kernel(ref_rt, heads.C51_DISTRIBUTION, 1, 256, [
        poisoned((B, 5, 51)), poisoned((B, 5)), logits, side, poisoned((B, 5, 51)), poisoned((B, 5)), logits, side,
        isv, stride, B])
    assert np.isnan(unread_probs).all() and np.isnan(unread_q).all(), "grid.y = 1: the second head is not written"
    z = np.linspace(-4.0, 6.0, 51)
    valid = {-1: (HOLD, LONG, FLAT_FROM_SHORT), 0: (HOLD, LONG, SHORT), 1: (HOLD, SHORT, FLAT_FROM_LONG)}
    for b in range(B):
        for a in range(5):
            e = np.exp(logits[b, a * 51:(a + 1) * 51].astype(np.float64))
            p = e / e.sum()
            assert_close(probs[b, a], p, 1e-6)
            if a in valid[int(rows[b, 2])]:
                assert abs(q[b, a] - (p * z).sum()) < 1e-5
            else:
                assert q[b, a] == Q_INVALID, "an action that changes nothing is never taken"
    assert np.allclose(probs.sum(-1), 1, atol=1e-6)


def test_c51_distribution_two_heads_as_two_launches(ref_rt, rng):
    """grid.y = 2: each head gets the bits a launch of its own gives it."""
    B, stride = 5, 4
    isv = isv_values(c51_v_min=-3.0, c51_v_max=2.0)
    logits = [rng.standard_normal((B, heads.Q_OUTPUTS)).astype(np.float32) * 2 for _ in range(2)]
    sides = [rng.integers(-1, 2, B * stride).astype(np.float32) for _ in range(2)]
    out = lambda: [poisoned((B, 5, 51)), poisoned((B, 5))]  # noqa: E731
    both = run_kernel(ref_rt, heads.C51_DISTRIBUTION, (1, 2), 256, [
        *out(), logits[0], sides[0], *out(), logits[1], sides[1], isv, stride, B])
    for h in range(2):
        alone = run_kernel(ref_rt, heads.C51_DISTRIBUTION, 1, 256, [
            *out(), logits[h], sides[h], *out(), logits[h], sides[h], isv, stride, B])
        assert both[4 * h].tobytes() == alone[0].tobytes() and both[4 * h + 1].tobytes() == alone[1].tobytes()


def naive_projection(next_probs, next_q, ret, gamma_n, done, v_min, v_max):
    B = next_probs.shape[0]
    dz = (v_max - v_min) / 50
    m = np.zeros((B, 51))
    for b in range(B):
        a = int(np.argmax(next_q[b]))
        for j in range(51):
            tz = min(max(ret[b] + gamma_n[b] * (1 - done[b]) * (v_min + j * dz), v_min), v_max)
            pos = (tz - v_min) / dz
            lo, hi = int(np.floor(pos)), int(np.ceil(pos))
            if lo == hi:
                m[b, lo] += next_probs[b, a, j]
            else:
                m[b, lo] += next_probs[b, a, j] * (hi - pos)
                m[b, hi] += next_probs[b, a, j] * (pos - lo)
    return m


def c51_inputs(rng, B):
    logits = rng.standard_normal((B, heads.Q_OUTPUTS)).astype(np.float32)
    next_probs = rng.dirichlet(np.ones(51), (B, 5)).astype(np.float32)
    next_q = rng.standard_normal((B, 5)).astype(np.float32)
    action = rng.integers(0, 5, B).astype(np.int32)
    ret = (rng.standard_normal(B) * 4).astype(np.float32)
    gamma_n = rng.uniform(0.9, 1.0, B).astype(np.float32)
    done = (rng.random(B) < 0.3).astype(np.float32)
    weight = rng.uniform(0.2, 1.0, B).astype(np.float32)
    return logits, next_probs, next_q, action, ret, gamma_n, done, weight


def test_c51_projection_and_loss(ref_rt, rng):
    B = 8
    logits, next_probs, next_q, action, ret, gamma_n, done, weight = c51_inputs(rng, B)
    ret[0] = 100.0  # clipped at v_max
    ret[1] = -100.0
    isv = isv_values(c51_v_min=-10.0, c51_v_max=10.0)
    m = F.c51_project(next_probs, next_q, ret, gamma_n, done, np.float32(-10), np.float32(10))
    assert_close(m, naive_projection(next_probs, next_q, ret, gamma_n, done, -10.0, 10.0), 1e-5)
    assert np.allclose(m.sum(1), 1, atol=1e-5) and m[0, 50] > 0.999 and m[1, 0] > 0.999
    grad, loss, td, *_ = run_kernel(ref_rt, losses.C51_LOSS, 1, 256, [
        poisoned((B, heads.Q_OUTPUTS)), poisoned(B), poisoned(B), logits, next_probs, next_q, action, ret,
        gamma_n, done, weight, isv, B])
    z = np.linspace(-10, 10, 51)
    for b in range(B):
        lg = logits[b].reshape(5, 51)[action[b]].astype(np.float64)
        p = np.exp(lg - lg.max()); p /= p.sum()
        assert abs(loss[b] + (m[b] * np.log(p)).sum()) < 1e-4
        assert abs(td[b] - abs((m[b] * z).sum() - (p * z).sum())) < 1e-4
        g = grad[b].reshape(5, 51)
        assert np.all(np.delete(g, action[b], axis=0) == 0)


def test_bce_masked_ignores_masked_nan_labels(ref_rt, rng):
    rows, cols = 4, 9
    x = rng.standard_normal((rows, cols)).astype(np.float32) * 4
    y = (rng.random((rows, cols)) < 0.5).astype(np.float32)
    mask = (rng.random((rows, cols)) < 0.7).astype(np.float32)
    y[mask == 0] = np.nan
    grad, loss, *_ = run_kernel(ref_rt, losses.BCE_MASKED, 1, 256, [poisoned((rows, cols)), poisoned((rows, cols)),
                                                                    x, y, mask, rows, cols])
    assert np.all(np.isfinite(grad)) and np.all(np.isfinite(loss))
    on = mask == 1
    p = 1 / (1 + np.exp(-x[on].astype(np.float64)))
    want = -(y[on] * np.log(p) + (1 - y[on]) * np.log(1 - p))
    assert_close(loss[on], want, 1e-5)
    assert np.all(loss[~on] == 0) and np.all(grad[~on] == 0)


def test_loss_means(ref_rt, rng):
    B, n_bce = 1000, 9000
    xs = [rng.standard_normal(n).astype(np.float32) for n in (B, B, B, n_bce)]
    out, *_ = run_kernel(ref_rt, losses.LOSS_MEANS, 4, 256, [poisoned(4), *xs, B, n_bce])
    for k, x in enumerate(xs):
        assert abs(out[k] - x.astype(np.float64).mean()) < 1e-6, k


def adamw_formula(theta, grad, m, v, scale, step, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    """AdamW in float64, written out: the oracle of adamw_all."""
    g = grad.astype(np.float64) * scale
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * g * g
    return theta - lr * ((m2 / (1 - b1 ** step)) / (np.sqrt(v2 / (1 - b2 ** step)) + eps) + wd * theta), m2, v2


@pytest.mark.parametrize("limit", [0.0, 1.0, 1e9])
def test_grad_clip(ref_rt, rng, limit):
    n = 70_001
    g = rng.standard_normal(n).astype(np.float32)
    grad = ref_rt.device_array(n, np.float32, "grad")
    grad.upload(g)
    isv = ref_rt.device_array(len(SLOTS), np.float32, "isv")
    isv.upload(isv_values(grad_clip_norm=limit))
    clip = optim.GradClip(ref_rt, grad, n, isv)
    assert len(clip.plans) == 1
    clip.launch(ref_rt.stream)
    scale, norm = clip.clip.download()
    true = np.linalg.norm(g.astype(np.float64))
    assert abs(norm - true) / true < 1e-6
    assert scale == (np.float32(limit) / norm if 0 < limit < true else 1.0)


def test_adamw_all_matches_the_formula_per_tensor_then_soft_updates(ref_rt, rng):
    """Each tensor of the flat buffer gets AdamW with its own ISV learning rate and step count, the
    padding between tensors is untouched, then the target follows the new theta by tau."""
    n, nt = 3000, 300
    theta, grad = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    m, v = (rng.standard_normal(n) * 0.1).astype(np.float32), (rng.random(n) * 0.1).astype(np.float32)
    target = rng.standard_normal(nt).astype(np.float32)
    clip, steps = np.array([0.5, 2.0], np.float32), np.array([4, 9], np.int32)
    isv = isv_values(lr_encoder=1e-3, lr_q=2e-3, tau=0.2)
    table = np.array([[0, 1000, slot_index("lr_encoder")], [1024, 2990, slot_index("lr_q")]], np.int32)
    th, _, mm, vv, tg = run_kernel(ref_rt, optim.ADAMW_ALL, 3, 256,
                                   [theta.copy(), grad, m.copy(), v.copy(), target.copy(), clip, steps, table, 2, isv,
                                    n, 900, nt, 0.9, 0.999, 1e-8, 0.01])[:5]
    for (b, e, _), lr, step in zip(table, (1e-3, 2e-3), steps):
        want = adamw_formula(theta[b:e], grad[b:e], m[b:e], v[b:e], 0.5, step, lr)
        for got, w in zip((th[b:e], mm[b:e], vv[b:e]), want):
            assert_close(got, w, 1e-6)
    pad = np.r_[1000:1024, 2990:3000]
    assert np.array_equal(th[pad], theta[pad]) and np.array_equal(mm[pad], m[pad])
    assert_close(tg, target + 0.2 * (th[900:900 + nt].astype(np.float64) - target), 1e-6)
    parts, c, _, _, st, ticket = run_kernel(ref_rt, optim.GRAD_NORM_CLIP, 4, 256, [
        poisoned(4), np.zeros(2, np.float32), np.full(1024, 0.5, np.float32), 1024, isv, steps.copy(), 2,
        np.zeros(1, np.uint32)])
    assert np.array_equal(parts, np.full(4, 64.0, np.float32)) and c[1] == 16.0
    assert np.array_equal(st, steps + 1) and ticket[0] == 0


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("case", ["skinny", "small"])
def test_linear_group_gives_each_layer_its_single_launch_bits(ref_rt, rng, precision, case):
    """One launch of independent layers of different shapes: each output has plan_linear's bits."""
    group, single, inputs = linear_group(ref_rt, rng, LINEAR_GROUPS[case], precision)
    for (M, K, N, act), yg, ys, (x, w, b) in zip(LINEAR_GROUPS[case], group, single, inputs):
        assert np.array_equal(yg, ys)
        assert_close(yg, F.activate(x.astype(np.float64) @ w + b, act), 1e-6 if precision == "f32" else 2e-3)


def test_linear_group_refuses_layers_of_different_tilings(ref_rt):
    x = ref_rt.device_array((1024, 256), np.float32, "x")
    w, b = ref_rt.device_array((256, 255), np.float32, "w"), ref_rt.device_array(255, np.float32, "b")
    y, y5 = ref_rt.device_array((1024, 255), np.float32, "y"), ref_rt.device_array((1024, 5), np.float32, "y5")
    with pytest.raises(ValueError, match="different kernels.*linear_fwd_f32_t16.*linear_fwd_f32_t32"):
        matmul.plan_linear_group(ref_rt, [(y, x, w, b, 1024, 256, 255, 0), (y5, x, w, b, 1024, 256, 5, 0)])


def test_dw_db_passes_together_run_as_one_launch_with_each_pass_s_bits(ref_rt, rng):
    """Passes sharing a `together` key: one matmul_tn_ones_f32_t32_group launch where the first stands
    (the others launch nothing), each pass with its own split, so the gradients equal separate passes'."""
    seed = int(rng.integers(2**31))
    alone, passes0, _ = dw_db_grads(ref_rt, np.random.default_rng(seed), DW_DB_PASSES, None)
    grouped, passes, inputs = dw_db_grads(ref_rt, np.random.default_rng(seed), DW_DB_PASSES, "heads")
    assert [len(p.plans) for p in passes] == [1] + [0] * (len(passes) - 1)
    assert passes[0].plans[0].kernel.spec is matmul.MATMUL_TN_ONES_GROUP and all(len(p.plans) == 1 for p in passes0)
    assert np.array_equal(grouped, alone)
    at = 0
    for (R, M, N), (a, b) in zip(DW_DB_PASSES, inputs):
        assert_close(grouped[at:at + M * N], (a.astype(np.float64).T @ b).ravel(), 1e-5)
        assert_close(grouped[at + M * N:at + (M + 1) * N], b.astype(np.float64).sum(axis=0), 1e-5)
        at += (M + 1) * N
