"""The factors of the multibody factor graph, in joint coordinates.

Each factor is a small object with one error function: ``linearize(x0, x1)`` returns whitened
rows ``(r, J0, J1)`` (residual, Jacobian w.r.t. the previous keyframe x0, Jacobian w.r.t. the
newest keyframe x1; J0 is None for factors on x1 alone). The estimator stacks the rows of one
step into one linear factor for ISAM2; the batch smoother stacks the same rows for all steps.

Factors (after Blanco-Claraco et al., multibody dynamics as factor graphs, dependent coordinates):

- :class:`PriorFactor`: a loose prior on the initial state.
- :class:`IntegrationFactor`: trapezoidal (or Euler) integration of q and v between keyframes.
- :class:`RandomWalkFactor`: the random-walk process of unknown inputs, gyro biases, parameters.
- :class:`KeyframeFactor`: at each keyframe, the loop closures at position, velocity and
  acceleration level and the equations of motion
  ``M a + h + F(v) - tau - B u - Phi_q^T lam = 0`` (with the gravity/mass scale if estimated).
- Sensor factors at each sample's own time, interpolated between the keyframes:
  :class:`EncoderBatchFactor` (angle-wrap safe), :class:`GyroFactor` (3-axis with bias),
  :class:`LoadCellFactor`.

Sensor factors take a robust kernel (Huber or Cauchy), applied by reweighting the whitened
rows at the linearization point.
"""
from __future__ import annotations

import math

import numpy as np

from mbfg_ros.estimation.interpolation import Interpolant
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.model.config import EstimatorConfig, RobustLossConfig
from mbfg_ros.model.mechanism import Mechanism, MechanismData

Rows = tuple[np.ndarray, np.ndarray | None, np.ndarray]


def robust_weight(whitened_norm: np.ndarray | float, loss: RobustLossConfig,
                  scale: float = 1.0) -> np.ndarray | float:
    """IRLS weight of a whitened residual norm for the configured kernel (1 for none).

    ``scale`` (>= 1) is the sensor's recent innovation scale: residuals are judged relative to
    it, so that while the estimate converges (every innovation large) samples are not mistaken
    for outliers, while a lone spike among small innovations still is.
    """
    k = loss.threshold * scale
    r = np.abs(whitened_norm)
    if loss.type == "huber":
        return np.where(r <= k, 1.0, k / np.maximum(r, 1e-300))
    if loss.type == "cauchy":
        return 1.0 / (1.0 + (r / k) ** 2)
    return np.ones_like(r) if isinstance(r, np.ndarray) else 1.0


class PriorFactor:
    """(x1 - mean) / sigma on the components with a finite sigma."""

    def __init__(self, mean: np.ndarray, sigma: np.ndarray) -> None:
        keep = np.isfinite(sigma) & (sigma > 0)
        self.idx = np.flatnonzero(keep)
        self.mean = mean[self.idx]
        self.inv = 1.0 / sigma[self.idx]
        self.dim = mean.size

    def linearize(self, x0: np.ndarray | None, x1: np.ndarray) -> Rows:
        r = (x1[self.idx] - self.mean) * self.inv
        J1 = np.zeros((self.idx.size, self.dim))
        J1[np.arange(self.idx.size), self.idx] = self.inv
        return r, None, J1


