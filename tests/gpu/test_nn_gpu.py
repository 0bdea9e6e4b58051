"""The learning kernels on a GPU: each against its numpy reference at the model's shapes
(B=1024, K=32, D=128), outputs poisoned before launch; bit-identical reruns; graph = eager."""
import numpy as np
import pytest

from foxc.agent.layout import Q_INVALID, valid_actions
from foxc.isv import IsvBus
from foxc.isv.registry import SLOTS, slot_index
from foxc.nn import functional
from foxc.nn import heads, losses, matmul, model, optim, ssm
from kernel_check import assert_close, poisoned, rel_error, run_kernel
from nn_cases import DW_DB_PASSES, LINEAR_GROUPS, dw_db_grads, linear_group, reduce_grad_splits

B, K, D, F = 1024, 32, 128, 40


def isv_values(**overrides):
    v = np.array([s.bootstrap for s in SLOTS], np.float32)
    for k, x in overrides.items():
        v[slot_index(k)] = x
    return v


def compare(cuda_rt, ref_rt, spec, grid, block, args, rtol, what=None):
    """Run on both backends on copies of args; every float32 output compared, no NaN left behind."""
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    got = run_kernel(cuda_rt, spec, grid, block, copy())
    want = run_kernel(ref_rt, spec, grid, block, copy())
    errs = []
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype == np.float32:
            assert not np.isnan(g).any() or np.isnan(w).any(), f"{spec.name}: output {i} has unwritten elements"
            errs.append(assert_close(g, w, rtol, f"{what or spec.name} arg {i}"))
        else:
            assert np.array_equal(g, w), f"{spec.name} arg {i}"
    return got, max(errs) if errs else 0.0


def threads(precision: str) -> int:
    """The block of the 64x64 GEMM kernels of a precision (as matmul.gemm_kernel gives it)."""
    return matmul.gemm_kernel("linear", 4096, 256, precision)[2]


