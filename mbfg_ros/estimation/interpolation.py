"""The state at a sample's own time, between two keyframes.

With s = (t - t0) / h in [0, 1] between keyframes x0 (at t0) and x1 (at t0 + h):

    q(t) = h00 q0 + h10 h v0 + h01 q1 + h11 h v1      (cubic Hermite on q and v)
    v(t) = h00 v0 + h10 h a0 + h01 v1 + h11 h a1      (cubic Hermite on v and a)
    a(t), lam(t), u(t), b(t), s(t), mu(t): linear

Everything is linear in (x0, x1): z = [q(t), v(t), a(t), lam(t), ...] = A0 x0 + A1 x1, so a
sensor's Jacobian w.r.t. the keyframes is its Jacobian w.r.t. z times A0 and A1. The matrices
depend only on s (sensor rates are usually multiples of the keyframe rate, so s repeats) and are
cached per layout.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mbfg_ros.estimation.layout import StateLayout


@dataclass(frozen=True)
class Interpolant:
    s: float
    h: float
    h00: float
    h10: float
    h01: float
    h11: float

    @staticmethod
    def at(s: float, h: float) -> "Interpolant":
        s2, s3 = s * s, s * s * s
        return Interpolant(s, h, 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2)

    def matrices(self, lay: StateLayout) -> tuple[np.ndarray, np.ndarray]:
        """(A0, A1) with z = A0 x0 + A1 x1 (cached per layout and s; the cache is bounded, since
        jittered stamps give arbitrary s)."""
        cache = _CACHE.setdefault((lay.n, lay.dim), {})
        key = (round(self.s, 12), self.h)
        m = cache.get(key)
        if m is None:
            if len(cache) > 256:
                cache.clear()
            D, n, h = lay.dim, lay.n, self.h
            A0, A1 = np.zeros((D, D)), np.zeros((D, D))
            I = np.eye(n)
            A0[lay.Q, lay.Q], A0[lay.Q, lay.V] = self.h00 * I, self.h10 * h * I
            A1[lay.Q, lay.Q], A1[lay.Q, lay.V] = self.h01 * I, self.h11 * h * I
            A0[lay.V, lay.V], A0[lay.V, lay.A] = self.h00 * I, self.h10 * h * I
            A1[lay.V, lay.V], A1[lay.V, lay.A] = self.h01 * I, self.h11 * h * I
            tail = np.arange(2 * n, D)
            A0[tail, tail] = 1.0 - self.s
            A1[tail, tail] = self.s
            m = cache[key] = (A0, A1)
        return m

    def interpolate(self, lay: StateLayout, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
        """z = [q(t), v(t), a(t), lam(t), u(t), b(t), s(t), mu(t)] at the sample time."""
        A0, A1 = self.matrices(lay)
        return A0 @ x0 + A1 @ x1


_CACHE: dict[tuple[int, int], dict] = {}
