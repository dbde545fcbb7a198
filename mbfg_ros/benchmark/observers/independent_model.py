"""The mechanism in its independent coordinates: what the Kalman observers of the paper need.

The independent coordinates are the DOF values z = q[mech.dof] (rad or m, ``g`` of them) and
their rates z' (rad/s or m/s). Everything here goes through the shared model functions:

- position problem: q(z) by :func:`~mbfg_ros.model.assembly.assemble` warm-started at a hint
  (the previous pose, so the assembly branch is kept and 1-3 Newton steps suffice);
- velocity problem: v(q, z') by :func:`~mbfg_ros.model.assembly.solve_velocity`;
- reduced dynamics: z'' = a[dof] with (a, lam) from ``Mechanism.forward_dynamics`` (the closure
  rows hold at acceleration level, so a[dof] is the DOF acceleration of the constrained system);
- sensors: encoders y = q[j] (rad or m) and gyros y = GyroModel.evaluate (rad/s, sensor frame, the
  config's axes), with the observation Jacobian [dh/dz, dh/dz'] from the analytic derivatives:
  dq/dz = R (the velocity-problem matrix) and dv/dz = R_q z' from the differentiated velocity
  constraint Phi_q dv/dz + (Phi_q v)_q R = 0.

The model is the observer's (possibly wrong) Mechanism; one instance per observer (it owns the
Mechanism's scratch data).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbfg_ros.model.assembly import assemble, initial_state, solve_least_squares, solve_velocity
from mbfg_ros.model.mechanism import Mechanism


@dataclass(frozen=True)
class Channel:
    """One sensor as the observers see it.

    kind: encoder | gyro; index: its index in mech.encoders / mech.gyros; rows: how many values
    it contributes (1 for an encoder, the number of measured axes for a gyro); sigma: (rows,)
    noise standard deviations (rad, m or rad/s); angular: (rows,) True where the reading is an
    angle whose difference is taken modulo 2 pi.
    """
    name: str
    kind: str
    index: int
    rows: int
    sigma: np.ndarray
    angular: np.ndarray
    axes: np.ndarray          # gyros: the measured axes (indices into the 3 sensor-frame axes)


@dataclass
class MechanismState:
    """A full state of the multibody model: q, v, a (n,) joint coordinates, rates and
    accelerations, lam (m,) closure multipliers."""
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    lam: np.ndarray


class IndependentModel:
    """Position, velocity and acceleration problems and sensor models in the DOF coordinates."""

    def __init__(self, mech: Mechanism) -> None:
        self.mech = mech
        self.data = mech.create_data()
        self.dof = mech.dof
        self.dep = mech.dependent
        self.g = len(mech.dof)
        self.channels: dict[str, Channel] = {}
        for k, e in enumerate(mech.encoders):
            c = e.config
            self.channels[c.name] = Channel(c.name, "encoder", k, 1, np.array([c.noise]),
                                            np.array([bool(e.angular)]), np.zeros(0, int))
        for k, gm in enumerate(mech.gyros):
            c = gm.config
            r = len(gm.rows)
            self.channels[c.name] = Channel(c.name, "gyro", k, r, np.full(r, c.noise),
                                            np.zeros(r, bool), np.asarray(gm.rows, int))

    # ------------------------------------------------------------------------------------------
    # the position, velocity and acceleration problems
    def initial(self) -> MechanismState:
        """The config's initial state (assembled pose, DOF velocities, accelerations)."""
        q, v = initial_state(self.mech, self.data)
        a, lam = self.mech.forward_dynamics(self.data, q, v)
        return MechanismState(q, v, a, lam)

    def position(self, z: np.ndarray, hint: np.ndarray) -> np.ndarray:
        """q with q[dof] = z and Phi(q) = 0, on the branch of ``hint`` (rad or m)."""
        return assemble(self.mech, self.data, z, hint).q

    def velocity(self, q: np.ndarray, zd: np.ndarray) -> np.ndarray:
        """v with v[dof] = z' and Phi_q v = 0."""
        return solve_velocity(self.mech, self.data, q, zd)

    def dynamics(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a, lam): accelerations and closure multipliers of the constrained equations."""
        return self.mech.forward_dynamics(self.data, q, v)

    def state(self, z: np.ndarray, zd: np.ndarray, hint: np.ndarray) -> MechanismState:
        """The full state of the model at (z, z'), assembled near ``hint``."""
        q = self.position(z, hint)
        v = self.velocity(q, zd)
        a, lam = self.dynamics(q, v)
        return MechanismState(q, v, a, lam)

    def euler(self, s: MechanismState, dt: float) -> tuple[np.ndarray, np.ndarray]:
        """Forward Euler in the independent coordinates (the paper's DEKF/UKF transition, eq. 12):
        z + dt z', z' + dt z''."""
        z, zd, zdd = s.q[self.dof], s.v[self.dof], s.a[self.dof]
        return z + dt * zd, zd + dt * zdd

    def velocity_matrix(self, q: np.ndarray) -> np.ndarray:
        """R (n, g) = dq/dz: v = R z' solves the velocity problem."""
        n, g = self.mech.n, self.g
        R = np.zeros((n, g))
        R[self.dof, np.arange(g)] = 1.0
        if self.mech.m:
            _, J = self.mech.closure_position(self.data, q)
            R[self.dep] = solve_least_squares(J[:, self.dep], -J[:, self.dof])
        return R

    # ------------------------------------------------------------------------------------------
    # sensors
    def observation(self, names: list[str], values: list[np.ndarray]) -> np.ndarray:
        """Stack the readings of ``names`` (as synthesized: encoder (1,), gyro (3,) all axes)
        into the observation vector (the gyros' measured axes only)."""
        out = []
        for name, value in zip(names, values):
            ch = self.channels[name]
            value = np.atleast_1d(np.asarray(value, float))
            out.append(value[ch.axes] if ch.kind == "gyro" else value[:1])
        return np.concatenate(out) if out else np.zeros(0)

    def noise(self, names: list[str]) -> np.ndarray:
        """Covariance (diagonal) of the stacked readings of ``names``."""
        sig = np.concatenate([self.channels[n].sigma for n in names]) if names else np.zeros(0)
        return np.diag(sig * sig)

    def angular_rows(self, names: list[str]) -> np.ndarray:
        return np.concatenate([self.channels[n].angular for n in names]) if names else np.zeros(0, bool)

    def residual(self, names: list[str], observed: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """observed - predicted, angles of angular encoders wrapped into (-pi, pi]."""
        r = np.asarray(observed, float) - np.asarray(predicted, float)
        ang = self.angular_rows(names)
        if ang.any():
            r[ang] = (r[ang] + math.pi) % (2.0 * math.pi) - math.pi
        return r

    def measure(self, names: list[str], q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Predicted readings h(q, v) of ``names`` (no noise, no bias)."""
        out = []
        mech, d = self.mech, self.data
        for name in names:
            ch = self.channels[name]
            if ch.kind == "encoder":
                out.append(np.array([q[mech.encoders[ch.index].index]]))
            else:
                out.append(np.atleast_1d(mech.gyros[ch.index].evaluate(mech, d, q, v, derivatives=False)))
        return np.concatenate(out) if out else np.zeros(0)

    def sensor_jacobians(self, names: list[str], q: np.ndarray, v: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(h, h_q, h_v): predicted readings and their Jacobians (rows, n) with respect to the
        joint coordinates and rates (for filters in dependent coordinates)."""
        mech, d, n = self.mech, self.data, self.mech.n
        hs, Hq, Hv = [], [], []
        for name in names:
            ch = self.channels[name]
            if ch.kind == "encoder":
                j = mech.encoders[ch.index].index
                row = np.zeros((1, n))
                row[0, j] = 1.0
                hs.append(np.array([q[j]]))
                Hq.append(row)
                Hv.append(np.zeros((1, n)))
            else:
                y, y_q, y_v = mech.gyros[ch.index].evaluate(mech, d, q, v)
                hs.append(np.atleast_1d(y))
                Hq.append(np.atleast_2d(y_q))
                Hv.append(np.atleast_2d(y_v))
        if not hs:
            return np.zeros(0), np.zeros((0, n)), np.zeros((0, n))
        return np.concatenate(hs), np.vstack(Hq), np.vstack(Hv)

    def measure_jacobian(self, names: list[str], q: np.ndarray, v: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
        """(h, H): predicted readings and H = [dh/dz, dh/dz'] (rows, 2 g) at a consistent (q, v)."""
        h, Hq, Hv = self.sensor_jacobians(names, q, v)
        R = self.velocity_matrix(q)
        Hz = Hq @ R
        if np.any(Hv):
            Hz = Hz + Hv @ self._velocity_derivative(q, v, R)
        return h, np.hstack([Hz, Hv @ R])

    def _velocity_derivative(self, q: np.ndarray, v: np.ndarray, R: np.ndarray) -> np.ndarray:
        """dv/dz (n, g) at fixed z': v[dof] = z' does not move; the dependent rates follow
        from differentiating Phi_q(q) v = 0 along q = q(z)."""
        n, g = self.mech.n, self.g
        Rv = np.zeros((n, g))
        if self.mech.m:
            c = self.mech.closures(self.data, q, v)
            Rv[self.dep] = solve_least_squares(c.phi_q[:, self.dep], -(c.phid_q @ R))
        return Rv
