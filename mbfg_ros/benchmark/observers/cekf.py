"""CEKF: the continuous extended Kalman filter on the independent coordinates (paper sec. 3.1.1).

State x = [z, z'] (the DOF values and rates, rad or m and per s). The filter is the continuous
EKF x' = f(x) + K (o - h(x)), K = P H^T Sigma_S^-1, with f(x) = [z', z''(z, z')] the R-matrix
reduced dynamics of :class:`~mbfg_ros.benchmark.observers.independent_model.IndependentModel`
(eqs. 3-4). As in the paper and the toolkit's mbeEstimatorCEKF (mbde-matlab), one step of ``dt``
from x_n to x_{n+1} is:

- covariance, the continuous Riccati equation P' = A P + P A^T + Q_c - P H^T Sigma_S^-1 H P over
  the step, with A = df/dx (eq. 5) at x_n by forward differences of the reduced dynamics (the
  paper approximates it by eq. 6; we evaluate it) and H = [dh/dz, dh/dz'] at x_n. The toolkit
  takes one explicit Euler step P + dt P'. We take a first-order splitting that agrees with that
  Euler step to O(dt^2) but is symmetric positive definite by construction:
  P <- (I + dt A) P (I + dt A)^T + dt Q_c, then the measurement term solved exactly over the
  step with H held (d(P^-1)/dt = H^T Sigma_S^-1 H): P <- (P^-1 + dt H^T Sigma_S^-1 H)^-1, computed
  as P - P H^T (H P H^T + Sigma_S / dt)^-1 H P in Joseph form. The Euler step goes indefinite
  once dt P H^T Sigma_S^-1 H nears 1 (a large P against a precise sensor; about 0.125 for the
  benchmark's initial P and sensors, so not reached there); this cannot;
- state, the correction fused into the implicit trapezoidal rule (eqs. 7-9): find x_{n+1} with
  g1 = 2/dt (z_{n+1} - z_n) - z'_n - z'_{n+1} + K_z (h(x_{n+1}) - o) = 0,
  g2 = 2/dt (z'_{n+1} - z'_n) - z''_n - z''(x_{n+1}) + K_z' (h(x_{n+1}) - o) = 0
  (eq. 7b divided by Mbar, which changes neither the solution nor the Newton steps), by
  Newton-Raphson from the forward-Euler predictor with the approximate Jacobian of eq. 10,
  [[2/dt I, -I], [-A21, 2/dt I - A22]] + K H, held over the iterations (A of the covariance step,
  K and H at the predictor, as the toolkit holds K). It stops when |g| < ``tolerance`` or after
  ``max_iterations``. As in the toolkit, the rates at x_n in the trapezoid are f(x_n) without the
  previous step's correction, and the output accelerations are the model's z''(x_{n+1}).

Sensor noise: the toolkit uses the sensors' variances Sigma_S (the same ``noise`` of the config as
every other filter) directly as the continuous noise density, so a reading at every 5 ms step
weighs like a discrete reading with variance Sigma_S / dt. Readings at lower rates, as in the
toolkit: the correction term and the measurement term of the Riccati equation act only over the
steps that end at a reading, with the same gain, unscaled by the sampling period; steps between
readings integrate the model alone (innovation zero). Readings at step 0 are not used (no step
ends there). Process noise: the same :class:`~mbfg_ros.benchmark.observers.tuning.FilterTuning` as
the other filters, as the continuous density Q_c whose integral over a step is their Q
(see :func:`continuous_process_noise`).

Known difference from the paper: the toolkit's CEKF used Q_c = diag((50 deg/s)^2, (100 deg/s^2)^2)
(``FilterTuning(mapping="van_loan")`` here), 2500x the position noise the discrete filters get
per step; with the like-for-like default, CEKF loses the four-bar with its coupler gyro even with
a reading every step, where the paper's ran. Measured (10 s, +1 m/s^2, seeds 1-2), position RMSE
with the default / the toolkit's Q_c: four-bar gyro every step FAIL / 0.050 rad (DEKF 0.053),
four-bar encoder every step 0.022 / 0.012 (DEKF 0.0062), five-bar gyro every step 0.072 / 0.050
(DEKF 0.029), five-bar encoder every step 0.090 / 0.027 (DEKF 0.0072).

Divergence: if the position problem fails or the state becomes non-finite, the filter stops and
outputs NaN from that step on (the benchmark counts a non-finite estimate as a failed run);
``info`` says why and where.
"""
from __future__ import annotations

