"""The step function over many keyframes at once, for the offline smoother.

- :class:`MappedSteps`: the compiled step function evaluated over a block of keyframes in one
  call (``casadi.Function.map``) from numeric arrays, its outputs written in place;
- :class:`ClosureProjection`: keyframe states put back on the loop closures after a
  Gauss-Newton step (the closure rows are stiff), by minimum-norm Newton corrections evaluated
  for every keyframe by one mapped call per iteration.
No ROS.
"""
from __future__ import annotations

import casadi as ca
import numpy as np

from mbfg_ros.estimation.mapped_function import mapped_function
from mbfg_ros.estimation.step_function import StepFunction

MAP_BLOCK = 32
"""Keyframes per call of the mapped step function (see :func:`.mapped_function.mapped_function`)."""


class MappedSteps:
    """The step function evaluated over a block of keyframes in one call (``Function.map``).

    Inputs are (B, D), (B, D), (B, P) arrays; outputs r (B, R) and Jt (B, 2D, R) (row i of Jt
    holds J0 then J1 transposed, as :class:`~.step_function.CompiledRows` stores them)."""

    def __init__(self, fn: StepFunction, block: int = MAP_BLOCK, threads: int = 1) -> None:
        rows = fn.step
        base = rows.compiled or rows.fn
        self.B, self.D, self.R, self.P = block, rows.dim, rows.R, rows.p.size
        mapped = mapped_function(base, block, threads)
        self.x0 = np.zeros((block, self.D))
        self.x1 = np.zeros((block, self.D))
        self.p = np.zeros((block, self.P))
        self.r = np.zeros((block, self.R))
        self.Jt = np.zeros((block, 2 * self.D, self.R))
        self._extra = [np.zeros(max(1, int(mapped.numel_out(i)))) for i in range(2, mapped.n_out())]
        self._buf, self._eval = mapped.buffer()
        self._bind_scratch()
        for i, a in enumerate(self._extra, start=2):
            self._buf.set_res(i, memoryview(a))

    def evaluate(self, X0: np.ndarray, X1: np.ndarray, P: np.ndarray, r_out: np.ndarray,
                 Jt_out: np.ndarray) -> None:
        """Rows of N steps into r_out (N, R) and Jt_out (N, 2D, R) (all C-contiguous float64:
        full blocks are evaluated in place, without copies)."""
        N, B = X0.shape[0], self.B
        buf = self._buf
        arrays = (X0, X1, P, r_out, Jt_out)
        direct = all(a.flags.c_contiguous and a.dtype == np.float64 for a in arrays)
        for s in range(0, N, B):
            e = min(N, s + B)
            c = e - s
            if direct and c == B:
                for i, a in enumerate((X0, X1, P)):
                    buf.set_arg(i, memoryview(a[s:e]))
                buf.set_res(0, memoryview(r_out[s:e]))
                buf.set_res(1, memoryview(Jt_out[s:e]))
                self._eval()
                continue
            self._load(X0, X1, P, s, e)
            self._bind_scratch()
            self._eval()
            r_out[s:e] = self.r[:c]
            Jt_out[s:e] = self.Jt[:c]

    def _bind_scratch(self) -> None:
        """The mapped function reads the scratch block and writes its rows and Jacobians."""
        buf = self._buf
        for i, a in enumerate((self.x0, self.x1, self.p)):
            buf.set_arg(i, memoryview(a))
        buf.set_res(0, memoryview(self.r))
        buf.set_res(1, memoryview(self.Jt))

    def _load(self, X0: np.ndarray, X1: np.ndarray, P: np.ndarray, s: int, e: int) -> None:
        """Steps s..e-1 into the scratch block, padded with the last step (results ignored)."""
        c = e - s
        self.x0[:c], self.x1[:c], self.p[:c] = X0[s:e], X1[s:e], P[s:e]
        if c < self.B:
            self.x0[c:], self.x1[c:], self.p[c:] = X0[e - 1], X1[e - 1], P[e - 1]

    def residuals(self, X0: np.ndarray, X1: np.ndarray, P: np.ndarray, r_out: np.ndarray) -> None:
        """Only the rows r_out (N, R) of N steps (the Jacobians go to a scratch block)."""
        N, B = X0.shape[0], self.B
        self._bind_scratch()
        for s in range(0, N, B):
            e = min(N, s + B)
            self._load(X0, X1, P, s, e)
            self._eval()
            r_out[s:e] = self.r[:e - s]


