"""Input efforts applied to the actuated joints over time (N m, or N for prismatic joints).

Every known-input joint (``actuation: known``, the effort a controller commands and the rig
publishes) and every unknown-input joint (``actuation: unknown``, the effort an estimator must
estimate) gets the scenario's profile; each joint draws its own random signal.

Profiles (``A`` amplitude, ``f`` frequency, ``t0`` start; zero before t0):
- none: 0;
- step: A for t >= t0;
- sine: A sin(2 pi f (t - t0)) for t >= t0;
- random: a smooth random signal: a cubic spline through Gaussian knots (std A) spaced 1/f
  apart, the first knot (at t0) zero, so it starts continuously.

A joint of the scenario's ``input_scale`` gets its effort times its factor.

The scenario's ``disturbance`` is not an input: an unmodelled generalised force on every joint
(piecewise constant, a Gaussian draw per joint every 1 / ``disturbance_rate`` s), which the
dynamics feel (:meth:`InputProfile.applied`) and no sensor publishes (:meth:`InputProfile.efforts`).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.interpolate import CubicSpline

from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.scenario import Scenario


class InputProfile:
    """The applied efforts of a scenario on a mechanism: ``tau(t)`` (n,) on the known-input
    joints and ``u(t)`` (n_u,) on the unknown-input joints."""

    def __init__(self, mech: Mechanism, scenario: Scenario) -> None:
        self.n = mech.n
        self.known = np.array([mech.index[j] for j in mech.known_input_joints], dtype=int)
        self.n_u = mech.n_u
        self.profile = scenario.input_profile if scenario.input_amplitude != 0.0 else "none"
        self.offset = float(scenario.input_offset)
        self.amplitude = float(scenario.input_amplitude)
        self.frequency = float(scenario.input_frequency)
        self.start = float(scenario.input_start)
        channels = len(self.known) + self.n_u
        joints = [mech.joint_names[j] for j in self.known] + list(mech.input_joints)
        self.scale = np.array([scenario.input_scale.get(j, 1.0) for j in joints])
        self._splines: list[CubicSpline] = []
        if self.profile == "random" and channels:
            rng = np.random.default_rng([scenario.seed, 0x1B])
            spacing = 1.0 / self.frequency
            count = max(2, int(math.ceil((scenario.duration - self.start) / spacing)) + 3)
            knots = self.start + spacing * np.arange(count)
            for _ in range(channels):
                values = self.amplitude * rng.standard_normal(count)
                values[0] = 0.0
                self._splines.append(CubicSpline(knots, values, bc_type="clamped"))
        self.disturbance = float(scenario.disturbance)
        self.period = 1.0 / float(scenario.disturbance_rate)
        self._draws = np.zeros((1, self.n))
        if self.disturbance > 0.0:
            rng = np.random.default_rng([scenario.seed, 0xD1])
            count = int(math.ceil(scenario.duration / self.period - 1e-9))
            self._draws = self.disturbance * rng.standard_normal((max(count, 1), self.n))

    @property
    def active(self) -> bool:
        """True when some joint gets a nonzero effort."""
        return (self.profile != "none" or self.offset != 0.0) and (len(self.known) + self.n_u) > 0

    @property
    def disturbed(self) -> bool:
        """True when the dynamics feel a disturbance."""
        return self.disturbance > 0.0

    def breakpoints(self) -> list[float]:
        """Times where the effort or its derivative jumps (the integrator restarts there):
        the inputs' start and every draw of the disturbance."""
        out = [self.start] if self.active else []
        if self.disturbed:
            out += list(self.period * np.arange(1, len(self._draws)))
        return sorted(out)

    def _pieces(self, t: np.ndarray) -> np.ndarray:
        """The indices of the disturbance's draws at the times ``t`` (s; right-continuous at its jumps)."""
        return np.clip(np.floor(t / self.period + 1e-9).astype(int), 0, len(self._draws) - 1)

    def piece(self, t: float) -> int:
        """The index of the disturbance's draw at ``t`` (s; right-continuous at its jumps)."""
        return int(self._pieces(np.array([t]))[0])

    def disturbance_at(self, times, piece: int | None = None) -> np.ndarray:
        """(N, n) the disturbance at ``times`` (s; zeros without one); ``piece``: the draw of
        the integrator's segment (between two jumps) instead of the times' own."""
        t = np.atleast_1d(np.asarray(times, float))
        if not self.disturbed:
            return np.zeros((t.size, self.n))
        if piece is not None:
            return np.repeat(self._draws[piece][None, :], t.size, axis=0)
        return self._draws[self._pieces(t)]

    def _channels(self, t: np.ndarray) -> np.ndarray:
        """(len(t), channels) efforts; channels are the known joints, then the unknown inputs."""
        k = len(self.known) + self.n_u
        out = np.zeros((t.size, k))
        if not self.active:
            return out
        on = t >= self.start
        out[on] = self.offset
        if self.profile == "step":
            out[on] += self.amplitude
        elif self.profile == "sine":
            out[on] += (self.amplitude * np.sin(2 * math.pi * self.frequency * (t[on] - self.start)))[:, None]
        elif self.profile == "random":
            for c, spline in enumerate(self._splines):
                out[on, c] += spline(t[on])
        return out * self.scale

    def efforts(self, times) -> tuple[np.ndarray, np.ndarray]:
        """Known efforts tau (N, n) and unknown efforts u (N, n_u) at ``times`` (s)."""
        t = np.atleast_1d(np.asarray(times, float))
        ch = self._channels(t)
        tau = np.zeros((t.size, self.n))
        tau[:, self.known] = ch[:, :len(self.known)]
        return tau, ch[:, len(self.known):].copy()

    def applied(self, times, piece: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """What the dynamics feel at ``times`` (s): the known efforts plus the disturbance
        (N, n), and the unknown efforts (N, n_u); ``piece`` as in :meth:`disturbance_at`."""
        tau, u = self.efforts(times)
        if self.disturbed:
            tau = tau + self.disturbance_at(times, piece)
        return tau, u

    def at(self, t: float, piece: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """What the dynamics feel at one time (s): tau (n,) with the disturbance, u (n_u,)."""
        tau, u = self.applied(np.array([t]), piece)
        return tau[0], u[0]
