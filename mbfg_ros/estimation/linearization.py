"""Linearising a keyframe step for the online estimator: the step function's rows at a point,
the prior in place of the integration rows on a run's first step, and the local Gauss-Newton
refinement of the newest keyframe before it goes to ISAM2.

The newest keyframe is linearised at the state predicted at constant acceleration. Where that
misses the equations of motion by more than :data:`GN_TRIGGER` sigmas (RMS), or a reading is
down-weighted there, up to ``gauss_newton_adaptive`` local Gauss-Newton steps (x_{k-1} fixed)
refine it first, each kept only if it lowers the step's cost: at a jerk the prediction misses,
and the robust kernel, judging the readings there, would down-weight the very readings that show
the change. A refined step's integration sigmas are raised to the local truncation its refined
keyframe shows (:meth:`.IntegrationNoise.local`: at a dead centre the acceleration reverses
within a step or two, thirty times what the noise over the last 0.1 s says), so that the
readings there move the keyframe instead of being taken for outliers. No ROS.
"""
from __future__ import annotations

import math

import numpy as np

from mbfg_ros.estimation.integration_noise import IntegrationNoise
from mbfg_ros.estimation.outputs import Health
from mbfg_ros.estimation.start_state import prior_rows
from mbfg_ros.estimation.step_function import LinearizationError, StepFunction
from mbfg_ros.model.config import EstimatorConfig

GN_TRIGGER = 10.0
"""sigmas (RMS of the equations-of-motion rows at the predicted state) above which the newest
keyframe is refined by Gauss-Newton before ISAM2 (``gauss_newton_adaptive``). Measured on a
gyro-only slider-crank at 1 kHz: the prediction misses by 8.6 sigma at the median, 29 at p90,
165 at p99 (dead centres); on the four-bar at 200 Hz by 1.7 / 12 / 43."""


class GelsySolver:
    """Least squares ``min |A x - b|`` by LAPACK's ``gelsy`` (QR with column pivoting): what
    ``scipy.linalg.lstsq(A, b, lapack_driver="gelsy", check_finite=False)`` returns, bit for bit
    (the same routine, work size and ``cond``), without its per-call argument checks and work-size
    query (about 10 us a call; the work size is kept per shape). Float64 A (m, n) with m >= n
    and b (m,); anything else goes to scipy's ``lstsq``."""

    def __init__(self) -> None:
        # scipy.linalg (0.2-1 s of CPU to import) when an estimator is built, not with this module:
        # a node refusing its parameters or its rig exits without it
        from scipy.linalg import lapack, lstsq
        self._lstsq = lstsq
        self._gelsy, self._gelsy_lwork = lapack.get_lapack_funcs(("gelsy", "gelsy_lwork"), (np.zeros((1, 1)),))
        self._cond = np.finfo(np.float64).eps
        self._lwork: dict[tuple[int, int], int] = {}

    def __call__(self, A: np.ndarray, b: np.ndarray) -> np.ndarray:
        m, n = A.shape
        if m < n or n == 0 or A.dtype != np.float64 or b.dtype != np.float64 or b.shape != (m,):
            return self._lstsq(A, b, lapack_driver="gelsy", check_finite=False)[0]
        lwork = self._lwork.get((m, n))
        if lwork is None:
            work, info = self._gelsy_lwork(m, n, 1, self._cond)
            if info != 0:
                raise ValueError(f"Internal work array size computation failed: {info}")
            lwork = self._lwork[(m, n)] = int(work.real)
        _, x, _, _, info = self._gelsy(A, b, np.zeros((n, 1), dtype=np.int32), self._cond, lwork, False, False)
        if info < 0:
            raise ValueError(f"illegal value in {-info}-th argument of internal gelsy")
        return x[:n]


