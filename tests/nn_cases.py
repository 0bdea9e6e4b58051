"""Inputs for the learning kernels, shared by the CPU and GPU tests."""
import numpy as np

from foxc.nn import matmul
from foxc.testing import poisoned, run_kernel

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
