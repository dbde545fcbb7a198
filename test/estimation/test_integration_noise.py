"""The integration rows' noise from the motion (mbfg_ros.estimation.integration_noise): the
configured sigmas on a smooth motion, the trapezoidal rows' truncation on a rough one."""
from __future__ import annotations

import numpy as np

from mbfg_ros.estimation.integration_noise import IntegrationNoise


def _feed(noise: IntegrationNoise, a: np.ndarray) -> None:
    for row in a:
        noise.add(row)


def test_a_smooth_motion_keeps_the_configured_noise():
    h = 0.005
    noise = IntegrationNoise(2, h, 1e-5, 1e-3)
    t = np.arange(200) * h
    _feed(noise, np.column_stack([np.sin(t), 2.0 * np.cos(3 * t)]))        # slow harmonics
    np.testing.assert_array_equal(noise.sigmas(), [1e-5, 1e-5, 1e-3, 1e-3])
    assert noise.roughness() < 1.0


def test_a_fast_harmonic_gets_its_truncation_error():
    """q = sin(w t): the trapezoidal velocity rows' truncation is h^3/12 q'''' = h^3 w^4 / 12 sin,
    RMS h^3 w^4 / (12 sqrt 2); the position rows' h^3 w^3 / (12 sqrt 2)."""
    h, w = 1.0 / 400, 80.0
    noise = IntegrationNoise(1, h, 1e-5, 1e-3)
    t = np.arange(400) * h
    _feed(noise, (-w * w * np.sin(w * t))[:, None])
    sq, sv = noise.sigmas()
    # (within 8 %: the RMS spans 0.1 s, 1.3 periods of the harmonic, from differences 0.2 rad apart)
    assert abs(sq / (h ** 3 * w ** 3 / (12 * np.sqrt(2))) - 1) < 0.08
    assert abs(sv / (h ** 3 * w ** 4 / (12 * np.sqrt(2))) - 1) < 0.08
    assert noise.roughness() > 10.0
    noise.reset()
    np.testing.assert_array_equal(noise.sigmas(), [1e-5, 1e-3])


def test_non_finite_accelerations_are_ignored():
    noise = IntegrationNoise(1, 0.01, 1e-5, 1e-3)
    for a in ([0.0], [np.nan], [0.0], [np.inf], [0.0]):
        noise.add(np.array(a))
    np.testing.assert_array_equal(noise.sigmas(), [1e-5, 1e-3])
