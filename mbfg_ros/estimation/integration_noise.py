"""The integration rows' noise from the motion the estimator sees.

Between keyframes h apart the trapezoidal rows leave a truncation error of about h^3/12 q'''
(position) and h^3/12 q'''' (velocity). :mod:`mbfg_ros.model.speed` raises the configured
integration noise to what a DOF turning at ``mechanism.top_speed`` w gives if its joints move like
harmonics of w (q''' ~ w^3, q'''' ~ w^4). Mechanisms with a heavy slider on a light crank are far
rougher: on a slider-crank (crank 0.3 m, rod 1 m, slider 5 kg) at 20-78 rad/s the velocity rows of
the true motion at 400 Hz are 0.29 rad/s RMS against the rule's 0.048, and an estimate held to
the rule fits its rod gyro at 4.4 sigma and its load cell at 5.1, while with the noise at the true
truncation it fits them at 0.75 and 0.36 (and its torque error halves).

So the online estimator takes the truncation from its own recent estimates (the smoothed
accelerations a few keyframes behind the newest: the newest one jumps where a Gauss-Newton step
or a reading moves it, and fed back into the noise those jumps ran away): per coordinate j, with
the accelerations a of consecutive keyframes, q''' ~ (a_k - a_{k-1}) / h and
q'''' ~ (a_k - 2 a_{k-1} + a_{k-2}) / h^2, over the last :data:`SPAN` seconds as an RMS:

    sigma_q,j = max(default_q, h^2 / 12 * RMS(Delta a_j))
    sigma_v,j = max(default_v, h / 12 * RMS(Delta^2 a_j))

These sigmas are parameters of each step (``StepLayout.integration``), so a step relinearised
later keeps the noise it was built with, and they enter the published covariance: the
uncertainty of an estimate at speed includes the integration error. On a smooth, slow motion
the RMS terms are far below the configured noise and nothing changes.

An RMS over 0.1 s is right for the typical step and wrong at a dead centre, where a heavy slider
reverses the crank's acceleration within one or two steps: on config/long_crank.yaml at 400 Hz
the acceleration goes from +5100 to -4800 rad/s^2 in 5 ms, the true velocity rows there are
1-2 rad/s off, thirty times the RMS sigma, and the filtered estimate was 0.5-1.2 rad/s off with a
published sigma of 0.03 (velocity errors 3.0 times their sigmas RMS, positions 1.6). So where
the newest keyframe is refined by Gauss-Newton (its prediction missed: the estimator's
``gauss_newton_adaptive``), the step's sigmas are also raised to its own local truncation
(:meth:`IntegrationNoise.local`): with the accelerations a0, a1, a2 of the keyframes k-2, k-1
and the refined k,

    sigma_q,j >= h^2 / 12 |a2_j - a1_j|          sigma_v,j >= h / 12 |a2_j - 2 a1_j + a0_j|

(the position rows' truncation is h^3/12 times the jerk over the step, the velocity rows' h^3/12
times the jerk's rate; on the true motion of that rig these differences give the truncation
per step to within a factor 1.0-1.2 for positions, 0.8 RMS for velocities). The readings then
move the keyframe where the grid cannot follow the motion, and the covariance says so: velocity
errors 0.95 times their sigmas RMS, positions 0.98, and the errors themselves fall (0.69 to
0.49 mrad, 0.136 to 0.054 rad/s). No ROS.
"""
from __future__ import annotations

import math
from collections import deque

import numpy as np

SPAN = 0.1
"""s of keyframes over which the accelerations' differences are averaged (RMS)."""


class IntegrationNoise:
    """Rolling RMS of the first and second differences of the keyframes' accelerations, and the
    integration sigmas they give (module docstring)."""

    def __init__(self, n: int, h: float, default_q: float, default_v: float, span: float = SPAN) -> None:
        self.n, self.h = n, h
        self.default = np.concatenate([np.full(n, default_q), np.full(n, default_v)])
        self.size = max(2, int(math.ceil(span / h)))
        self.reset()

    def reset(self) -> None:
        """Forget the motion (a new run)."""
        self._a: deque[np.ndarray] = deque(maxlen=3)
        self._d1: deque[np.ndarray] = deque()
        self._d2: deque[np.ndarray] = deque()
        self._s1 = np.zeros(self.n)
        self._s2 = np.zeros(self.n)
        self._sigmas: np.ndarray | None = None       # sigmas() until the next add

    def add(self, a: np.ndarray) -> None:
        """The accelerations of the next solved keyframe (in keyframe order). Called per
        keyframe: the same arithmetic in as few numpy calls as it takes."""
        a = np.array(a, float)
        if not math.isfinite(a.sum()):
            return
        self._sigmas = None
        hist = self._a
        hist.append(a)
        if len(hist) >= 2:
            d = a - hist[-2]
            self._push(self._d1, d * d, self._s1)
            if len(hist) == 3:
                d = a - 2.0 * hist[-2] + hist[-3]
                self._push(self._d2, d * d, self._s2)

    def _push(self, window: deque, sq: np.ndarray, total: np.ndarray) -> None:
        window.append(sq)
        total += sq
        if len(window) > self.size:
            total -= window.popleft()
            np.maximum(total, 0.0, out=total)     # (a rounding error below 0 after a subtraction)

    def roughness(self) -> float:
        """How many times the velocity rows' truncation (RMS over the span, the largest over the
        coordinates) exceeds the default velocity sigma (0 before there is a figure): above 1 the
        motion is rougher than the configured noise (and ``mechanism.top_speed``) allow for, and
        a grid finer by the cube root of it would hold it (the truncation goes with h^3)."""
        if not self._d2 or self.default[self.n] <= 0:
            return 0.0
        rms = np.sqrt(self._s2 / len(self._d2))
        return float(self.h / 12.0 * rms.max() / self.default[self.n])

    def local(self, a0: np.ndarray | None, a1: np.ndarray, a2: np.ndarray) -> np.ndarray:
        """(2n,) the local truncation sigmas of a step from keyframe k-1 (acceleration ``a1``)
        to k (``a2``), with ``a0`` the acceleration at k-2 (None: velocity sigmas 0): positions
        h^2/12 |a2 - a1|, velocities h/12 |a2 - 2 a1 + a0| (module docstring)."""
        h, n = self.h, self.n
        out = np.zeros(2 * n)
        out[:n] = h * h / 12.0 * np.abs(a2 - a1)
        if a0 is not None:
            out[n:] = h / 12.0 * np.abs(a2 - 2.0 * a1 + a0)
        return out

    def sigmas(self) -> np.ndarray:
        """(2n,) the integration sigmas of the next step: positions, then velocities (a new
        array; worked out once per :meth:`add`: the keyframes of one ISAM2 update share them)."""
        out = self._sigmas
        if out is None:
            out = self.default.copy()
            h, n = self.h, self.n
            if self._d1:
                out[:n] = np.maximum(out[:n], h * h / 12.0 * np.sqrt(self._s1 / len(self._d1)))
            if self._d2:
                out[n:] = np.maximum(out[n:], h / 12.0 * np.sqrt(self._s2 / len(self._d2)))
            self._sigmas = out
        return out.copy()
