"""Central finite differences for derivative tests."""
from __future__ import annotations

import numpy as np


def jacobian(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """d f / d x by central differences; f returns an array (or float)."""
    x = np.asarray(x, float)
    f0 = np.atleast_1d(np.asarray(f(x), float))
    J = np.zeros((f0.size, x.size))
    for i in range(x.size):
        dx = np.zeros_like(x)
        dx[i] = h
        J[:, i] = (np.atleast_1d(f(x + dx)) - np.atleast_1d(f(x - dx))).ravel() / (2 * h)
    return J


def assert_jacobian(analytic: np.ndarray, numeric: np.ndarray, what: str, rtol: float = 1e-6) -> None:
    analytic = np.atleast_2d(np.asarray(analytic, float)).reshape(numeric.shape)
    scale = max(1.0, float(np.max(np.abs(numeric))))
    err = float(np.max(np.abs(analytic - numeric))) if numeric.size else 0.0
    assert err <= rtol * scale, f"{what}: analytic vs finite differences differ by {err:.3e} (scale {scale:.3g})"
