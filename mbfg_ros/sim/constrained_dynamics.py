"""The constrained equations of motion, evaluated lean for the simulator's integrator.

Same physics as :meth:`Mechanism.forward_dynamics` (pinocchio's CRBA and RNEA, the model's
closure rows, friction and springs), but without any derivative: the mass matrix M(q), the bias
h(q, v) (Coriolis, centrifugal, gravity), the closure rows Phi(q), their Jacobian Phi_q and the
acceleration bias gamma = (Phi_q)' v (the closure rows' second time derivative at zero
acceleration, from pinocchio's second-order kinematics at a = 0). The KKT system

    [M       -Phi_q^T] [a  ]   [tau + B u - h - F(v) + Q_s (the springs)     ]
    [Phi_q    0      ] [lam] = [-gamma - 2 w Phi' - w^2 Phi  (Baumgarte, w >= 0)]

is solved in the least-squares sense (rank-revealing, so redundant closure rows are fine), as
the model does. Units: q rad or m, v rad/s or m/s, a rad/s^2 or m/s^2, efforts N m or N,
``lam`` the closure multipliers (N or N m per row, the model's convention).

This module never uses estimator code.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import scipy.linalg
from scipy.linalg.lapack import dposv as _posv, dsysv as _sysv

from mbfg_ros.model.closures import ClosureEval, ClosureSet
from mbfg_ros.model.kinematics import LWA, FrameSet
from mbfg_ros.model.mechanism import Mechanism


class _ValueFrameSet(FrameSet):
    """A FrameSet that fills only the values the closure rows need (no derivatives): origins,
    rotations and Jacobians at position level, frame velocities, and the classical (linear)
    and angular accelerations. The derivative arrays stay zero and must not be used."""

    def hessians(self, q: np.ndarray) -> None:        # noqa: D102 - deliberately nothing
        return None

    def velocity(self, v: np.ndarray) -> None:
        np.matmul(self.JL, v, out=self.VL)
        if self._angular:
            np.matmul(self.JA, v, out=self.W)

    def acceleration(self, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> None:
        m, d = self.model, self.data
        pin.forwardKinematics(m, d, q, v, a)
        for i, fid in enumerate(self.fids):
            self.ACC[i] = pin.getFrameClassicalAcceleration(m, d, fid, LWA).linear
            if self._angular:
                self.ALPHA[i] = pin.getFrameAcceleration(m, d, fid, LWA).angular


class ConstrainedDynamics:
    """Forward dynamics of one Mechanism without derivatives (one instance per thread).

    When every closure row is a constant direction times a point difference (points, planar
    pins, the translation rows of revolute and weld closures) the rows are evaluated directly
    from pinocchio's frame placements, Jacobians and classical accelerations; other closure
    kinds go through the model's ClosureSet with a derivative-free FrameSet.
    """

    def __init__(self, mech: Mechanism, baumgarte: float = 0.0) -> None:
        """``baumgarte``: the stabilisation rate w (1/s) of the closure rows; 0 disables it."""
        self.mech = mech
        self.model = mech.model
        self.data = mech.model.createData()
        self.n, self.m = mech.n, mech.m
        self.baumgarte = float(baumgarte)
        self._zero = np.zeros(self.n)
        self._rows: np.ndarray | None = None     # independent closure rows (set on first use)
        self._cache = None                       # (q, position-level rows) of the last fast eval
        if self.m:
            cs = mech.closure_set
            self._fast = not cs.general
            self._fids = list(mech.closure_frame_ids)
            if self._fast:
                order = np.argsort(cs.cd_rows)
                self._C = cs.C[order]
                self._offset = cs.cd_offset[order]
            else:
                self._frames = _ValueFrameSet(mech.model, self.data, mech.closure_frame_ids,
                                              angular=cs.need_angular)
                self._closure_set = ClosureSet(mech.groups, mech.m, len(mech.closure_frame_ids),
                                               mech.n)

    # -- closure rows -------------------------------------------------------------------------
    def closure_rows(self, q: np.ndarray, v: np.ndarray | None = None) -> ClosureEval:
        """Phi, Phi_q (and with v: Phi' and gamma = Phi'' at a = 0, in ``phidd``).

        Only the value fields ``phi``, ``phi_q``, ``phid``, ``phidd`` are valid."""
        if not self._fast:
            fs = self._frames
            fs.position(q)
            if v is None:
                return self._closure_set.evaluate(fs, 0, None)
            fs.velocity(v)
            fs.acceleration(q, v, self._zero)
            return self._closure_set.evaluate(fs, 2, None)
        model, d, C = self.model, self.data, self._C
        cached = self._cache
        if cached is not None and v is not None and np.array_equal(cached[0], q):
            e = ClosureEval(cached[1].phi, cached[1].phi_q)   # Phi, Phi_q depend on q only
        else:
            pin.computeJointJacobians(model, d, q)
            pin.updateFramePlacements(model, d)
            P = np.concatenate([d.oMf[f].translation for f in self._fids])
            J = np.concatenate([pin.getFrameJacobian(model, d, f, LWA)[:3] for f in self._fids])
            e = ClosureEval(C @ P - self._offset, C @ J)
            self._cache = (np.array(q, float), e)
        if v is not None:
            pin.forwardKinematics(model, d, q, v, self._zero)
            acc = np.concatenate([pin.getFrameClassicalAcceleration(model, d, f, LWA).linear
                                  for f in self._fids])
            e.phid = e.phi_q @ v
            e.phidd = C @ acc
        return e

    def closure_residual(self, q: np.ndarray) -> float:
        """max |Phi(q)| (m or rad); 0 for open chains."""
        if not self.m:
            return 0.0
        return float(np.max(np.abs(self.closure_rows(q).phi)))

    def _independent_rows(self, phi_q: np.ndarray) -> np.ndarray:
        """Indices of a maximal set of independent closure rows (fixed on first use)."""
        if self._rows is None:
            s = np.linalg.svd(phi_q, compute_uv=False)
            r = int(np.sum(s > 1e-9 * max(s[0], 1e-300))) if s.size else 0
            if r == self.m:
                self._rows = np.arange(self.m)
            else:
                _, _, piv = scipy.linalg.qr(phi_q.T, pivoting=True, mode="economic")
                self._rows = np.sort(piv[:r])
        return self._rows

    # -- dynamics -----------------------------------------------------------------------------
    def accelerations(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray | None = None,
                      u: np.ndarray | None = None,
                      baumgarte: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Accelerations a (n,) and multipliers lam (m,) at (q, v) under known efforts ``tau``
        (n,) and unknown-input efforts ``u`` (n_u,). ``baumgarte`` overrides the instance's.

        Independent closure rows: the symmetric KKT system is solved directly (LAPACK sysv).
        Redundant rows: least squares over all rows, so lam is the minimum-norm multiplier
        vector exactly as in Mechanism.forward_dynamics (a is unique either way)."""
        mech, model, d, n = self.mech, self.model, self.data, self.n
        Mu = pin.crba(model, d, q)                        # upper triangle
        rhs = -pin.nonLinearEffects(model, d, q, v)
        if mech.has_friction:
            rhs -= mech.friction(v)[0]
        if mech.springs:
            rhs += mech.springs.generalized_force(model, d, q, v)
        if tau is not None:
            rhs += tau
        if u is not None and mech.n_u:
            rhs += mech.B @ u
        if not self.m:
            _, _, x, info = _sysv(Mu, rhs, lower=0)
            if info != 0:
                raise np.linalg.LinAlgError(f"singular mass matrix (LAPACK info {info})")
            return x, np.zeros(0)
        c = self.closure_rows(q, v)
        w = self.baumgarte if baumgarte is None else baumgarte
        b = -c.phidd
        if w > 0.0:
            b -= 2.0 * w * c.phid + w * w * c.phi
        J = c.phi_q
        rows = self._independent_rows(J)
        info = 1
        if rows.size == self.m:
            m = self.m
            K = np.zeros((n + m, n + m))
            K[:n, :n] = Mu
            K[:n, n:] = J.T
            _, _, x, info = _sysv(K, np.concatenate([rhs, b]), lower=0)
            if info == 0:
                return x[:n], -x[n:]
        # redundant rows (or a singular system): minimum-norm least squares, as the model does
        M = np.triu(Mu) + np.triu(Mu, 1).T
        m = self.m
        K = np.zeros((n + m, n + m))
        K[:n, :n] = M
        K[:n, n:] = -J.T
        K[n:, :n] = J
        sol = np.linalg.lstsq(K, np.concatenate([rhs, b]), rcond=1e-12)[0]
        return sol[:n], sol[n:]

    # -- projections onto the constraint manifolds ----------------------------------------------
    def _min_norm(self, J: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The minimum-norm x with J x = r (least squares over redundant rows)."""
        rows = self._independent_rows(J)
        if rows.size < self.m:
            J, r = J[rows], r[rows]
        _, x, info = _posv(J @ J.T, r)
        if info != 0:
            return np.linalg.lstsq(J, r, rcond=1e-10)[0]
        return J.T @ x

    def project(self, q: np.ndarray, v: np.ndarray | None, *, tol: float = 1e-13,
                max_iterations: int = 10, velocity: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
        """The nearest (minimum-norm correction) q with Phi(q) = 0 and v with Phi_q v = 0
        (``velocity`` False leaves v alone).

        Returns (q, v, residual) with residual = max |Phi| after projection (m or rad)."""
        if not self.m:
            return q, v, 0.0
        q = np.array(q, float)
        c = self.closure_rows(q)
        res = float(abs(c.phi).max())
        for _ in range(max_iterations):
            if res < tol:
                break
            q_new = q + self._min_norm(c.phi_q, -c.phi)
            c_new = self.closure_rows(q_new)
            new = float(abs(c_new.phi).max())
            if not new < res:         # converged to round-off (or diverging: the caller checks)
                self.closure_rows(q)   # keep the cache at the returned q
                break
            q, c, res = q_new, c_new, new
        if velocity:
            v = v - self._min_norm(c.phi_q, c.phi_q @ v)
        return q, v, res

    def singular_values(self, q: np.ndarray) -> np.ndarray:
        """Singular values of Phi_q at q, largest first (empty for open chains); a value that
        collapses to zero during a run marks a singular configuration."""
        if not self.m:
            return np.zeros(0)
        return np.linalg.svd(self.closure_rows(q).phi_q, compute_uv=False)
