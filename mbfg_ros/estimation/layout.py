"""The stacked state of one keyframe: one GTSAM key holds all of it.

    x = [q (n), v (n), a (n), lam (m), u (n_u), e (n_e), b (n_b), log s (0|1), log mu (0|1), r (0|n_u)]

q, v, a: joint positions, velocities, accelerations (rad or m, /s, /s^2); lam: closure
multipliers; u: unknown input efforts (N m or N); e: the model-error generalised forces (N m or
N, ``estimator.model_error``) on the coordinates of :func:`model_error_joints` (the DOF, or every
joint when the rig has load cells; none when off); b: sensor biases (the measured axes of the
sensors with a bias: gyros in rad/s, accelerometers in m/s^2, in the sensors' order); s: gravity
scale (1 = the config's gravity); mu: mass scale of the estimated link (1 = the URDF's
inertia). The two scales are held as their logarithms, so that they stay positive whatever the
solver does (a scale at or below 0 turns gravity or the link's inertia round and lets the
estimate settle on a motion that explains a gyro equally well); :meth:`StateLayout.gravity_scale`
and ``mass_scale`` give the scales themselves. r: the inputs' rates, by
``estimator.input_model``: ``integrated``, du/dt (N m/s or N/s), which u integrates between
keyframes; ``jerk``, the input joints' jerks (rad/s^3 or m/s^3, u's order), which their
accelerations integrate (u is then free: the equations of motion give it); none with
``random_walk``. Either predicts a changing effort from the trend the window saw, where a random
walk holds it and follows late.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbfg_ros.model.config import EstimatorConfig
from mbfg_ros.model.mechanism import Mechanism


def model_error_joints(mech: Mechanism) -> np.ndarray:
    """The joint coordinates the model-error forces act on: the DOF, or every joint when load
    cells see the closure and joint forces (a force on the DOF alone cannot match them: the
    dependent joints' equations of motion would stay wrong; measured on the four-bar with its
    rocker-pin load cell, the DOF-only force made the estimate worse than none)."""
    return np.arange(mech.n) if mech.load_cells else np.asarray(mech.dof, int)


@dataclass(frozen=True)
class StateLayout:
    n: int
    m: int
    n_u: int
    n_b: int
    has_gravity: bool
    has_mass: bool
    bias_slices: tuple[slice | None, ...]      # per sensor (Mechanism.sensors): its bias columns in b, or None
    n_e: int = 0                               # model-error forces (model_error_joints, or none)
    n_r: int = 0                               # the inputs' rates (input_model integrated or jerk: n_u), or none

    @staticmethod
    def for_mechanism(mech: Mechanism, cfg: EstimatorConfig) -> "StateLayout":
        slices: list[slice | None] = []
        nb = 0
        for s in mech.sensors:
            if s.bias_dim:
                slices.append(slice(nb, nb + s.bias_dim))
                nb += s.bias_dim
            else:
                slices.append(None)
        return StateLayout(mech.n, mech.m, mech.n_u, nb, cfg.estimate_gravity,
                           bool(cfg.estimate_mass_link), tuple(slices),
                           len(model_error_joints(mech)) if cfg.model_error.enabled else 0,
                           0 if cfg.input_model == "random_walk" else mech.n_u)

    # column slices of x
    @property
    def Q(self) -> slice:
        return slice(0, self.n)

    @property
    def V(self) -> slice:
        return slice(self.n, 2 * self.n)

    @property
    def A(self) -> slice:
        return slice(2 * self.n, 3 * self.n)

    @property
    def L(self) -> slice:
        s = 3 * self.n
        return slice(s, s + self.m)

    @property
    def U(self) -> slice:
        s = 3 * self.n + self.m
        return slice(s, s + self.n_u)

    @property
    def E(self) -> slice:
        """The model-error forces (N m or N), on the coordinates of :func:`model_error_joints`."""
        s = 3 * self.n + self.m + self.n_u
        return slice(s, s + self.n_e)

    @property
    def B(self) -> slice:
        s = 3 * self.n + self.m + self.n_u + self.n_e
        return slice(s, s + self.n_b)

    @property
    def S(self) -> slice:
        """log of the gravity scale."""
        s = 3 * self.n + self.m + self.n_u + self.n_e + self.n_b
        return slice(s, s + int(self.has_gravity))

    @property
    def MU(self) -> slice:
        """log of the mass scale."""
        s = 3 * self.n + self.m + self.n_u + self.n_e + self.n_b + int(self.has_gravity)
        return slice(s, s + int(self.has_mass))

    @property
    def R(self) -> slice:
        """The inputs' rates (the last columns; see the module docstring)."""
        s = self.dim - self.n_r
        return slice(s, s + self.n_r)

    @property
    def slow(self) -> slice:
        """Columns with a random-walk process: u, e, b, log s, log mu, r (contiguous)."""
        return slice(3 * self.n + self.m, self.dim)

    @property
    def dim(self) -> int:
        return (3 * self.n + self.m + self.n_u + self.n_e + self.n_b + int(self.has_gravity)
                + int(self.has_mass) + self.n_r)

    def prior_sigmas(self, mech: Mechanism, cfg: EstimatorConfig) -> np.ndarray:
        """Standard deviations of the prior on a run's first keyframe, per state entry (the
        config's ``noise.prior_*``, ``model_error.prior``, each sensor's bias sigma; inf on the
        multipliers). ``prior_gravity`` / ``prior_mass`` are sigmas of the scales' logarithms."""
        nz = cfg.noise
        sig = np.full(self.dim, np.inf)
        sig[self.Q] = nz.prior_position
        sig[self.V] = nz.prior_velocity
        sig[self.A] = nz.prior_acceleration
        sig[self.U] = nz.prior_input
        sig[self.E] = cfg.model_error.prior
        for sensor, sl in zip(mech.sensors, self.bias_slices):
            if sl is not None:
                sig[self.B.start + sl.start:self.B.start + sl.stop] = max(sensor.bias_sigma, 1e-6)
        sig[self.S] = nz.prior_gravity
        sig[self.MU] = nz.prior_mass
        sig[self.R] = cfg.prior_input_rate
        return sig

    def gravity_scale(self, x: np.ndarray) -> float:
        return float(np.exp(x[self.S][0])) if self.has_gravity else 1.0

    def mass_scale(self, x: np.ndarray) -> float:
        return float(np.exp(x[self.MU][0])) if self.has_mass else 1.0

    def gravity_scales(self, X: np.ndarray) -> np.ndarray:
        """The gravity scale of every row of X (N, dim)."""
        return np.exp(X[:, self.S.start]) if self.has_gravity else np.ones(X.shape[0])

    def mass_scales(self, X: np.ndarray) -> np.ndarray:
        """The mass scale of every row of X (N, dim)."""
        return np.exp(X[:, self.MU.start]) if self.has_mass else np.ones(X.shape[0])

    def pack(self, q, v, a, lam=None, u=None, b=None, s: float = 1.0, mu: float = 1.0,
             e=None) -> np.ndarray:
        """A state from its parts (the scales s, mu > 0 as themselves: stored as logarithms)."""
        x = np.zeros(self.dim)
        x[self.Q], x[self.V], x[self.A] = q, v, a
        if lam is not None:
            x[self.L] = lam
        if u is not None:
            x[self.U] = u
        if e is not None:
            x[self.E] = e
        if b is not None:
            x[self.B] = b
        if self.has_gravity:
            x[self.S] = math.log(s)
        if self.has_mass:
            x[self.MU] = math.log(mu)
        return x