import numpy as np

from mbfg_ros.benchmark.observers.independent_model import IndependentModel, MechanismState
from mbfg_ros.benchmark.observers.tuning import FilterTuning
from mbfg_ros.errors import AssemblyError

DIFFERENCE_STEP = 1e-7
"""Forward-difference step of A = df/dx (rad or m, rad/s or m/s; the position problem is solved
to 1e-13)."""


def continuous_process_noise(tuning: FilterTuning, g: int) -> np.ndarray:
    """Q_c (2g, 2g), per second, on x = [z, z'].

    ``paper`` mapping: diag((1 deg)^2 I, (50 deg/s)^2 I), so that dt Q_c is the Q of the discrete
    filters. ``van_loan``: diag((50 deg/s)^2 I, (100 deg/s^2)^2 I), the toolkit's CEKF's own
    CovPlantNoise (the density the discrete filters' Van Loan Q integrates).
    """
    if tuning.mapping == "paper":
        v = [tuning.transition_position ** 2] * g + [tuning.transition_velocity ** 2] * g
    else:
        v = [tuning.transition_velocity ** 2] * g + [tuning.transition_acceleration ** 2] * g
    return np.diag(v)


class CEKF:
    """Continuous EKF, correction fused into the implicit trapezoidal rule, DOF coordinates."""
    name = "CEKF"

    def __init__(self, model: IndependentModel, dt: float, tuning: FilterTuning | None = None, *,
                 max_iterations: int = 20, tolerance: float = 1e-9) -> None:
        tuning = tuning or FilterTuning()
        self.model = model
        self.dt = dt
        g = model.g
        self.Qc = continuous_process_noise(tuning, g)
        self.P = tuning.initial_covariance(g)
        self.s = model.initial()
        self.max_iterations = max_iterations
        self.tolerance = tolerance
        self._pending = False
        self._names: list[str] = []
        self._values: list[np.ndarray] = []
        self.steps = 0
        self.iterations = 0
        self.unconverged = 0
        self.min_eigenvalue = float(np.min(np.linalg.eigvalsh(self.P)))
        self.failure = ""
        self.failed_step = -1

    # observer interface ---------------------------------------------------------------------
    def predict(self) -> None:
        """Start a step; it is integrated, with this step's readings, when the output is asked."""
        if self._pending:
            self._advance()
        self._pending = True
        self._names, self._values = [], []

    def update(self, names: list[str], values: list[np.ndarray]) -> None:
        if self._pending:
            self._names, self._values = list(names), list(values)

    def output(self) -> MechanismState:
        if self._pending:
            self._advance()
        return self.s

    @property
    def info(self) -> dict:
        """Figures of the run: Newton iterations per step, unconverged steps, the smallest
        eigenvalue P had, and the failure (empty if none) with its step."""
        return {"newton_iterations": self.iterations / max(self.steps, 1),
                "unconverged_steps": self.unconverged, "p_min_eigenvalue": self.min_eigenvalue,
                "failure": self.failure, "failed_step": self.failed_step}

    # one step ------------------------------------------------------------------------------
    def _advance(self) -> None:
        self._pending = False
        self.steps += 1
        if self.failure:
            return
        try:
            with np.errstate(over="ignore", invalid="ignore"):    # caught below as non-finite
                self._step(self._names, self._values)
            if not (np.all(np.isfinite(self.s.q)) and np.all(np.isfinite(self.s.v))
                    and np.all(np.isfinite(self.P))):
                raise FloatingPointError("non-finite state or covariance")
        except (AssemblyError, FloatingPointError, np.linalg.LinAlgError) as exc:
            self.failure = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:200]
            self.failed_step = self.steps
            nan = np.full_like
            self.s = MechanismState(nan(self.s.q, np.nan), nan(self.s.v, np.nan),
                                    nan(self.s.a, np.nan), nan(self.s.lam, np.nan))

    def transition_jacobian(self, s: MechanismState) -> np.ndarray:
        """A = df/dx (2g, 2g) at the consistent state ``s`` (forward differences)."""
        m, g, d, h = self.model, self.model.g, self.model.dof, DIFFERENCE_STEP
        z, zd, zdd = s.q[d], s.v[d], s.a[d]
        A = np.zeros((2 * g, 2 * g))
        A[:g, g:] = np.eye(g)
        for i in range(g):
            e = np.zeros(g)
            e[i] = h
            q = m.position(z + e, s.q)
            A[g:, i] = (m.dynamics(q, m.velocity(q, zd))[0][d] - zdd) / h
            A[g:, g + i] = (m.dynamics(s.q, m.velocity(s.q, zd + e))[0][d] - zdd) / h
        return A

    def _covariance(self, A: np.ndarray, H: np.ndarray | None, noise: np.ndarray | None) -> np.ndarray:
        """P over one step (see the module docstring)."""
        dt, L = self.dt, A.shape[0]
        Phi = np.eye(L) + dt * A
        P = Phi @ self.P @ Phi.T + dt * self.Qc
        if H is not None:
            Rd = noise / dt
            S = H @ P @ H.T + Rd
            K = np.linalg.solve(S, H @ P).T
            IKH = np.eye(L) - K @ H
            P = IKH @ P @ IKH.T + K @ Rd @ K.T
        return 0.5 * (P + P.T)

    def _step(self, names: list[str], values: list[np.ndarray]) -> None:
        m, g, d, dt = self.model, self.model.g, self.model.dof, self.dt
        s = self.s
        z0, zd0, zdd0 = s.q[d].copy(), s.v[d].copy(), s.a[d].copy()
        A = self.transition_jacobian(s)
        observed = m.observation(names, values) if names else None
        noise = m.noise(names) if names else None
        H0 = m.measure_jacobian(names, s.q, s.v)[1] if names else None
        self.P = self._covariance(A, H0, noise)
        self.min_eigenvalue = min(self.min_eigenvalue, float(np.min(np.linalg.eigvalsh(self.P))))

        z1, zd1 = z0 + dt * zd0, zd0 + dt * zdd0            # forward-Euler predictor
        s1 = m.state(z1, zd1, s.q)
        I = np.eye(g)
        J = np.block([[2.0 / dt * I, -I], [-A[g:, :g], 2.0 / dt * I - A[g:, g:]]])
        correction = np.zeros(2 * g)
        if names:
            h1, H1 = m.measure_jacobian(names, s1.q, s1.v)
            K = np.linalg.solve(noise, H1 @ self.P).T          # P H^T Sigma_S^-1 (diagonal, SPD)
            J = J + K @ H1
            correction = K @ -m.residual(names, observed, h1)  # K (h - o)
        for it in range(self.max_iterations + 1):
            r = np.concatenate([2.0 / dt * (z1 - z0) - zd0 - zd1,
                                2.0 / dt * (zd1 - zd0) - zdd0 - s1.a[d]]) + correction
            if not np.all(np.isfinite(r)):
                raise FloatingPointError(f"non-finite trapezoidal residual at iteration {it}")
            if float(np.linalg.norm(r)) < self.tolerance:
                break
            if it == self.max_iterations:
                self.unconverged += 1
                break
            delta = np.linalg.solve(J, -r)
            z1, zd1 = z1 + delta[:g], zd1 + delta[g:]
            s1 = m.state(z1, zd1, s1.q)
            self.iterations += 1
            if names:
                correction = K @ -m.residual(names, observed, m.measure(names, s1.q, s1.v))
        self.s = s1
