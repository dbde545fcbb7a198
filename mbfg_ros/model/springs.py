"""Linear spring-dampers between two frames: the config's ``springs:`` force elements.

A spring joins the origins of ``frame_a`` and ``frame_b`` (on two different bodies). With
d = p_B - p_A (base frame), its length L = |d|, its unit direction e = d / L and its rate
L' = e . (v_B - v_A) (the origins' velocities), it pulls the origins together with the tension

    F = k (L - L0) + c L'            (N; k stiffness N/m, L0 rest length m, c damping N s/m)

applied as -F e on frame B's body at p_B and +F e on frame A's body at p_A. Its generalised
force is Q = -F L_q^T with L_q = e^T (J_B - J_A) (the origins' LOCAL_WORLD_ALIGNED linear
Jacobians, pinocchio), its potential energy k (L - L0)^2 / 2. The equations of motion carry it
like any applied effort: M a + h + F(v) - tau - B u - Q - Phi_q^T lam = 0.

Exact derivatives (for the model's inverse dynamics), from pinocchio's frame Jacobians and their
q-derivatives (:class:`~mbfg_ros.model.kinematics.FrameSet`):

    L_qq  = (J^T (I - e e^T) J) / L + sum_c e_c H_c          (J = J_B - J_A, H_c = d J_c / dq)
    L'_q  = e^T (dJ v / dq) + (J v)^T (I - e e^T) J / L,      L'_v = L_q
    Q_q   = -(L_q^T (k L_q + c L'_q) + F L_qq),               Q_v = -c L_q^T L_q

The length must stay positive (the direction of a spring of zero length is undefined).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from mbfg_ros.model.config import SpringConfig
from mbfg_ros.model.kinematics import LWA, FrameSet


@dataclass(frozen=True)
class SpringModel:
    """One compiled spring: its config and the pinocchio frame ids of its two ends."""
    config: SpringConfig
    frame_a: int
    frame_b: int


@dataclass
class SpringEval:
    """The springs' generalised force Q (n,) and, when asked, its derivatives Q_q, Q_v (n, n)."""
    Q: np.ndarray
    Q_q: np.ndarray | None = None
    Q_v: np.ndarray | None = None


