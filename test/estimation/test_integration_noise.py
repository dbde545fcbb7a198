"""The integration rows' noise from the motion (mbfg_ros.estimation.integration_noise): the
configured sigmas on a smooth motion, the trapezoidal rows' truncation on a rough one."""
from __future__ import annotations

import numpy as np
import pytest

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


def _truncation(q, v, a, h):
    """The trapezoidal rows of the true motion per step k (from k-1): (position, velocity)."""
    return (q[1:] - q[:-1] - 0.5 * h * (v[1:] + v[:-1]), v[1:] - v[:-1] - 0.5 * h * (a[1:] + a[:-1]))


def test_the_local_truncation_of_a_step_from_its_accelerations():
    """q = sin(w t) (w = 80 rad/s, 400 Hz): per step, the first difference of the accelerations
    gives the position rows' truncation (h^3/12 q''' over the step) and the second difference
    ending at it the velocity rows' (h^3/12 q''''), RMS over the steps within 2 % and 15 % (the
    second difference sits at the step's start); without the keyframe before, no velocity sigma."""
    h, w = 1.0 / 400, 80.0
    t = np.arange(200) * h
    q, v, a = np.sin(w * t), w * np.cos(w * t), -w * w * np.sin(w * t)
    rq, rv = _truncation(q, v, a, h)
    noise = IntegrationNoise(1, h, 1e-5, 1e-3)
    local = np.array([noise.local(a[k - 2:k - 1], a[k - 1:k], a[k:k + 1]) for k in range(2, t.size)])
    rms = lambda x: float(np.sqrt(np.mean(x ** 2)))  # noqa: E731
    assert rms(local[:, 0]) == pytest.approx(rms(rq[1:]), rel=0.02)
    assert rms(local[:, 1]) == pytest.approx(rms(rv[1:]), rel=0.15)
    np.testing.assert_array_equal(noise.local(None, a[:1], a[1:2])[1:], [0.0])


def test_the_local_truncation_catches_a_dead_centre():
    """An acceleration reversing within 2.5 ms (a heavy slider at a dead centre: a = A tanh(t/tau),
    A = 5000 rad/s^2, tau = 2 ms) at 400 Hz: the 0.1 s RMS (sigmas()) stays far below the worst
    step's truncation, the local sigmas of that step are within a factor 2 (positions) and 2.5 of
    it (velocities: the second difference ending at the step sees half of it here, as it sits at
    the step's start)."""
    h, A, tau = 1.0 / 400, 5000.0, 2e-3
    t = np.arange(-0.1, 0.02, h) + 0.3 * h
    a = A * np.tanh(t / tau)
    v = A * tau * np.log(np.cosh(t / tau))
    # q: the integral of v, numerically on a fine grid
    fine = np.linspace(t[0], t[-1], 200001)
    vf = A * tau * np.log(np.cosh(fine / tau))
    qf = np.concatenate([[0.0], np.cumsum(0.5 * (vf[1:] + vf[:-1]) * np.diff(fine))])
    q = np.interp(t, fine, qf)
    rq, rv = _truncation(q, v, a, h)
    noise = IntegrationNoise(1, h, 1e-5, 1e-3)
    for x in a:
        noise.add(np.array([x]))
    k = int(np.argmax(np.abs(rv))) + 1                       # the worst step, from k-1 to k
    local = noise.local(a[k - 2:k - 1], a[k - 1:k], a[k:k + 1])
    assert noise.sigmas()[1] < 0.5 * abs(rv[k - 1])
    assert 0.5 < local[0] / abs(rq[k - 1]) < 2.0
    assert 0.4 < local[1] / abs(rv[k - 1]) < 2.0