class StepLinearizer:
    """Rows and Jacobians of the steps of one estimator (its step function ``fn``)."""

    def __init__(self, fn: StepFunction, cfg: EstimatorConfig, health: Health,
                 integration: IntegrationNoise | None = None) -> None:
        """``integration``: the estimator's integration noise, whose local truncation a refined
        step's sigmas are raised to (None: they stay as bound)."""
        self.fn = fn
        self.integration = integration
        self.layout = fn.layout
        self.cfg = cfg
        self.health = health
        self.innovations: np.ndarray | None = None   # set to an array: each refined step's |whitened innovations|
        self.least_squares = GelsySolver()

    def linearize(self, x0: np.ndarray | None, x1: np.ndarray, p: np.ndarray | None,
                  prior: tuple[np.ndarray, np.ndarray], copy: bool = True):
        """Rows (r, J0, J1) of a step with parameters p (None: the step's bound parameters) at
        (x0, x1); a step without x0 (the first of a run) has the ``prior`` (mean, sigma) instead
        of the integration and random-walk rows, and J0 None. With ``copy`` False a binary
        step's arrays are views valid until the next evaluation."""
        fn = self.fn.step
        r, J0, J1 = fn(x1 if x0 is None else x0, x1, p)
        if not fn.finite():
            raise LinearizationError("a step's residual or Jacobian is not finite")
        if x0 is None:
            H = self.layout.head
            mean, sigma = prior
            pr, pJ = prior_rows(x1, mean, sigma)
            return np.concatenate((pr, r[H:])), None, np.vstack((pJ, J0[H:] + J1[H:]))
        if copy:
            return r.copy(), J0.copy(), J1.copy()
        return r, J0, J1

    def refine(self, x0: np.ndarray | None, x1: np.ndarray, prior: tuple[np.ndarray, np.ndarray],
               x_before: np.ndarray | None = None):
        """The newest step linearised at x1 refined with x0 fixed (the step's bound parameters):
        ``gauss_newton_iterations`` always, up to ``gauss_newton_adaptive`` more while the point
        is poor (:meth:`poor_point`; an adaptive step that does not lower the cost is undone);
        ``x_before``: the state before x0 (None if there is none), for the local truncation.
        Returns the final linearisation (r, J0, J1; views) and x1."""
        iterations = self.cfg.gauss_newton_iterations
        extra = 0 if x0 is None else self.cfg.gauss_newton_adaptive
        done = 0
        r, J0, J1 = self.linearize(x0, x1, None, prior, copy=False)
        if self.innovations is not None:            # the readings at the predicted state
            self.innovations[:] = self.fn.step.abs
        while done < iterations or (done < iterations + extra and self.poor_point(r)):
            if done and x0 is not None and self._raise_to_local_truncation(x_before, x0, x1):
                r, J0, J1 = self.linearize(x0, x1, None, prior, copy=False)
            cost = float(r @ r)
            dx = self.least_squares(J1, -r)
            if not math.isfinite(dx.sum()):
                break
            x_new = x1 + dx
            r, J0, J1 = self.linearize(x0, x_new, None, prior, copy=False)
            if done >= iterations and not float(r @ r) < cost:
                r, J0, J1 = self.linearize(x0, x1, None, prior, copy=False)     # no gain: back
                break
            x1 = x_new
            done += 1
            self.health.gauss_newton_iterations += 1
        return r, J0, J1, x1

    def _raise_to_local_truncation(self, x_before: np.ndarray | None, x0: np.ndarray,
                                   x1: np.ndarray) -> bool:
        """Raise the step's bound integration sigmas to the local truncation its refined
        keyframe x1 shows; whether any was raised."""
        if self.integration is None:
            return False
        A = self.fn.lay.A
        local = self.integration.local(None if x_before is None else x_before[A], x0[A], x1[A])
        sig = self.fn.step.p[self.layout.integration]
        if not (local > sig).any():
            return False
        np.maximum(sig, local, out=sig)
        self.health.integration_raises += 1
        return True

    def poor_point(self, r: np.ndarray) -> bool:
        """Whether the step just linearised sits at a poor point: its equations-of-motion rows'
        RMS above GN_TRIGGER sigmas of the configured ``noise.dynamics`` (the rows are whitened
        by it times the step's model-uncertainty scale, :mod:`.model_uncertainty`: judged in
        those, a scale of 0.03 made 93 % of a smooth Panda run's keyframes "poor", for 30 % more
        CPU and no change in any estimate), or a reading down-weighted there."""
        L = self.layout
        d = r[L.dynamics_start:L.dynamics_start + L.dynamics_rows]
        if d.size:
            scale = 1.0 if L.model_scale is None else float(self.fn.step.p[L.model_scale])
            if float(d @ d) * scale * scale > GN_TRIGGER * GN_TRIGGER * d.size:
                return True
        return bool(self.fn.step.stats[1::2].any())

    def reading(self, i: int, s, fraction: float, value, tau: np.ndarray | None,
                x0: np.ndarray, x1: np.ndarray):
        """Rows (r, J0, J1; views) of one reading of measuring stream i (``s``) at ``fraction``
        of its step, linearised at (x0, x1) (``tau``: the known efforts at its stamp, for
        sensors that read them); updates the stream's innovation scale and counts."""
        fn = self.fn.reading[i]
        b = self.fn.reading_layouts[i].blocks[0]
        p = fn.p
        V = b.view(p)
        V[0, 0] = fraction
        V[0, 1:1 + s.dim] = value
        if b.tau:
            V[0, 1 + s.dim:] = tau
        p[b.mean_abs] = s.mean_abs
        p[b.jitter] = s.jitter
        r, J0, J1 = fn(x0, x1)
        if not fn.finite():
            raise LinearizationError(f"a reading of {s.name} gave a non-finite residual")
        s.set_mean_abs(float(fn.stats[0]))
        s.counts.downweighted += int(fn.stats[1])
        return r, J0, J1
