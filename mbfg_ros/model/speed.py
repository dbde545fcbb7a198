"""What a rig's speed asks of the keyframe rate and of the integration noise.

The integration rows between two keyframes h apart are exact only for low-order motion: the
trapezoidal rows leave a truncation error of about h^3/12 q''' (position) and h^3/12 q''''
(velocity), and the readings between keyframes see the cubic Hermite interpolation's error. A
DOF turning at w rad/s moves its joints like harmonics of w, so q''' ~ w^3 and q'''' ~ w^4
(one radian of motion at frequency w). Measured on config/fast_crank.yaml (crank 21-85 rad/s,
jerk up to 2e6 rad/s^3): at h = 5 ms the trapezoidal velocity rows of the true motion are
0.67 rad/s RMS (6.4 max), 670x the default integration noise 1e-3, and the estimate fails
(velocity error 2 % of its RMS, every sensor flagged diverged); with the noise raised to
h^3 w^4 / 12 it tracks, but the gyro's readings between the keyframes stay 6-10 sigma off (the
interpolation is too coarse); from 400 Hz (0.2 rad of the DOF per keyframe at 80 rad/s) both
hold. Hence, from ``mechanism.top_speed`` (w, rad/s; 0 = unknown, nothing changes):

- :func:`integration_sigmas`: the integration noise the estimator uses, the config's raised to
  the truncation error at top speed: sigma_q = max(config, h^3 w^3 / 12),
  sigma_v = max(config, h^3 w^4 / 12);
- :func:`needed_keyframe_rate`: at most :data:`RAD_PER_KEYFRAME` of DOF motion per keyframe,
  5 w Hz (rounded up to 50 Hz, at least 200 Hz), or :data:`RAD_PER_KEYFRAME_UNSENSED` (10 w Hz)
  where no encoder reads a DOF's position (gyros alone: the positions come from integrating the
  velocities, so the grid's integration error is not corrected by any reading; measured on a
  gyro-only slider-crank at 20-78 rad/s, crank 0.3 m, rod 1 m, slider 5 kg: 400 Hz 1.8 mrad and
  6 divergence reports, 500 Hz 1.1 mrad, 800 Hz 0.58 mrad and none); ``keyframe_rate: auto``
  (the default) uses it;
- :func:`rate_for_default_noise`: the rate at which the configured integration noise would hold
  unraised, (w^4 / (12 sigma_v))^(1/3).
"""
from __future__ import annotations

import math

RAD_PER_KEYFRAME = 0.2
"""rad of DOF motion per keyframe at top speed that keeps readings between keyframes explained
(encoders read every DOF position)."""
RAD_PER_KEYFRAME_UNSENSED = 0.1
"""rad of DOF motion per keyframe at top speed where some DOF position is read by no encoder."""
BASE_RATE = 200.0
"""Hz: the keyframe rate of a rig without a top speed (and the least ``auto`` chooses)."""


def integration_sigmas(sigma_q: float, sigma_v: float, h: float, top_speed: float) -> tuple[float, float]:
    """(sigma_q, sigma_v) per keyframe step h (s): the configured ones raised to the truncation
    error of the trapezoidal rows at ``top_speed`` (rad/s; 0 keeps them)."""
    w = abs(float(top_speed))
    if w <= 0:
        return sigma_q, sigma_v
    h3 = h ** 3 / 12.0
    return max(sigma_q, h3 * w ** 3), max(sigma_v, h3 * w ** 4)


def rad_per_keyframe(positions_sensed: bool = True) -> float:
    """rad of DOF motion per keyframe the grid may take at top speed: RAD_PER_KEYFRAME where
    encoders read every DOF position, RAD_PER_KEYFRAME_UNSENSED otherwise."""
    return RAD_PER_KEYFRAME if positions_sensed else RAD_PER_KEYFRAME_UNSENSED


def needed_keyframe_rate(top_speed: float, positions_sensed: bool = True) -> float:
    """Hz: the keyframe rate a DOF turning at ``top_speed`` rad/s needs (at least BASE_RATE);
    ``positions_sensed``: encoders read every DOF position (see :func:`rad_per_keyframe`)."""
    w = abs(float(top_speed))
    if w <= 0:
        return BASE_RATE
    return max(BASE_RATE, 50.0 * math.ceil(w / rad_per_keyframe(positions_sensed) / 50.0 - 1e-9))


def rate_for_default_noise(sigma_v: float, top_speed: float) -> float:
    """Hz: the keyframe rate at which the trapezoidal velocity rows' truncation error at
    ``top_speed`` stays within ``sigma_v`` (0 when there is no top speed)."""
    w = abs(float(top_speed))
    if w <= 0:
        return 0.0
    return (w ** 4 / (12.0 * sigma_v)) ** (1.0 / 3.0)