class SpringSet:
    """The springs of one mechanism (immutable; the per-thread scratch is a FrameSet or a
    pin.Data passed in). Falsy when the mechanism has none."""

    def __init__(self, springs: list[SpringModel], n: int) -> None:
        self.springs = list(springs)
        self.n = n
        self.frame_ids = sorted({f for s in springs for f in (s.frame_a, s.frame_b)})
        self._slot = {f: i for i, f in enumerate(self.frame_ids)}

    def __bool__(self) -> bool:
        return bool(self.springs)

    def __len__(self) -> int:
        return len(self.springs)

    @property
    def damped(self) -> bool:
        """Whether some spring has damping (it dissipates energy)."""
        return any(s.config.damping > 0.0 for s in self.springs)

    def frame_set(self, model: pin.Model, data: pin.Data) -> FrameSet:
        """Scratch for :meth:`evaluate` (one per thread)."""
        return FrameSet(model, data, self.frame_ids, angular=False)

    # -- values only (the simulator) ----------------------------------------------------------
    def _ends(self, model: pin.Model, data: pin.Data, s: SpringModel):
        """(d, J) of one spring: p_B - p_A and J_B - J_A (linear rows), from data's placements
        and joint Jacobians (pin.computeJointJacobians and updateFramePlacements done)."""
        d = data.oMf[s.frame_b].translation - data.oMf[s.frame_a].translation
        J = (pin.getFrameJacobian(model, data, s.frame_b, LWA).reshape(6, self.n)[:3]
             - pin.getFrameJacobian(model, data, s.frame_a, LWA).reshape(6, self.n)[:3])
        return d, J

    def tension(self, L: float, Ldot: float, s: SpringModel) -> float:
        """F = k (L - L0) + c L' (N)."""
        c = s.config
        return c.stiffness * (L - c.rest_length) + c.damping * Ldot

    def generalized_force(self, model: pin.Model, data: pin.Data, q: np.ndarray,
                          v: np.ndarray) -> np.ndarray:
        """Q (n,) at (q, v), without derivatives (N m or N per coordinate). Uses ``data``."""
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        Q = np.zeros(self.n)
        for s in self.springs:
            d, J = self._ends(model, data, s)
            L = float(np.sqrt(d @ d))
            Lq = (d / L) @ J
            Q -= self.tension(L, float(Lq @ v), s) * Lq
        return Q

    def dissipation(self, model: pin.Model, data: pin.Data, q: np.ndarray, v: np.ndarray) -> float:
        """The power the dampers dissipate, sum c L'^2 (W), at (q, v). Uses ``data``."""
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        power = 0.0
        for s in self.springs:
            if s.config.damping > 0.0:
                d, J = self._ends(model, data, s)
                power += s.config.damping * float((d @ (J @ v)) / np.sqrt(d @ d)) ** 2
        return power

    def lengths(self, model: pin.Model, data: pin.Data, q: np.ndarray) -> np.ndarray:
        """Every spring's length L (m) at q. Uses ``data``."""
        pin.framesForwardKinematics(model, data, q)
        return np.array([np.linalg.norm(data.oMf[s.frame_b].translation - data.oMf[s.frame_a].translation)
                         for s in self.springs])

    def potential_energy(self, model: pin.Model, data: pin.Data, q: np.ndarray) -> float:
        """sum k (L - L0)^2 / 2 (J) at q. Uses ``data``."""
        L = self.lengths(model, data, q)
        return float(sum(0.5 * s.config.stiffness * (Li - s.config.rest_length) ** 2
                         for s, Li in zip(self.springs, L)))

    def end_forces(self, model: pin.Model, data: pin.Data, q: np.ndarray,
                   v: np.ndarray) -> list[tuple[SpringModel, np.ndarray]]:
        """Every spring's force on frame B's body at p_B (base frame, N): -F e; frame A's body
        receives the opposite at p_A. Uses ``data`` (placements and Jacobians at q)."""
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        out = []
        for s in self.springs:
            d, J = self._ends(model, data, s)
            L = float(np.sqrt(d @ d))
            e = d / L
            out.append((s, -self.tension(L, float(e @ (J @ v)), s) * e))
        return out

    # -- with derivatives (the model) ---------------------------------------------------------
    def evaluate(self, fs: FrameSet, q: np.ndarray, v: np.ndarray,
                 derivatives: bool = True) -> SpringEval:
        """Q and (``derivatives``) its exact Q_q and Q_v at (q, v), from the FrameSet of
        :meth:`frame_set` (evaluated here: position, Hessians, velocity)."""
        n = self.n
        fs.position(q)
        if derivatives:
            fs.hessians(q)
            fs.velocity(v)
        Q = np.zeros(n)
        Q_q = np.zeros((n, n)) if derivatives else None
        Q_v = np.zeros((n, n)) if derivatives else None
        eye = np.eye(3)
        for s in self.springs:
            a, b = self._slot[s.frame_a], self._slot[s.frame_b]
            d = fs.P[b] - fs.P[a]
            J = fs.JL[b] - fs.JL[a]
            L = float(np.sqrt(d @ d))
            e = d / L
            Lq = e @ J
            w = J @ v
            Ldot = float(e @ w)
            k, c = s.config.stiffness, s.config.damping
            F = self.tension(L, Ldot, s)
            Q -= F * Lq
            if not derivatives:
                continue
            P = (eye - np.outer(e, e)) / L                      # d e / d d
            H = fs.HL[b] - fs.HL[a]                             # (3, n, n): d J / dq
            Lqq = J.T @ P @ J + np.tensordot(e, H, axes=(0, 0))
            Ldot_q = e @ (fs.DVL[b] - fs.DVL[a]) + w @ P @ J
            Q_q -= np.outer(Lq, k * Lq + c * Ldot_q) + F * Lqq
            Q_v -= c * np.outer(Lq, Lq)
        return SpringEval(Q, Q_q, Q_v)
