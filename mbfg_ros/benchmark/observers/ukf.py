"""UKF: the unscented Kalman filter on the independent coordinates (paper sec. 3.1.3).

Built on filterpy's maintained :class:`filterpy.kalman.UnscentedKalmanFilter` with
:class:`filterpy.kalman.MerweScaledSigmaPoints` (2L + 1 points, L = 2 g) and the toolkit's
sigma-point parameters alpha = 1e-3, beta = 2, kappa = 0 (mbeUtils.sigma_sampling_*):

- transition of each sigma point: assemble the model at its (z, z') (warm start at the
  previous posterior pose), solve its accelerations, forward Euler over dt (the paper's
  transition, identical to the DEKF's); the predicted covariance adds the Van Loan Q;
- observation of each sigma point: assemble it and evaluate the sensor models;
- after each step the full state is recovered from the posterior mean.

One difference from the toolkit: filterpy redraws the sigma points from the predicted mean and
covariance (including Q) before the update, where the toolkit reuses the propagated points;
filterpy's is the textbook additive-noise UKF. Readings of angular encoders are compared modulo
2 pi (filterpy's ``residual_z``).
"""
from __future__ import annotations

import numpy as np
from filterpy.kalman import MerweScaledSigmaPoints, UnscentedKalmanFilter

from mbfg_ros.benchmark.observers.independent_model import IndependentModel, MechanismState
from mbfg_ros.benchmark.observers.tuning import FilterTuning

ALPHA, BETA, KAPPA = 1e-3, 2.0, 0.0
"""The toolkit's sigma-point parameters."""


class UKF:
    """Unscented Kalman filter with Euler transition in the DOF coordinates (filterpy)."""
    name = "UKF"

    def __init__(self, model: IndependentModel, dt: float, tuning: FilterTuning | None = None) -> None:
        self.model = model
        self.dt = dt
        tuning = tuning or FilterTuning()
        g = model.g
        L = 2 * g
        points = MerweScaledSigmaPoints(L, alpha=ALPHA, beta=BETA, kappa=KAPPA)
        dim_z = max(1, sum(ch.rows for ch in model.channels.values()))
        self.ukf = UnscentedKalmanFilter(dim_x=L, dim_z=dim_z, dt=dt, hx=self._hx, fx=self._fx,
                                         points=points)
        self.s = model.initial()
        d = model.dof
        self.ukf.x = np.concatenate([self.s.q[d], self.s.v[d]])
        self.ukf.P = tuning.initial_covariance(g)
        self.ukf.Q = tuning.process_noise(g, dt)
        # filterpy updates from the sigma points of its last predict: the prior's, at step 0
        self.ukf.sigmas_f = points.sigma_points(self.ukf.x, self.ukf.P)
        self._names: list[str] = []
        self._stale = False
        self.ukf.residual_z = self._residual

    # filterpy callbacks ---------------------------------------------------------------------
    def _fx(self, x: np.ndarray, dt: float) -> np.ndarray:
        g = self.model.g
        s = self.model.state(x[:g], x[g:], self.s.q)
        z, zd = self.model.euler(s, dt)
        return np.concatenate([z, zd])

    def _hx(self, x: np.ndarray, names: list[str]) -> np.ndarray:
        g, m = self.model.g, self.model
        q = m.position(x[:g], self.s.q)
        return m.measure(names, q, m.velocity(q, x[g:]))

    def _residual(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.model.residual(self._names, a, b)

    # observer interface ---------------------------------------------------------------------
    def predict(self) -> None:
        self.ukf.predict()
        self._stale = True

    def update(self, names: list[str], values: list[np.ndarray]) -> None:
        m = self.model
        self._names = list(names)
        self.ukf.update(m.observation(names, values), R=m.noise(names), names=self._names)
        self._stale = True

    def output(self) -> MechanismState:
        """The full state at the posterior mean (solved once per step, when asked)."""
        if self._stale:
            self.ukf.P = 0.5 * (self.ukf.P + self.ukf.P.T)
            g, x = self.model.g, self.ukf.x
            self.s = self.model.state(x[:g], x[g:], self.s.q)
            self._stale = False
        return self.s