PROJECTION_TOLERANCE = 1e-12
"""m, rad (and per s, per s^2): closure residuals below this need no further Newton step."""


class ClosureProjection:
    """Puts keyframe states back on the loop closures (a retraction after each Gauss-Newton
    step: the closure rows are stiff, sigma 1e-6, so a step along their tangent leaves a
    second-order residual of thousands of sigmas). Per keyframe, minimum-norm Newton corrections
    q -= Phi_q^+ Phi, v -= Phi_q^+ Phi', a -= Phi_q^+ Phi''; evaluated for all keyframes by one
    mapped CasADi call per iteration."""

    def __init__(self, fn: StepFunction, block: int = 8 * MAP_BLOCK) -> None:
        sym, n = fn.sym, fn.mech.n
        q, v, a = ca.SX.sym("q", n), ca.SX.sym("v", n), ca.SX.sym("a", n)
        phi, phid, phidd = sym.closure_levels(q, v, a)
        f = ca.Function("closure_projection", [q, v, a],
                        [ca.vertcat(phi, phid, phidd), ca.densify(ca.jacobian(phi, q))], {"cse": True})
        self.n, self.m, self.B = n, fn.mech.m, block
        self.mapped = mapped_function(f, block)
        self.q, self.v, self.a = (np.zeros((block, n)) for _ in range(3))
        self.c = np.zeros((block, 3 * self.m))
        self.Jt = np.zeros((block, n, self.m))          # (m, n) column-major = C-order (n, m)
        self._buf, self._eval = self.mapped.buffer()
        for i, arr in enumerate((self.q, self.v, self.a)):
            self._buf.set_arg(i, memoryview(arr))
        for i, arr in enumerate((self.c, self.Jt)):
            self._buf.set_res(i, memoryview(arr))

    def __call__(self, X: np.ndarray, iterations: int = 3) -> None:
        """Project the states X (K, D) in place."""
        n, m, B = self.n, self.m, self.B
        if not m:
            return
        for s in range(0, X.shape[0], B):
            e = min(X.shape[0], s + B)
            c = e - s
            for _ in range(iterations):
                self.q[:c], self.v[:c], self.a[:c] = X[s:e, :n], X[s:e, n:2 * n], X[s:e, 2 * n:3 * n]
                self._eval()
                if not np.abs(self.c[:c]).max() > PROJECTION_TOLERANCE:
                    break                                       # (already on the closures)
                Jt = self.Jt[:c]                               # Phi_q^T (c, n, m)
                G = Jt.transpose(0, 2, 1) @ Jt                  # Phi_q Phi_q^T (c, m, m)
                rhs = self.c[:c].reshape(c, 3, m).transpose(0, 2, 1)   # (c, m, 3)
                # minimum-norm: Phi_q^T (Phi_q Phi_q^T)^-1 [Phi Phi' Phi'']; near a singular pose
                # (cond(Phi_q) > 1e10) the pseudo-inverse, which leaves the lost direction alone
                # (not finite: no correction; the cost tells the solver)
                fin = np.isfinite(G).all(axis=(1, 2)) & np.isfinite(rhs).all(axis=(1, 2))
                w = np.ones((c, m))
                w[fin] = np.linalg.eigvalsh(G[fin])
                bad = fin & ~(w[:, 0] > 1e-20 * w[:, -1])
                corr = np.zeros((c, n, 3))
                if bad.any():
                    corr[bad] = np.linalg.pinv(Jt[bad].transpose(0, 2, 1), rcond=1e-10) @ rhs[bad]
                good = fin & ~bad
                corr[good] = Jt[good] @ np.linalg.solve(G[good], rhs[good])
                X[s:e, :n] -= corr[:, :, 0]
                X[s:e, n:2 * n] -= corr[:, :, 1]
                X[s:e, 2 * n:3 * n] -= corr[:, :, 2]
