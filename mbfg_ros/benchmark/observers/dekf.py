"""DEKF: the discrete extended Kalman filter on the independent coordinates (paper sec. 3.1.2).

State x = [z, z'] (the DOF values and rates). As in the paper and the toolkit's
mbeEstimatorDEKF:

- prediction: forward Euler, z + dt z', z' + dt z'' with z'' the reduced dynamics of the
  previous posterior (eq. 12); P = F P F^T + Q with the simplified F = [[I, dt I], [0, I]]
  (eq. 13) and Q from :class:`~mbfg_ros.benchmark.observers.tuning.FilterTuning`;
- update (only at steps with readings): the model is assembled at the predicted x (position,
  velocity, acceleration problems), the sensors' analytic Jacobian H = [dh/dz, dh/dz'] is
  evaluated there, and the standard EKF update (eq. 15) follows;
- after each step the full state is recovered from the posterior x (position, velocity and
  acceleration problems).
"""
from __future__ import annotations

import numpy as np

from mbfg_ros.benchmark.observers.independent_model import IndependentModel, MechanismState
from mbfg_ros.benchmark.observers.tuning import FilterTuning, linear_filter_matrices


class DEKF:
    """Discrete EKF with Euler transition in the DOF coordinates."""
    name = "DEKF"

    def __init__(self, model: IndependentModel, dt: float, tuning: FilterTuning | None = None) -> None:
        self.model = model
        self.dt = dt
        g = model.g
        self.F, self.Q, self.P = linear_filter_matrices(tuning, g, dt)
        self.s = model.initial()
        self.x = self._x(self.s)

    def _x(self, s: MechanismState) -> np.ndarray:
        d = self.model.dof
        return np.concatenate([s.q[d], s.v[d]])

    def predict(self) -> None:
        z, zd = self.model.euler(self.s, self.dt)
        self.x = np.concatenate([z, zd])
        self.P = self.F @ self.P @ self.F.T + self.Q
        self.s = self.model.state(z, zd, self.s.q)

    def update(self, names: list[str], values: list[np.ndarray]) -> None:
        m, g = self.model, self.model.g
        h, H = m.measure_jacobian(names, self.s.q, self.s.v)
        S = H @ self.P @ H.T + m.noise(names)
        K = np.linalg.solve(S, H @ self.P).T          # P H^T S^-1 (S, P symmetric)
        self.x = self.x + K @ m.residual(names, m.observation(names, values), h)
        self.P = (np.eye(2 * g) - K @ H) @ self.P
        self.P = 0.5 * (self.P + self.P.T)
        self.s = m.state(self.x[:g], self.x[g:], self.s.q)

    def output(self) -> MechanismState:
        return self.s