class IntegrationFactor:
    """Integration of positions and velocities over one step of length h.

    trapezoidal: q1 - q0 - h/2 (v0 + v1), v1 - v0 - h/2 (a0 + a1)
    euler:       q1 - q0 - h v0,          v1 - v0 - h a0
    """

    def __init__(self, lay: StateLayout, h: float, cfg: EstimatorConfig) -> None:
        n, D = lay.n, lay.dim
        wq = 1.0 / cfg.noise.integration_position
        wv = 1.0 / cfg.noise.integration_velocity
        I = np.eye(n)
        J0 = np.zeros((2 * n, D))
        J1 = np.zeros((2 * n, D))
        J0[:n, lay.Q] = -I
        J1[:n, lay.Q] = I
        J0[n:, lay.V] = -I
        J1[n:, lay.V] = I
        if cfg.integrator == "trapezoidal":
            J0[:n, lay.V] = -0.5 * h * I
            J1[:n, lay.V] = -0.5 * h * I
            J0[n:, lay.A] = -0.5 * h * I
            J1[n:, lay.A] = -0.5 * h * I
        else:
            J0[:n, lay.V] = -h * I
            J0[n:, lay.A] = -h * I
        w = np.concatenate([np.full(n, wq), np.full(n, wv)])[:, None]
        self.J0 = J0 * w
        self.J1 = J1 * w

    def linearize(self, x0: np.ndarray, x1: np.ndarray) -> Rows:
        return self.J0 @ x0 + self.J1 @ x1, self.J0, self.J1


class RandomWalkFactor:
    """(x1 - x0)[slow] / (sigma sqrt(h)) for unknown inputs, biases and parameters."""

    def __init__(self, lay: StateLayout, h: float, sigma_per_sqrt_s: np.ndarray) -> None:
        cols = np.arange(lay.slow.start, lay.slow.stop)
        self.cols = cols
        inv = 1.0 / (np.asarray(sigma_per_sqrt_s, float) * math.sqrt(h))
        self.J1 = np.zeros((cols.size, lay.dim))
        self.J1[np.arange(cols.size), cols] = inv
        self.J0 = -self.J1

    def linearize(self, x0: np.ndarray, x1: np.ndarray) -> Rows:
        return self.J1 @ (x1 - x0), self.J0, self.J1

    @property
    def empty(self) -> bool:
        return self.cols.size == 0


class KeyframeFactor:
    """Closures (position, velocity, acceleration level) and the equations of motion at x1."""

    def __init__(self, mech: Mechanism, data: MechanismData, lay: StateLayout, cfg: EstimatorConfig,
                 tau: np.ndarray) -> None:
        self.mech, self.data, self.lay = mech, data, lay
        self.tau = tau
        nz = cfg.noise
        self.acc = cfg.acceleration_constraints and mech.m > 0
        m, n = mech.m, mech.n
        self.rows = (3 * m if self.acc else 2 * m) + n
        self.params = lay.has_gravity or lay.has_mass
        w = [1.0 / nz.closure_position] * m + [1.0 / nz.closure_velocity] * m
        if self.acc:
            w += [1.0 / nz.closure_acceleration] * m
        self.w = np.asarray(w + [1.0 / nz.dynamics] * n)
        self.wc = self.w[:-n, None] if m else None
        self.wd = 1.0 / nz.dynamics
        # integer column offsets
        self.q0, self.v0, self.a0, self.l0, self.u0 = 0, n, 2 * n, 3 * n, 3 * n + m
        self.s0 = lay.S.start
        self.mu0 = lay.MU.start

    def linearize(self, x0: np.ndarray | None, x1: np.ndarray) -> Rows:
        mech, lay = self.mech, self.lay
        m, n = mech.m, mech.n
        q0, v0, a0, l0, u0 = self.q0, self.v0, self.a0, self.l0, self.u0
        q, v, a, lam = x1[q0:v0], x1[v0:a0], x1[a0:l0], x1[l0:u0]
        u = x1[u0:u0 + lay.n_u] if lay.n_u else None
        J = np.zeros((self.rows, lay.dim))
        r = np.empty(self.rows)
        c = None
        if m:
            c = mech.closures(self.data, q, v, a if self.acc else None, lam)
            mc = self.rows - n
            if self.acc:
                r[:mc] = np.concatenate((c.phi, c.phid, c.phidd))
                J[:m, q0:v0] = c.phi_q
                J[m:2 * m, q0:v0] = c.phid_q
                J[m:2 * m, v0:a0] = c.phid_v
                J[2 * m:3 * m, q0:v0] = c.phidd_q
                J[2 * m:3 * m, v0:a0] = c.phidd_v
                J[2 * m:3 * m, a0:l0] = c.phidd_a
            else:
                r[:mc] = np.concatenate((c.phi, c.phid))
                J[:m, q0:v0] = c.phi_q
                J[m:2 * m, q0:v0] = c.phid_q
                J[m:2 * m, v0:a0] = c.phid_v
        d = mech.inverse_dynamics(self.data, q, v, a, lam, self.tau, u, lay.gravity_scale(x1),
                                  lay.mass_scale(x1), closure=c, parameters=self.params)
        k = self.rows - n
        r[k:] = d.r
        Jd = J[k:]
        Jd[:, q0:v0] = d.r_q
        Jd[:, v0:a0] = d.r_v
        Jd[:, a0:l0] = d.r_a
        if m:
            Jd[:, l0:u0] = d.r_lam
        if lay.n_u:
            Jd[:, u0:u0 + lay.n_u] = d.r_u
        if lay.has_gravity:
            Jd[:, self.s0] = d.r_s
        if lay.has_mass:
            Jd[:, self.mu0] = d.r_mass
        r *= self.w
        J *= self.w[:, None]
        return r, None, J


