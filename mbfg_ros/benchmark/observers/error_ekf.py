"""errorEKF: an error-state EKF running beside a multibody simulation (paper sec. 3.3).

The multibody simulation of the (wrong) model advances on its own; the filter estimates only
the errors dx = [dz, dz'] of its independent coordinates and feeds them back, as in the
toolkit's mbeEstimatorIncrManifold:

- simulation step: the trapezoidal rule on the reduced dynamics (the toolkit's default
  integrator, I3AL, is a trapezoidal rule too): find z''_{k+1} with
  z_{k+1} = z_k + dt z'_k + dt^2/4 (z''_k + z''_{k+1}),  z'_{k+1} = z'_k + dt/2 (z''_k + z''_{k+1}),
  z''_{k+1} = z''(z_{k+1}, z'_{k+1}), by fixed-point iteration from z''_k (converged to 1e-6
  rad/s^2 or at most ``max_iterations``);
- error propagation: the error mean is zero after every feedback (eq. 21);
  P = F P F^T + Q with F = [[I, dt I], [0, I]] (eq. 22) and the toolkit's Van Loan Q;
- update (at steps with readings): innovation o - h(q, v) and Jacobian H at the simulated
  state; the standard EKF update gives dx;
- feedback through the velocity problem: the position increment dq solves Phi_q dq = 0 with
  dq[dof] = dz (so q + dq satisfies the constraints to first order, no position problem), and
  the velocities are v = velocity problem at q + dq with DOF rates z' + dz'. The accelerations
  are the simulation's (not re-solved), as in the toolkit.
"""
from __future__ import annotations

import numpy as np

from mbfg_ros.benchmark.observers.independent_model import IndependentModel, MechanismState
from mbfg_ros.benchmark.observers.tuning import FilterTuning, linear_filter_matrices


class ErrorEKF:
    """Error-state (indirect) EKF on a trapezoidal-rule multibody simulation."""
    name = "errorEKF"

    def __init__(self, model: IndependentModel, dt: float, tuning: FilterTuning | None = None, *,
                 max_iterations: int = 4, tolerance: float = 1e-6) -> None:
        self.model = model
        self.dt = dt
        g = model.g
        self.F, self.Q, self.P = linear_filter_matrices(tuning, g, dt)
        self.s = model.initial()
        self.max_iterations = max_iterations
        self.tolerance = tolerance

    def simulate(self, s: MechanismState) -> MechanismState:
        """One trapezoidal-rule step of the model from ``s``."""
        m, dt, d = self.model, self.dt, self.model.dof
        z, zd, zdd = s.q[d], s.v[d], s.a[d]
        nxt = zdd
        new = s
        for _ in range(self.max_iterations):
            z1 = z + dt * zd + 0.25 * dt * dt * (zdd + nxt)
            zd1 = zd + 0.5 * dt * (zdd + nxt)
            new = m.state(z1, zd1, new.q)
            change = float(np.max(np.abs(new.a[d] - nxt)))
            nxt = new.a[d]
            if change < self.tolerance:
                break
        return new

    def predict(self) -> None:
        self.s = self.simulate(self.s)
        self.P = self.F @ self.P @ self.F.T + self.Q

    def update(self, names: list[str], values: list[np.ndarray]) -> None:
        m, g, s = self.model, self.model.g, self.s
        h, H = m.measure_jacobian(names, s.q, s.v)
        S = H @ self.P @ H.T + m.noise(names)
        K = np.linalg.solve(S, H @ self.P).T
        dx = K @ m.residual(names, m.observation(names, values), h)
        self.P = (np.eye(2 * g) - K @ H) @ self.P
        self.P = 0.5 * (self.P + self.P.T)
        q = s.q + m.velocity(s.q, dx[:g])                # increment through the velocity problem
        v = m.velocity(q, s.v[m.dof] + dx[g:])
        self.s = MechanismState(q, v, s.a, s.lam)

    def output(self) -> MechanismState:
        return self.s
