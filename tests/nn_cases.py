"""Inputs for the learning kernels, shared by the CPU and GPU tests."""
import numpy as np

from foxc.nn import matmul
from kernel_check import poisoned, run_kernel

GAP = 3  # floats left between the outputs in the gradient buffer (they must stay poisoned)


def reduce_grad_splits(rt, blocks):
    """reduce_grad_splits over partial blocks [(partials [splits, size], n_main)], laid side by side, each
    summed into a poisoned gradient buffer: dW (the first n_main), a gap, db, a gap. Returns the
    [(dW, db)] views and the whole buffer."""
    rows, begin, offset, at = [], 0, 0, 0
    for p, n_main in blocks:
        splits, size = p.shape
        rows.append((begin, size, splits, offset, n_main, at, at + n_main + GAP))
        begin, offset, at = begin + size, offset + p.size, at + size + 2 * GAP
    parts = np.concatenate([p.ravel() for p, _ in blocks]).astype(np.float32)
    grad, *_ = run_kernel(rt, matmul.REDUCE_GRAD_SPLITS, matmul.elementwise_grid(begin), matmul.ELEMENTWISE_BLOCK,
                          [poisoned(at), parts, np.array(rows, np.int64), len(rows), begin])
    return [(grad[out:out + m], grad[tail:tail + size - m]) for _, size, _, _, m, out, tail in rows], grad


# Layers grouped in one launch by the model, by the kernel they take: (M, K, N, act) each.
LINEAR_GROUPS = {
    "skinny": [(40, 33, 9, matmul.ACT_IDENTITY), (40, 64, 5, matmul.ACT_TANH), (17, 64, 1, matmul.ACT_IDENTITY)],
    "tall_skinny": [(4096, 256, 9, matmul.ACT_IDENTITY), (4100, 256, 5, matmul.ACT_TANH),
                    (4096, 200, 1, matmul.ACT_IDENTITY)],
    "small": [(300, 136, 200, matmul.ACT_RELU), (300, 136, 200, matmul.ACT_RELU), (250, 100, 180, matmul.ACT_SIGMOID)],
    "large": [(4096, 136, 256, matmul.ACT_RELU), (4100, 100, 250, matmul.ACT_IDENTITY)],
}


def linear_group(rt, rng, layers, precision):
    """The layers (M, K, N, act) on random inputs, once as one plan_linear_group launch and once a
    plan_linear launch each, into poisoned outputs. Returns ([group Y], [single Y], [(x, w, b)])."""
    arrays, problems, singles = [], [], []
    for i, (M, K, N, act) in enumerate(layers):
        x, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal(N).astype(np.float32)
        w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
        dev = [rt.device_array(a.shape, np.float32, f"layer{i}_{n}") for a, n in ((x, "x"), (w, "w"), (b, "b"))]
        for d, a in zip(dev, (x, w, b)):
            d.upload(a)
        y_group, y_single = (rt.device_array((M, N), np.float32, f"layer{i}_{n}") for n in ("group", "single"))
        for y in (y_group, y_single):
            y.upload(poisoned((M, N)))
        problems.append((y_group, *dev, M, K, N, act))
        singles.append(matmul.plan_linear(rt, y_single, *dev, M, K, N, act, precision))
        arrays.append((x, w, b, y_group, y_single, *dev))
    matmul.plan_linear_group(rt, problems, precision, "test_group").launch(rt.stream)
    for p in singles:
        p.launch(rt.stream)
    out = ([a[3].download() for a in arrays], [a[4].download() for a in arrays], [a[:3] for a in arrays])
    for a in arrays:
        for d in a[3:]:
            d.close()
    return out


# dW + db passes (R, M, N) of different shapes and tilings (the Q head's takes 64x64 tiles on its own).
DW_DB_PASSES = [(1024, 128, 9), (1024, 256, 5), (1024, 256, 1), (1024, 256, 255), (300, 37, 67)]


def dw_db_grads(rt, rng, shapes, together: str | None):
    """The dW + db passes of `shapes` (R, M, N) on random inputs through one GradPartials (every pass keyed
    `together`, or each its own launch), run in order, then its reduction. Returns (the gradient buffer,
    the passes, the inputs [(a, b)])."""
    grad = rt.device_array(sum((M + 1) * N for _, M, N in shapes), np.float32, "grad")
    grad.upload(poisoned(grad.shape))
    partials, passes, inputs, at, arrays = matmul.GradPartials(rt, grad), [], [], 0, []
    for R, M, N in shapes:
        a, b = rng.standard_normal((R, M)).astype(np.float32), rng.standard_normal((R, N)).astype(np.float32)
        A, B = rt.device_array((R, M), np.float32, "A"), rt.device_array((R, N), np.float32, "B")
        A.upload(a)
        B.upload(b)
        passes.append(matmul.plan_dw_db(rt, partials, A, B, R, M, N, at, at + M * N, together=together))
        inputs.append((a, b))
        arrays += [A, B]
        at += (M + 1) * N
    partials.finish()
    for p in passes:
        p.launch(rt.stream)
    partials.launch(rt.stream)
    out = grad.download()
    for a in [grad, *arrays]:
        a.close()
    return out, passes, inputs