GEMM_SHAPES = [(K * B, F, 4 * D), (B, D, D), (B, model.STATE_DIM, model.RL_HIDDEN),
               (B, model.RL_HIDDEN, heads.Q_OUTPUTS), (B, model.RL_HIDDEN, 1), (1000, 37, 67), (1, 5, 3)]


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("shape", GEMM_SHAPES)
def test_linear_fwd(cuda_rt, ref_rt, rng, precision, shape):
    M, Kd, N = shape
    x = rng.standard_normal((M, Kd)).astype(np.float32)
    w = (rng.standard_normal((Kd, N)) / np.sqrt(Kd)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    tol = 1e-5 if precision == "f32" else 2e-5  # the TF32 reference rounds operands as the tensor cores do
    for act in (0, 1, 2):
        compare(cuda_rt, ref_rt, matmul.LINEAR_FWD[precision], matmul.gemm_grid(M, N), threads(precision),
                [poisoned((M, N)), x, w, b, M, Kd, N, act], tol)


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
def test_tf32_within_tolerance_of_fp32(cuda_rt, rng, precision):
    M, Kd, N = B, D, heads.Q_OUTPUTS
    x = rng.standard_normal((M, Kd)).astype(np.float32)
    w = rng.standard_normal((Kd, N)).astype(np.float32)
    b = np.zeros(N, np.float32)
    exact = x.astype(np.float64) @ w
    y, *_ = run_kernel(cuda_rt, matmul.LINEAR_FWD[precision], matmul.gemm_grid(M, N), threads(precision),
                       [poisoned((M, N)), x, w, b, M, Kd, N, 0])
    err = rel_error(y, exact)
    print(f"{precision} vs float64: relative error {err:.2e}")
    assert err < (1e-6 if precision == "f32" else 5e-4)


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("shape", [(B, D, heads.Q_OUTPUTS), (B, D, D), (777, 33, 65)])
def test_matmul_nt(cuda_rt, ref_rt, rng, precision, shape):
    M, Kd, N = shape
    a = rng.standard_normal((M, Kd)).astype(np.float32)
    b = rng.standard_normal((N, Kd)).astype(np.float32)
    tol = 1e-5 if precision == "f32" else 2e-5
    compare(cuda_rt, ref_rt, matmul.MATMUL_NT[precision], matmul.gemm_grid(M, N), threads(precision),
            [poisoned((M, N)), a, b, M, Kd, N, 0], tol)
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    compare(cuda_rt, ref_rt, matmul.MATMUL_NT[precision], matmul.gemm_grid(M, N), threads(precision),
            [c0, a, b, M, Kd, N, 1], tol)


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("shape", [(K * B, F, 4 * D), (B, D, heads.Q_OUTPUTS), (B, D, 1), (1001, 37, 67)])
def test_matmul_tn_split_and_reduce(cuda_rt, ref_rt, rng, precision, shape):
    R, M, N = shape
    tiles = matmul.gemm_grid(M, N)[0] * matmul.gemm_grid(M, N)[1]
    splits, chunk = matmul.row_split(R, tiles)
    a = rng.standard_normal((R, M)).astype(np.float32)
    b = rng.standard_normal((R, N)).astype(np.float32)
    tol = 1e-5 if precision == "f32" else 2e-5
    (parts, *_), _ = compare(cuda_rt, ref_rt, matmul.MATMUL_TN[precision], matmul.gemm_grid(M, N, splits),
                             threads(precision),
                             [poisoned((splits, M, N)), a, b, R, M, N, chunk], tol)
    [(dw, _)], _ = reduce_grad_splits(cuda_rt, [(parts.reshape(splits, -1), M * N)])  # as plan_row_split's passes
    assert_close(dw, (a.astype(np.float64).T @ b).ravel(), 1e-5 if precision == "f32" else 2e-3)
    cs, cchunk = matmul.row_split(R, -(-N // 32))
    compare(cuda_rt, ref_rt, matmul.COLUMN_SUM_PARTIAL, (-(-N // 32), cs), (32, 8),
            [poisoned((cs, N)), b, R, N, cchunk], 1e-5)


SMALL_SHAPES = [(B, D, heads.Q_OUTPUTS), (B, D, D), (B, D, 5), (B, D, 1), (1000, 37, 67), (33, 17, 31), (1, 5, 3)]


@pytest.mark.parametrize("shape", SMALL_SHAPES)
def test_t32_kernels_match_reference_and_64_tiles(cuda_rt, ref_rt, rng, shape):
    """The 32x32-, 16x16- and 64x16-tile FP32 kernels against the reference, and bit-identical to the 64x64 ones."""
    M, Kd, N = shape
    x = rng.standard_normal((M, Kd)).astype(np.float32)
    w = (rng.standard_normal((Kd, N)) / np.sqrt(Kd)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    grid32 = matmul.gemm_grid(M, N, 1, matmul.SMALL_TILE)
    (y32, *_), _ = compare(cuda_rt, ref_rt, matmul.LINEAR_FWD_T32, grid32, matmul.SMALL_THREADS,
                           [poisoned((M, N)), x, w, bias, M, Kd, N, 2], 1e-5)
    y64, *_ = run_kernel(cuda_rt, matmul.LINEAR_FWD["f32"], matmul.gemm_grid(M, N), 256,
                         [poisoned((M, N)), x, w, bias, M, Kd, N, 2])
    assert np.array_equal(y32, y64)
    skinny = ((matmul.LINEAR_FWD_T16, matmul.SKINNY_TILE), (matmul.LINEAR_FWD_T16_TALL, matmul.TALL_SKINNY_TILE))
    for spec, tile in skinny:
        (y16, *_), _ = compare(cuda_rt, ref_rt, spec, matmul.gemm_grid(M, N, 1, tile),
                               matmul.SMALL_THREADS, [poisoned((M, N)), x, w, bias, M, Kd, N, 2], 1e-5)
        assert np.array_equal(y16, y64), spec.name
    wt = rng.standard_normal((N, Kd)).astype(np.float32)
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    for acc, c in ((0, poisoned((M, N))), (1, c0)):
        (c32, *_), _ = compare(cuda_rt, ref_rt, matmul.MATMUL_NT_T32, grid32, matmul.SMALL_THREADS,
                               [c, x, wt, M, Kd, N, acc], 1e-5)
        c64, *_ = run_kernel(cuda_rt, matmul.MATMUL_NT["f32"], matmul.gemm_grid(M, N), 256,
                             [c.copy(), x, wt, M, Kd, N, acc])
        assert np.array_equal(c32, c64)


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("case", sorted(LINEAR_GROUPS))
def test_linear_group_kernels(cuda_rt, ref_rt, rng, precision, case):
    """linear_fwd_*_group (every tiling, layers of different shapes in one launch, blocks past a smaller
    layer's edge): each output bit-identical to its own single-layer launch on the GPU, against float64
    (TF32: within its operands' rounding) and against the reference's group."""
    layers = LINEAR_GROUPS[case]
    seed = int(rng.integers(2**31))
    group, single, inputs = linear_group(cuda_rt, np.random.default_rng(seed), layers, precision)
    ref_group, _, _ = linear_group(ref_rt, np.random.default_rng(seed), layers, precision)
    for (M, Kd, N, act), yg, ys, yr, (x, w, b) in zip(layers, group, single, ref_group, inputs):
        assert np.array_equal(yg, ys), (case, precision, M, N)
        assert_close(yg, yr, 1e-5 if precision == "f32" else 2e-5)
        assert_close(yg, functional.activate(x.astype(np.float64) @ w + b, act), 1e-5 if precision == "f32" else 2e-3)


def test_dw_db_passes_together(cuda_rt, ref_rt, rng):
    """matmul_tn_ones_f32_t32_group (passes of different shapes and splits in one launch, one of them a
    64x64-tile pass on its own): the gradients bit-identical to the passes launched one by one on the
    GPU, and against the reference."""
    seed = int(rng.integers(2**31))
    alone, _, _ = dw_db_grads(cuda_rt, np.random.default_rng(seed), DW_DB_PASSES, None)
    grouped, passes, _ = dw_db_grads(cuda_rt, np.random.default_rng(seed), DW_DB_PASSES, "heads")
    ref, _, _ = dw_db_grads(ref_rt, np.random.default_rng(seed), DW_DB_PASSES, "heads")
    assert passes[0].plans[0].kernel.spec is matmul.MATMUL_TN_ONES_GROUP
    assert np.array_equal(grouped, alone)
    assert_close(grouped, ref, 1e-5)


@pytest.mark.parametrize("shape", [(B, model.STATE_DIM, model.RL_HIDDEN), (B, model.RL_HIDDEN, heads.Q_OUTPUTS),
                                   (B, D, D), (1000, 37, 67), (33, 300, 31), (1, 5, 3)])
def test_tf32_t32_kernels_match_reference(cuda_rt, ref_rt, rng, shape):
    """The 32x32 mma TF32 forward and dX (k staged by cp.async; K past the stages in flight, rows and
    columns not multiples of the tile) against the TF32 reference, and within TF32's error of float64."""
    M, Kd, N = shape
    x = rng.standard_normal((M, Kd)).astype(np.float32)
    w = (rng.standard_normal((Kd, N)) / np.sqrt(Kd)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    grid = matmul.gemm_grid(M, N, 1, matmul.SMALL_TILE)
    for act in (matmul.ACT_IDENTITY, matmul.ACT_RELU):
        (y, *_), _ = compare(cuda_rt, ref_rt, matmul.TF32_T32["linear"], grid, matmul.TF32_T32_THREADS,
                             [poisoned((M, N)), x, w, bias, M, Kd, N, act], 2e-5)
    # each product's operands rounded to 11 significant bits: |error| <= 2^-10 of the sum of |products|
    exact = np.maximum(x.astype(np.float64) @ w + bias, 0)
    assert (np.abs(y - exact) <= 2.0 ** -10 * (np.abs(x).astype(np.float64) @ np.abs(w)) + 1e-6).all()
    wt = rng.standard_normal((N, Kd)).astype(np.float32)
    c0 = rng.standard_normal((M, N)).astype(np.float32)
    for acc, c in ((0, poisoned((M, N))), (1, c0)):
        compare(cuda_rt, ref_rt, matmul.TF32_T32["nt"], grid, matmul.TF32_T32_THREADS, [c, x, wt, M, Kd, N, acc], 2e-5)


@pytest.mark.parametrize("shape", [(K * B, F, 4 * D), (B, D, heads.Q_OUTPUTS), (B, D, D), (B, D, 9), (B, D, 1),
                                   (1001, 37, 67), (70, 3, 5)])
@pytest.mark.parametrize("tile", [matmul.TILE, matmul.SMALL_TILE])
def test_matmul_tn_ones_and_reduce(cuda_rt, ref_rt, rng, shape, tile):
    """dW with the bias gradient as the extra row, split and reduced into its two outputs; and the
    plain split kernel at the same tiling."""
    R, M, N = shape
    threads = matmul.GEMM_THREADS if tile == matmul.TILE else matmul.SMALL_THREADS
    splits = max(1, min(7, -(-R // 64)))
    chunk = -(-(-(-R // splits)) // 16) * 16
    splits = -(-R // chunk)
    a = rng.standard_normal((R, M)).astype(np.float32)
    b = rng.standard_normal((R, N)).astype(np.float32)
    (parts, *_), _ = compare(cuda_rt, ref_rt, matmul.MATMUL_TN_ONES[tile], matmul.gemm_grid(M + 1, N, splits, tile),
                             threads, [poisoned((splits, M + 1, N)), a, b, R, M, N, chunk], 1e-5)
    [(dw, db)], _ = reduce_grad_splits(cuda_rt, [(parts.reshape(splits, -1), M * N)])
    assert_close(dw, (a.astype(np.float64).T @ b).ravel(), 1e-5)
    assert_close(db, b.astype(np.float64).sum(axis=0), 1e-5)
    if tile == matmul.SMALL_TILE:
        compare(cuda_rt, ref_rt, matmul.MATMUL_TN_T32, matmul.gemm_grid(M, N, splits, tile), threads,
                [poisoned((splits, M, N)), a, b, R, M, N, chunk], 1e-5)


def test_act_bwd(cuda_rt, ref_rt, rng):
    n = B * D
    dy = rng.standard_normal(n).astype(np.float32)
    for act in range(4):
        y = rng.uniform(-1, 1, n).astype(np.float32) if act != 3 else rng.random(n).astype(np.float32)
        compare(cuda_rt, ref_rt, matmul.ACT_BWD, matmul.elementwise_grid(n), 256, [poisoned(n), dy, y, n, act], 1e-6)


@pytest.mark.parametrize("shape", [(K, B, D), (13, 37, 24), (1, 5, 8), (9, 3, 128)])
def test_ssm_scan(cuda_rt, ref_rt, rng, shape):
    K, B, D = shape  # noqa: N806 (windows not a multiple of the kernel's 8-step load chunk too)
    z = rng.standard_normal((K, B, 4 * D)).astype(np.float32)
    (states, y, _), _ = compare(cuda_rt, ref_rt, ssm.SSM_SCAN_FWD, ssm.scan_grid(B, D), ssm.BLOCK,
                                [poisoned((K, B, D)), poisoned((B, D)), z, K, B, D], 1e-5)
    dy = rng.standard_normal((B, D)).astype(np.float32)
    compare(cuda_rt, ref_rt, ssm.SSM_SCAN_BWD, ssm.scan_grid(B, D), ssm.BLOCK,
            [poisoned(z.shape), z, states, dy, K, B, D], 1e-5)


PROJ_SCAN_SHAPES = [(K, B, D, 46), (K, B, D, F), (13, 37, 32, 46), (1, 5, 32, 3), (9, 3, 128, 47), (8, 40, 64, 1)]


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("shape", PROJ_SCAN_SHAPES)
def test_ssm_proj_scan_fwd(cuda_rt, ref_rt, rng, shape, precision):
    """The projection fused into the scan against its reference (linear_fwd + ssm_scan_fwd; TF32: the
    operands rounded as the tensor cores take them). The gates (written where the backward reads them:
    the output gate at the last step only) against the activations of linear_fwd_f32's z on the GPU:
    FP32 within the activations' rounding, TF32 within TF32's error. Window counts not a multiple of
    the block's windows and steps not of the chunk's too."""
    K_, B_, D_, nf = shape
    x = rng.standard_normal((K_, B_, nf)).astype(np.float32)
    w = (rng.standard_normal((nf, 4 * D_)) / np.sqrt(nf)).astype(np.float32)
    bias = rng.standard_normal(4 * D_).astype(np.float32)
    tol = 1e-5 if precision == "f32" else 5e-5  # TF32: the kernel's fast sigmoid and FP32 sums in mma order
    (gates, states, y, *_), _ = compare(cuda_rt, ref_rt, ssm.PROJ_SCAN_FWD[precision], ssm.proj_scan_grid(B_, D_),
                                    ssm.PS_THREADS, [poisoned((K_, B_, 4 * D_)), poisoned((K_, B_, D_)),
                                                     poisoned((B_, D_)), x, w, bias, K_, B_, D_, nf], tol)
    M, N = K_ * B_, 4 * D_
    z_gemm, *_ = run_kernel(cuda_rt, matmul.LINEAR_FWD["f32"], matmul.gemm_grid(M, N), matmul.GEMM_THREADS,
                            [poisoned((M, N)), x, w, bias, M, nf, N, matmul.ACT_IDENTITY])
    g_gemm = np.concatenate(functional.ssm_parts(z_gemm.reshape(K_, B_, N), D_), axis=-1)
    written = np.concatenate([gates[:, :, :3 * D_].ravel(), gates[-1].ravel()])
    expected = np.concatenate([g_gemm[:, :, :3 * D_].ravel(), g_gemm[-1].ravel()])
    if precision == "f32":
        assert_close(written, expected, 1e-6)  # CUDA's tanhf / expf against numpy's
    else:
        err = rel_error(written, expected)
        assert 0 < err < 2e-3, f"TF32 gates against FP32: relative error {err:.2e}"
    assert np.isnan(gates[:-1, :, 3 * D_:]).all()  # the output gate: written at the last step only


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
@pytest.mark.parametrize("shape", PROJ_SCAN_SHAPES)
def test_ssm_scan_bwd_dw(cuda_rt, ref_rt, rng, shape, precision):
    """The input projection's gradient partials summed in the reverse scan against the reference
    (ssm_scan_bwd's dz, then [x, 1]^T dz per block of windows; TF32: x and dz rounded), and reduced
    against float64 (TF32: within its operands' rounding)."""
    K_, B_, D_, nf = shape
    x = rng.standard_normal((K_, B_, nf)).astype(np.float32)
    z = rng.standard_normal((K_, B_, 4 * D_)).astype(np.float32)
    gates = np.concatenate(functional.ssm_parts(z, D_), axis=-1)
    states, _, _ = run_kernel(ref_rt, ssm.SSM_SCAN_FWD, ssm.scan_grid(B_, D_), ssm.BLOCK,
                              [poisoned((K_, B_, D_)), poisoned((B_, D_)), z, K_, B_, D_])
    dy = rng.standard_normal((B_, D_)).astype(np.float32)
    splits = ssm.bwd_dw_splits(B_)
    # TF32: rounding dz to TF32 can differ by one unit from the reference's float64-ordered products
    (parts, *_), _ = compare(cuda_rt, ref_rt, ssm.SCAN_BWD_DW[precision], ssm.proj_scan_grid(B_, D_), ssm.PS_THREADS,
                             [poisoned((splits, nf + 1, 4 * D_)), gates, states, dy, x, K_, B_, D_, nf],
                             1e-5 if precision == "f32" else 1e-4)
    [(dw, db)], _ = reduce_grad_splits(cuda_rt, [(parts.reshape(splits, -1), nf * 4 * D_)])
    dz, *_ = run_kernel(ref_rt, ssm.SSM_SCAN_BWD, ssm.scan_grid(B_, D_), ssm.BLOCK,
                        [poisoned(z.shape), z, states, dy, K_, B_, D_])
    dz64 = dz.reshape(K_ * B_, 4 * D_).astype(np.float64)
    tol = 1e-5 if precision == "f32" else 2e-3
    assert_close(dw, (x.reshape(K_ * B_, nf).astype(np.float64).T @ dz64).ravel(), tol)
    assert_close(db, dz64.sum(axis=0), tol)


def test_reduce_grad_splits_bitwise(cuda_rt, ref_rt, rng):
    """Every split pass of a backward in one launch (the learner's shapes at B=1,024: input projection,
    encoder output, perception, RL trunk, C51, policy, value), on a poisoned gradient buffer: the
    sums in split order, bit-identical to the reference; the gaps between outputs untouched."""
    shapes = [(ssm.bwd_dw_splits(B), F + 1, 4 * D), (16, D + 1, D), (4, D + 1, 9), (32, model.STATE_DIM + 1, 256),
              (40, 257, heads.Q_OUTPUTS), (4, 257, 5), (2, 257, 1), (1, 3, 2)]
    blocks = [((rng.standard_normal((splits, rows * N)) * 10.0 ** rng.uniform(-3, 3)).astype(np.float32),
               (rows - 1) * N) for splits, rows, N in shapes]
    got, got_grad = reduce_grad_splits(cuda_rt, blocks)
    want, want_grad = reduce_grad_splits(ref_rt, blocks)
    assert np.array_equal(np.isnan(got_grad), np.isnan(want_grad)), "written where the reference is not, or not"
    for (g_w, g_b), (w_w, w_b), (p, n_main) in zip(got, want, blocks):
        assert np.array_equal(g_w, w_w) and np.array_equal(g_b, w_b), p.shape
        assert_close(np.concatenate([g_w, g_b]), p.astype(np.float64).sum(axis=0), 1e-6)


@pytest.mark.parametrize("A", [5, 9], ids=["market", "passive"])
def test_heads(cuda_rt, ref_rt, rng, A):
    """c51_distribution with one head (grid.y = 1: the second set stays poisoned) and two (the learner's):
    each head's outputs have the bits of a launch of its own, on any grid. A = 9: c51_distribution_quotes."""
    isv = isv_values(c51_v_min=-7.0, c51_v_max=9.0)
    stride = model.STATE_DIM + (8 if A == 9 else 0)
    spec = heads.C51_DISTRIBUTIONS[A]
    logits, states = [], []
    for _ in range(2):
        logits.append((rng.standard_normal((B, A * 51)) * 3).astype(np.float32))
        states.append(rng.standard_normal((B, stride)).astype(np.float32))
        states[-1][:, model.SIDE_COLUMN] = rng.integers(-1, 2, B)
    sides = [s.ravel()[model.SIDE_COLUMN:].copy() for s in states]

    def launch(grid, first, second):  # (logits, side) of head 0 and head 1
        return compare(cuda_rt, ref_rt, spec, grid, 256, [
            poisoned((B, A, 51)), poisoned((B, A)), *first, poisoned((B, A, 51)), poisoned((B, A)), *second,
            isv, stride, B], 1e-5)[0]
    alone = [launch(heads.c51_distribution_grid(B, 1, A), (logits[h], sides[h]), (logits[h], sides[h]))
             for h in range(2)]
    for h in range(2):
        assert np.array_equal(alone[h][1] == Q_INVALID, ~valid_actions(states[h][:, model.SIDE_COLUMN], A))
        assert np.isnan(alone[h][4]).all() and np.isnan(alone[h][5]).all(), "grid.y = 1 writes only head 0"
    # the plan's warp per row for two heads; a small grid striding, with one head and two
    for grid in (heads.c51_distribution_grid(B, 2, A), (7, 1), (7, 2)):
        got = launch(grid, (logits[0], sides[0]), (logits[1], sides[1]))
        for h in range(2):
            if h < grid[1]:
                assert got[4 * h].tobytes() == alone[h][0].tobytes(), f"grid {grid}: head {h} probs"
                assert got[4 * h + 1].tobytes() == alone[h][1].tobytes(), f"grid {grid}: head {h} q"
            else:
                assert np.isnan(got[4 * h]).all() and np.isnan(got[4 * h + 1]).all()


@pytest.mark.parametrize("A", [5, 9], ids=["market", "passive"])
def test_losses(cuda_rt, ref_rt, rng, A):
    """c51_loss and value_policy_loss (A = 9: their _quotes kernels), bce_masked."""
    c51, vpl = losses.C51_LOSSES[A], losses.VALUE_POLICY_LOSSES[A]
    logits = rng.standard_normal((B, A * 51)).astype(np.float32)
    next_probs = rng.dirichlet(np.ones(51), (B, A)).astype(np.float32)
    next_q = rng.standard_normal((B, A)).astype(np.float32)
    action = rng.integers(0, A, B).astype(np.int32)
    ret = (rng.standard_normal(B) * 4).astype(np.float32)
    gamma_n = rng.uniform(0.9, 1.0, B).astype(np.float32)
    done = (rng.random(B) < 0.2).astype(np.float32)
    weight = rng.uniform(0.2, 1.0, B).astype(np.float32)
    isv = isv_values(distill_temperature=0.3)
    done[:8] = 1.0  # targets exactly on atoms (both neighbours the same atom)
    ret[:8] = np.float32(isv[slot_index("c51_v_min")])
    ret[8:16] = np.float32(isv[slot_index("c51_v_max")]) + 1.0
    for grid, block in ((losses.c51_loss_grid(B), losses.C51_BLOCK), (3, 256)):  # warp per sample; striding
        got, _ = compare(cuda_rt, ref_rt, c51, grid, block, [
            poisoned((B, A * 51)), poisoned(B), poisoned(B), logits, next_probs, next_q, action, ret,
            gamma_n, done, weight, isv, B], 1e-4)
        again = run_kernel(cuda_rt, c51, grid, block, [
            poisoned((B, A * 51)), poisoned(B), poisoned(B), logits, next_probs, next_q, action, ret,
            gamma_n, done, weight, isv, B])
        for a, b in zip(got[:3], again[:3]):
            assert np.array_equal(a, b)
    v, v_next = rng.standard_normal(B).astype(np.float32), rng.standard_normal(B).astype(np.float32)
    pl = rng.standard_normal((B, A)).astype(np.float32)
    side = rng.integers(-1, 2, B)
    q = np.where(valid_actions(side, A), rng.standard_normal((B, A)) * 2, Q_INVALID).astype(np.float32)
    vp_args = [poisoned(B), poisoned(B), poisoned(B), v, v_next, ret, gamma_n, done, poisoned((B, A)), poisoned(B),
               pl, q, isv, B]
    got = run_kernel(cuda_rt, vpl, losses.grid_for(B), 256, [
        a.copy() if isinstance(a, np.ndarray) else a for a in vp_args])
    want = run_kernel(ref_rt, vpl, losses.grid_for(B), 256, [
        a.copy() if isinstance(a, np.ndarray) else a for a in vp_args])
    # the value's (the kernel's contracted fma: a tolerance) and the policy's outputs (expf, logf)
    for i, what, rtol in ((0, "grad_v", 1e-5), (1, "loss_v", 1e-5), (2, "advantage", 1e-5), (8, "grad_pi", 1e-4),
                          (9, "loss_pi", 1e-4)):
        assert not np.isnan(got[i]).any(), f"value_policy_loss {what}: unwritten elements"
        assert_close(got[i], want[i], rtol, f"value_policy_loss {what}")
    for i in (3, 4, 5, 6, 7, 10, 11):
        assert np.array_equal(got[i], vp_args[i]), f"value_policy_loss wrote input {i}"
    assert np.all(got[8][~valid_actions(side, A)] == 0), "no gradient on an invalid action's logit"
    x = (rng.standard_normal((B, 9)) * 3).astype(np.float32)
    y = (rng.random((B, 9)) < 0.5).astype(np.float32)
    mask = (rng.random((B, 9)) < 0.8).astype(np.float32)
    y[mask == 0] = np.nan
    compare(cuda_rt, ref_rt, losses.BCE_MASKED, losses.grid_for(B * 9), 256, [
        poisoned((B, 9)), poisoned((B, 9)), x, y, mask, B, 9], 1e-5)


def one_block_mean(x: np.ndarray) -> np.float32:
    """A mean in loss_means' float32 order: thread t adds x[t], x[t + 256], ..., then a halving tree."""
    lanes = np.zeros(-(-x.size // 256) * 256, np.float32)
    lanes[:x.size] = x
    part = np.zeros(256, np.float32)
    for row in lanes.reshape(-1, 256):
        part = (part + row).astype(np.float32)
    w = 128
    while w:
        part[:w] = part[:w] + part[w:2 * w]
        w //= 2
    return np.float32(part[0] / np.float32(x.size))


@pytest.mark.parametrize("n_bce", [B * 9, 7])
def test_loss_means(cuda_rt, ref_rt, rng, n_bce):
    """The four means in one launch: each bit-identical to the kernel's float32 order written out in
    numpy; the reference (a float64 sum) within the rounding of a float32 sum of signed terms, which
    scales with sum |x|, not |sum x| (B terms; eps 6e-8)."""
    xs = [(rng.standard_normal(n) * 4).astype(np.float32) for n in (B, B, B, n_bce)]
    args = [poisoned(4), *xs, B, n_bce]
    copy = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    got = run_kernel(cuda_rt, losses.LOSS_MEANS, 4, 256, copy())[0]
    want = run_kernel(ref_rt, losses.LOSS_MEANS, 4, 256, copy())[0]
    for k, x in enumerate(xs):
        assert got[k] == one_block_mean(x), (k, got[k], one_block_mean(x))
        assert abs(float(got[k]) - float(want[k])) <= 1e-5 * float(np.mean(np.abs(x))), (k, got[k], want[k])


@pytest.mark.parametrize("n,limit,n_steps", [(200_003, 10.0, 0), (70_000, 1e9, 37), (1000, 0.0, 300)])
def test_grad_norm_clip(cuda_rt, ref_rt, rng, n, limit, n_steps):
    """grad_norm_clip: the partials (float32 in a fixed order against the reference's float64), then its
    last block's norm and scale, the step counts bumped and the ticket back at 0; twice, so the
    second launch finds the ticket reset."""
    grad = rng.standard_normal(n).astype(np.float32)
    isv = isv_values(grad_clip_norm=limit)
    steps = np.arange(max(n_steps, 1), dtype=np.int32)
    args = [poisoned(optim.SUMSQ_BLOCKS), poisoned(2), grad, n, isv, steps, n_steps, np.zeros(1, np.uint32)]
    got = run_kernel(cuda_rt, optim.GRAD_NORM_CLIP, optim.SUMSQ_BLOCKS, 256, [a.copy() if isinstance(a, np.ndarray)
                                                                            else a for a in args], repeat=2)
    want = run_kernel(ref_rt, optim.GRAD_NORM_CLIP, optim.SUMSQ_BLOCKS, 256, [a.copy() if isinstance(a, np.ndarray)
                                                                            else a for a in args], repeat=2)
    parts, c, _, _, st, ticket = got
    assert_close(parts, want[0], 1e-5, "partials")
    assert_close(c, want[1], 1e-5, "clip")
    assert np.array_equal(st, want[4]) and np.array_equal(st[:n_steps], steps[:n_steps] + 2) and ticket[0] == 0
    # the last block's norm is exactly the partials added in index order by a fixed 256-thread tree
    part = np.zeros(256, np.float32)
    part[:optim.SUMSQ_BLOCKS] = parts
    w = 128
    while w:
        part[:w] = part[:w] + part[w:2 * w]
        w //= 2
    assert c[1] == np.sqrt(part[0], dtype=np.float32)
    assert abs(c[1] - np.linalg.norm(grad.astype(np.float64))) / c[1] < 1e-5
    assert c[0] == (np.float32(limit) / c[1] if 0 < limit < c[1] else 1.0)


def test_fused_optimizer_kernels(cuda_rt, ref_rt, rng):
    """adamw_all (every tensor of a flat buffer, then the target soft update from the new theta) against
    its reference; padding between tensors untouched."""
    n = 70_000
    theta = rng.standard_normal(n).astype(np.float32)
    grad = rng.standard_normal(n).astype(np.float32)
    m = (rng.standard_normal(n) * 0.1).astype(np.float32)
    v = (rng.random(n) * 0.1).astype(np.float32)
    target = rng.standard_normal(5000).astype(np.float32)
    clip = np.array([0.7, 3.0], np.float32)
    steps = np.array([3, 1, 7, 2], np.int32)
    slots = [slot_index(s) for s in ("lr_encoder", "lr_q", "lr_policy", "lr_value")]
    table = np.array([[0, 23000, slots[0]], [23040, 60000, slots[1]], [60032, 60033, slots[2]],
                      [60096, 69999, slots[3]]], np.int32)
    isv = isv_values(lr_encoder=1e-3, lr_q=2e-3, lr_policy=3e-4, lr_value=5e-4, tau=0.1, grad_clip_norm=10.0)
    (th, _, _, _, tg, *_), _ = compare(
        cuda_rt, ref_rt, optim.ADAMW_ALL, optim.grid_for(n), 256,
        [theta, grad, m, v, target, clip, steps, table, 4, isv, n, 23010, 5000, 0.9, 0.999, 1e-8, 0.01], 1e-6)
    assert np.array_equal(th[23000:23040], theta[23000:23040]) and th[69999] == theta[69999]


def make_learner(rt, precision, seed=7):
    isv = IsvBus(rt)
    learner = model.Learner(rt, isv, B, K, F, D, precision)
    rng = np.random.default_rng(seed)
    learner.params.init(rng)
    learner.load_inputs(learner.random_inputs(rng))
    return learner, isv


def state(learner):
    p = learner.params
    return [p.theta.download(), p.adam_m.download(), p.adam_v.download(), p.target.download(),
            learner.rl.td_error.download(), learner.encoder.h.download()]


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
def test_learner_step_same_bits_twice_and_in_a_graph(cuda_rt, precision):
    runs = []
    for mode in ("eager", "eager", "graph"):
        learner, isv = make_learner(cuda_rt, precision)
        if mode == "eager":
            for _ in range(3):
                model.launch_all(learner.step, cuda_rt.stream)
        else:
            with cuda_rt.capture(name="learn") as cap:
                model.launch_all(learner.step, cuda_rt.stream)
            for _ in range(3):
                cap.graph.launch(cuda_rt.stream)
        cuda_rt.stream.synchronize()
        runs.append(state(learner))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("precision", matmul.PRECISIONS)
def test_learner_gradients_match_reference(cuda_rt, ref_rt, precision):
    got, _ = make_learner(cuda_rt, precision)
    want, _ = make_learner(ref_rt, precision)
    model.launch_all(got.forward_backward, cuda_rt.stream)
    model.launch_all(want.forward_backward, ref_rt.stream)
    cuda_rt.stream.synchronize()
    g, w = got.params.host("grad"), want.params.host("grad")
    for name in g:
        err = rel_error(g[name], w[name])
        print(f"{precision} grad {name}: relative error {err:.2e}")
        assert err < (1e-4 if precision == "f32" else 1e-3), name
