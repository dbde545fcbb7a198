"""Filter tuning of the observer benchmark's toolkit (mbde-matlab, mbeEstimatorFilterBase).

The toolkit's defaults, shared by every filter:

- initial variances (5 deg)^2 on z and on z' (the initial mean is the config's pose);
- transition ("plant") noise given per sqrt(s): (1 deg)^2 on z, (50 deg/s)^2 on z' and
  (100 deg/s^2)^2 on z''.

How they become the Q of a discrete filter on x = [z, z'] (``mapping``):

- ``"paper"`` (default): Q = dt diag((1 deg)^2 I, (50 deg/s)^2 I), i.e. independent white noise
  on every position and velocity (the paper's eq. 14; the toolkit's DEKF, UKF and errorEKF
  (mbeEstimatorIncrManifold) of the paper's time multiply the continuous variances by dt this
  way). The (100 deg/s^2)^2 only enters filters with z'' in their state (not benchmarked here).
- ``"van_loan"``: the toolkit's later revision: x' = F_c x + w with F_c = [[0, I], [0, 0]] and
  Cov(w) = diag((50 deg/s)^2 I, (100 deg/s^2)^2 I) discretised over dt with Van Loan's method,
  Q = [[q1 dt + q2 dt^3/3, q2 dt^2/2], [q2 dt^2/2, q2 dt]] per DOF. It puts (3.5 deg)^2 of
  position noise on every 5 ms step, so a filter fed by gyros alone loses the position (we
  measured DEKF, UKF and errorEKF diverging on the four-bar with its coupler gyro at +1 m/s^2):
  kept for comparison only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

DEG = math.pi / 180.0
MAPPINGS = ("paper", "van_loan")


@dataclass(frozen=True)
class FilterTuning:
    """Standard deviations (SI: rad, rad/s, rad/s^2; per sqrt(s) for the transition noise)."""
    initial_position: float = 5.0 * DEG
    initial_velocity: float = 5.0 * DEG
    transition_position: float = 1.0 * DEG
    transition_velocity: float = 50.0 * DEG
    transition_acceleration: float = 100.0 * DEG
    mapping: str = "paper"

    def __post_init__(self) -> None:
        if self.mapping not in MAPPINGS:
            raise ValueError(f"unknown transition-noise mapping {self.mapping!r} (known: {', '.join(MAPPINGS)})")

    def initial_covariance(self, g: int) -> np.ndarray:
        """P0 (2g, 2g) of x = [z, z']."""
        return np.diag([self.initial_position ** 2] * g + [self.initial_velocity ** 2] * g)

    def process_noise(self, g: int, dt: float) -> np.ndarray:
        """Q (2g, 2g) of one step of ``dt`` seconds (see the module docstring)."""
        if self.mapping == "paper":
            return dt * np.diag([self.transition_position ** 2] * g + [self.transition_velocity ** 2] * g)
        I, O = np.eye(g), np.zeros((g, g))
        Fc = np.block([[O, I], [O, O]])
        Qc = np.diag([self.transition_velocity ** 2] * g + [self.transition_acceleration ** 2] * g)
        L = 2 * g
        M = dt * np.block([[-Fc, Qc], [np.zeros((L, L)), Fc.T]])
        N = scipy.linalg.expm(M)
        Q = N[L:, L:].T @ N[:L, L:]
        return 0.5 * (Q + Q.T)


def linear_filter_matrices(tuning: "FilterTuning | None", g: int, dt: float):
    """(F, Q, P0) of a discrete EKF on x = [z, z'] with ``g`` coordinates, steps of ``dt`` s and
    ``tuning`` (the toolkit's defaults when None)."""
    tuning = tuning or FilterTuning()
    return transition_matrix(g, dt), tuning.process_noise(g, dt), tuning.initial_covariance(g)


def transition_matrix(g: int, dt: float) -> np.ndarray:
    """F = [[I, dt I], [0, I]]: the Jacobian of the Euler transition the paper uses (eq. 13)."""
    I, O = np.eye(g), np.zeros((g, g))
    return np.block([[I, dt * I], [O, I]])
