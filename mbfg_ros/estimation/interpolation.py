"""The state at a sample's own time, between two keyframes.

With s = (t - t0) / h in [0, 1] between keyframes x0 (at t0) and x1 (at t0 + h):

    q(t) = h00 q0 + h10 h v0 + h01 q1 + h11 h v1      (cubic Hermite on q and v)
    v(t) = h00 v0 + h10 h a0 + h01 v1 + h11 h a1      (cubic Hermite on v and a)
    a(t), lam(t), u(t), b(t), s(t), mu(t): linear

Everything is linear in (x0, x1); :class:`Interpolant` holds the scalar weights, so a sensor's
Jacobian w.r.t. the keyframes is its Jacobian w.r.t. the interpolated state times the weights.
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

    def state(self, lay: StateLayout, x0: np.ndarray, x1: np.ndarray):
        """(q, v, a, rest) at the sample time; rest = the linearly interpolated tail of x."""
        h = self.h
        q = self.h00 * x0[lay.Q] + self.h10 * h * x0[lay.V] + self.h01 * x1[lay.Q] + self.h11 * h * x1[lay.V]
        v = self.h00 * x0[lay.V] + self.h10 * h * x0[lay.A] + self.h01 * x1[lay.V] + self.h11 * h * x1[lay.A]
        tail = slice(2 * lay.n, lay.dim)
        rest = (1.0 - self.s) * x0[tail] + self.s * x1[tail]
        return q, v, rest

    def chain(self, lay: StateLayout, Jq: np.ndarray | None, Jv: np.ndarray | None,
              Jrest: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Jacobians w.r.t. (x0, x1) of a function of the interpolated (q, v, rest).

        Jq, Jv: (r, n); Jrest: (r, dim - 2n) over [a, lam, u, b, s, mu]; None means zero.
        """
        rows = next(J.shape[0] for J in (Jq, Jv, Jrest) if J is not None)
        J0 = np.zeros((rows, lay.dim))
        J1 = np.zeros((rows, lay.dim))
        h = self.h
        if Jq is not None:
            J0[:, lay.Q] += self.h00 * Jq
            J0[:, lay.V] += self.h10 * h * Jq
            J1[:, lay.Q] += self.h01 * Jq
            J1[:, lay.V] += self.h11 * h * Jq
        if Jv is not None:
            J0[:, lay.V] += self.h00 * Jv
            J0[:, lay.A] += self.h10 * h * Jv
            J1[:, lay.V] += self.h01 * Jv
            J1[:, lay.A] += self.h11 * h * Jv
        if Jrest is not None:
            tail = slice(2 * lay.n, lay.dim)
            J0[:, tail] += (1.0 - self.s) * Jrest
            J1[:, tail] += self.s * Jrest
        return J0, J1
