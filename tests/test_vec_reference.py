"""The elementwise references against plain numpy on fresh random inputs."""
import numpy as np

from foxc import vec
from kernel_check import poisoned, run_kernel


def test_fill_and_copy(ref_rt, rng):
    n = int(rng.integers(1, 5000))
    out, = run_kernel(ref_rt, vec.FILL_F32, vec.grid_for(n), vec.BLOCK, [poisoned(n), 2.5, n])
    assert np.all(out == np.float32(2.5))
    u, = run_kernel(ref_rt, vec.FILL_U32, vec.grid_for(n), vec.BLOCK, [poisoned(n, np.uint32), 7, n])
    assert np.all(u == 7)
    src = rng.standard_normal(n).astype(np.float32)
    dst, s = run_kernel(ref_rt, vec.COPY_F32, vec.grid_for(n), vec.BLOCK, [poisoned(n), src, n])
    assert np.array_equal(dst, src) and np.array_equal(s, src)


def test_partial_length_leaves_the_rest(ref_rt, rng):
    out, = run_kernel(ref_rt, vec.FILL_F32, 1, vec.BLOCK, [poisoned(10), 1.0, 6])
    assert np.all(out[:6] == 1.0) and np.all(np.isnan(out[6:]))


def test_scale_and_axpy(ref_rt, rng):
    n = 4097
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a = np.float32(rng.standard_normal())
    got, = run_kernel(ref_rt, vec.SCALE_F32, vec.grid_for(n), vec.BLOCK, [x.copy(), a, n])
    assert np.array_equal(got, x * a)
    got, _ = run_kernel(ref_rt, vec.AXPY_F32, vec.grid_for(n), vec.BLOCK, [y.copy(), a, x, n])
    exact = a.astype(np.float64) * x + y
    assert np.max(np.abs(got - exact) / np.maximum(np.abs(exact), 1e-30)) <= 2 ** -24
