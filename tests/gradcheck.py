"""Finite-difference gradient checks in float64 (used by the tests of every backward kernel)."""
from __future__ import annotations

import numpy as np


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences; f maps a float64 array shaped like x to a scalar."""
    x = np.array(x, np.float64)
    grad = np.zeros_like(x)
    flat, g = x.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        keep = flat[i]
        flat[i] = keep + eps
        up = f(x)
        flat[i] = keep - eps
        down = f(x)
        flat[i] = keep
        g[i] = (up - down) / (2 * eps)
    return grad


def check(name: str, analytic: np.ndarray, numeric: np.ndarray, rtol: float) -> float:
    """Relative error ||analytic - numeric|| / ||numeric||, printed and asserted below rtol."""
    a = np.asarray(analytic, np.float64)
    n = np.asarray(numeric, np.float64)
    den = np.linalg.norm(n)
    err = float(np.linalg.norm(a - n) / den) if den > 0 else float(np.linalg.norm(a - n))
    print(f"gradcheck {name}: relative error {err:.2e}")
    assert err <= rtol, f"gradient of {name}: relative error {err:.3e} exceeds {rtol:.1e}"
    return err
