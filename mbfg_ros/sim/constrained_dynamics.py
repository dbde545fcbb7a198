"""The constrained equations of motion, evaluated lean for the simulator's integrator.

Same physics as :meth:`Mechanism.forward_dynamics` (pinocchio's CRBA and RNEA, the model's
closure rows, friction and springs), but without any derivative: the mass matrix M(q), the bias
h(q, v) (Coriolis, centrifugal, gravity), the closure rows Phi(q), their Jacobian Phi_q and the
acceleration bias gamma = (Phi_q)' v (the closure rows' second time derivative at zero
acceleration, from pinocchio's second-order kinematics at a = 0). The constrained accelerations
solve

    M a - Phi_q^T lam = f = tau + B u - h - F(v) - o + Q_s(q, v)   (o: offsets, Q_s: springs)
    Phi_q a           = b = -gamma - 2 w Phi' - w^2 Phi           (Baumgarte, w >= 0)

by the multipliers' equation G lam = b - Phi_q M^-1 f with G = Phi_q M^-1 Phi_q^T, solved as
K proximal-point iterations from lam = 0 (the proximal dynamics pinocchio uses; here in closed
form on G's eigenvectors): an eigenvalue g of G gets the weight (1 - (mu / (g + mu))^K) / g
instead of 1 / g, with mu = :data:`PROXIMAL_MU` times the largest eigenvalue. Where the closure
rows are independent and well conditioned (g >> mu) this is the exact solution (the weight's
error (mu / g)^K is below round-off); exactly redundant rows (g below :data:`REDUNDANT` times the
largest) get no multiplier, so lam is the minimum-norm one; and where the closure Jacobian loses
rank during the motion (a singular position: two motion branches meet, e.g. a parallelogram
passing its horizontal position) the row that vanishes is enforced less and less instead of
with a multiplier growing like 1 / g, so the accelerations stay bounded and well defined. In the
exact equations a drift of the state off the motion's branch grows like 1 / distance^2 when the
singular position is approached (the other branch crosses there); the proximal weight stops
that growth at g ~ mu, so the state stays on the branch it came on. Units: q rad or m, v rad/s
or m/s, a rad/s^2 or m/s^2, efforts N m or N, ``lam`` the closure multipliers (N or N m per row,
the model's convention). M includes the joints' armature (pinocchio's CRBA adds
``model.armature``); ``o`` are the joints' constant effort offsets.

The projections onto Phi = 0 and Phi_q v = 0 are damped least squares (Levenberg-Marquardt)
steps with the same safeguard (mu = :data:`PROJECTION_MU` times the largest eigenvalue of
Phi_q Phi_q^T), iterated, so that near a singular position a residual along a vanishing row is
not divided by its vanishing singular value (which would throw the state onto the other branch).

This module never uses estimator code.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
from scipy.linalg.lapack import dposv as _posv, dsysv as _sysv

from mbfg_ros.model.closures import ClosureEval, ClosureSet
from mbfg_ros.model.kinematics import LWA, FrameSet
from mbfg_ros.model.mechanism import Mechanism

PROXIMAL_MU = 1e-8
"""Proximal parameter of the multipliers' solve, relative to G's largest eigenvalue: rows whose
eigenvalue is above about 100 times it (a singular-value ratio above about 1e-3) are solved
exactly; at a singular position the vanishing row is relaxed below it (a ratio below about
1e-4: 0.5 mrad of crank angle on the N-four-bar). Measured on the N-four-bar (N = 2, 4; 10 s,
10 passages): 1e-9 to 1e-7 hold the branch within 2e-10 rad with an energy drift of 1e-8 to
8e-8; 1e-10 let the branch drift by 4e-5 rad and 1e-12 switched branch at the third passage."""
PROXIMAL_ITERATIONS = 8
"""K, the proximal-point iterations the closed form stands for."""
PROJECTION_MU = 1e-8
"""Damping of the projections' least-squares steps, relative to the largest eigenvalue of
Phi_q Phi_q^T."""
REDUNDANT = 1e-14
"""Eigenvalues of G (or Phi_q Phi_q^T) below this fraction of the largest are exactly redundant
rows (their multiplier is 0: the minimum-norm one)."""


def proximal_weights(g: np.ndarray, mu: float, iterations: int) -> np.ndarray:
    """(1 - (m / (g + m))^K) / g for the eigenvalues ``g`` (largest last, as eigh orders them),
    m = ``mu`` times the largest: K = ``iterations`` proximal-point iterations of G x = r from
    x = 0 in closed form; 0 where g is below :data:`REDUNDANT` times the largest."""
    g_max = g[-1] if g.size else 0.0
    w = np.zeros_like(g)
    if not g_max > 0.0:
        return w
    keep = g > REDUNDANT * g_max
    gk = g[keep]
    w[keep] = -np.expm1(iterations * np.log1p(-gk / (gk + mu * g_max))) / gk
    return w


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

    # -- dynamics -----------------------------------------------------------------------------
    def accelerations(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray | None = None,
                      u: np.ndarray | None = None,
                      baumgarte: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Accelerations a (n,) and multipliers lam (m,) at (q, v) under known efforts ``tau``
        (n,) and unknown-input efforts ``u`` (n_u,). ``baumgarte`` overrides the instance's.

        The multipliers come from the proximal solve of the module docstring: exact (and the
        minimum-norm ones over redundant rows, as in Mechanism.forward_dynamics) wherever the
        closure rows are not close to losing rank; bounded at a singular position."""
        mech, model, d, n = self.mech, self.model, self.data, self.n
        Mu = pin.crba(model, d, q)                        # upper triangle
        rhs = -pin.nonLinearEffects(model, d, q, v)
        if mech.has_friction:
            rhs -= mech.friction(v)[0]
        if mech.has_offset:
            rhs -= mech.offset
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
        # M^-1 [f, J^T] in one Cholesky solve
        _, x, info = _posv(Mu, np.column_stack([rhs, J.T]), lower=0)
        if info != 0:
            raise np.linalg.LinAlgError(f"the mass matrix is not positive definite (LAPACK info {info})")
        a_free, MinvJT = x[:, 0], x[:, 1:]
        G = J @ MinvJT
        g, U = np.linalg.eigh(0.5 * (G + G.T))
        lam = U @ (proximal_weights(g, PROXIMAL_MU, PROXIMAL_ITERATIONS) * (U.T @ (b - J @ a_free)))
        return a_free + MinvJT @ lam, lam

    # -- projections onto the constraint manifolds ----------------------------------------------
    def _min_norm(self, J: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The damped minimum-norm x with J x = r: J^T (J J^T + mu)^-1 r over the rows that are
        not exactly redundant (mu = PROJECTION_MU times the largest eigenvalue of J J^T)."""
        g, U = np.linalg.eigh(J @ J.T)
        return J.T @ (U @ (proximal_weights(g, PROJECTION_MU, 1) * (U.T @ r)))

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
            for _ in range(3):       # the damped step leaves (mu / g) of a well-conditioned row
                v = v - self._min_norm(c.phi_q, c.phi_q @ v)
        return q, v, res