_ENCODER_CACHE: dict = {}
"""Hermite weights and index arrays per (joints, fractions) pattern: with encoder rates a
multiple of the keyframe rate the same pattern recurs every keyframe."""


class EncoderBatchFactor:
    """All encoder samples of one step: wrap(y - q_j(t)) / sigma, with q_j(t) interpolated.

    ``index`` (S,) coordinate indices, ``s`` (S,) interpolation fractions, ``y`` (S,) readings,
    ``sigma`` (S,), ``angular`` (S,) whether to wrap the difference to (-pi, pi].
    """

    robust = True

    def __init__(self, lay: StateLayout, h: float, index, s, y, sigma, angular,
                 loss: RobustLossConfig) -> None:
        self.lay, self.loss = lay, loss
        key = (tuple(index), tuple(round(x, 9) for x in s), h, lay.n)
        cached = _ENCODER_CACHE.get(key)
        if cached is None:
            if len(_ENCODER_CACHE) > 256:
                _ENCODER_CACHE.clear()
            j = np.asarray(index, int)
            sa = np.asarray(s, float)
            s2, s3 = sa * sa, sa * sa * sa
            w = np.stack((2 * s3 - 3 * s2 + 1, (s3 - 2 * s2 + sa) * h, -2 * s3 + 3 * s2, (s3 - s2) * h))
            cached = _ENCODER_CACHE[key] = (w, j, lay.n + j, np.arange(j.size))
        self.w, self.j, self.jv, self.rows = cached
        S = self.j.size
        self.y = np.asarray(y, float)
        self.inv = 1.0 / np.asarray(sigma, float)
        self.angular = np.asarray(angular, bool)
        self.any_angular = bool(self.angular.any())
        self.weight = np.ones(S)
        self.scale = 1.0
        self.last_abs = np.zeros(S)

    def predict(self, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
        h00, h10, h01, h11 = self.w
        return h00 * x0[self.j] + h10 * x0[self.jv] + h01 * x1[self.j] + h11 * x1[self.jv]

    def linearize(self, x0: np.ndarray, x1: np.ndarray, reweight: bool = True) -> Rows:
        e = self.y - self.predict(x0, x1)
        if self.any_angular:
            e = np.where(self.angular, (e + math.pi) % (2 * math.pi) - math.pi, e)
        r = e * self.inv
        self.last_abs = np.abs(r)
        if reweight:
            self.weight = robust_weight(r, self.loss, self.scale)
        sw = np.sqrt(self.weight)
        f = -sw * self.inv * self.w                      # (4, S)
        S, D = self.rows.size, self.lay.dim
        J0 = np.zeros((S, D))
        J1 = np.zeros((S, D))
        J0[self.rows, self.j] = f[0]
        J0[self.rows, self.jv] = f[1]
        J1[self.rows, self.j] = f[2]
        J1[self.rows, self.jv] = f[3]
        return r * sw, J0, J1


class GyroFactor:
    """(y - omega(q(t), v(t)) - b(t)) / sigma on the gyro's measured axes."""

    robust = True

    def __init__(self, mech: Mechanism, data: MechanismData, lay: StateLayout, k: int,
                 interp: Interpolant, y: np.ndarray, loss: RobustLossConfig) -> None:
        self.mech, self.data, self.lay, self.k = mech, data, lay, k
        self.interp = interp
        g = mech.gyros[k]
        self.y = np.asarray(y, float)[g.rows]
        self.inv = 1.0 / g.config.noise
        self.bias = lay.bias_slices[k]
        self.loss = loss
        self.weight = 1.0
        self.scale = 1.0
        self.last_abs = np.zeros(1)

    def linearize(self, x0: np.ndarray, x1: np.ndarray, reweight: bool = True) -> Rows:
        lay, n = self.lay, self.lay.n
        A0, A1 = self.interp.matrices(lay)
        z = A0 @ x0 + A1 @ x1
        w, wq, wv = self.mech.gyro(self.data, self.k, z[:n], z[n:2 * n])
        Jz = np.zeros((w.size, lay.dim))
        Jz[:, :n] = -wq
        Jz[:, n:2 * n] = -wv
        e = self.y - w
        if self.bias is not None:
            sl = slice(lay.B.start + self.bias.start, lay.B.start + self.bias.stop)
            e = e - z[sl]
            Jz[:, sl] = -np.eye(e.size)
        r = e * self.inv
        self.last_abs = np.array([math.sqrt(float(r @ r) / r.size)])
        if reweight:
            self.weight = float(robust_weight(self.last_abs[0], self.loss, self.scale))
        f = self.inv * math.sqrt(self.weight)
        Jz *= f
        return r * math.sqrt(self.weight), Jz @ A0, Jz @ A1


class LoadCellFactor:
    """(y - load(q(t), v(t), a(t), lam(t), u(t))) / sigma."""

    robust = True

    def __init__(self, mech: Mechanism, data: MechanismData, lay: StateLayout, k: int,
                 interp: Interpolant, y: float, tau: np.ndarray, loss: RobustLossConfig) -> None:
        self.mech, self.data, self.lay, self.k = mech, data, lay, k
        self.interp = interp
        self.y = float(y)
        self.tau = tau
        self.inv = 1.0 / mech.load_cells[k].config.noise
        self.loss = loss
        self.weight = 1.0
        self.scale = 1.0
        self.last_abs = np.zeros(1)

    def linearize(self, x0: np.ndarray, x1: np.ndarray, reweight: bool = True) -> Rows:
        lay = self.lay
        A0, A1 = self.interp.matrices(lay)
        z = A0 @ x0 + A1 @ x1
        y, yq, yv, ya, yl, yu = self.mech.load_cell(self.data, self.k, z[lay.Q], z[lay.V], z[lay.A],
                                                    z[lay.L], z[lay.U], self.tau)
        r = (self.y - y) * self.inv
        self.last_abs = np.array([abs(r)])
        if reweight:
            self.weight = float(robust_weight(r, self.loss, self.scale))
        f = -self.inv * math.sqrt(self.weight)
        Jz = np.zeros((1, lay.dim))
        Jz[0, lay.Q] = yq * f
        if yv is not None:
            Jz[0, lay.V] = yv * f
        if ya is not None:
            Jz[0, lay.A] = ya * f
        Jz[0, lay.L] = yl * f
        if lay.n_u:
            Jz[0, lay.U] = yu * f
        return np.array([r * math.sqrt(self.weight)]), Jz @ A0, Jz @ A1
