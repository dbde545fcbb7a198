"""Replay metrics (mbfg_ros.replay.metrics, replay.truth): the truth interpolated between its
samples by cubic Hermite through its derivatives, and the consistency of published standard
deviations with the errors (RMS of error / sigma, two-sigma coverage)."""
from __future__ import annotations

import numpy as np
import pytest

from mbfg_ros.replay.estimate_log import EstimateSeries
from mbfg_ros.replay.metrics import compare, consistency
from mbfg_ros.replay.truth import Series, TruthSeries
from support.simulations import config_mechanism, simulated


def test_hermite_interpolation_through_the_derivative_beats_linear():
    """q = sin(w t) sampled at 1 kHz with w = 80 rad/s: midway, linear interpolation is off by
    h^2 w^2 / 8 (0.8 mrad of a unit amplitude), the cubic Hermite through q' by h^4 w^4 / 384."""
    h, w = 1e-3, 80.0
    t = np.arange(0.0, 0.5, h)
    q = Series(t, np.sin(w * t)[:, None])
    dq = Series(t, (w * np.cos(w * t))[:, None])
    mid = t[:-1] + 0.5 * h
    truth = np.sin(w * mid)
    linear = np.abs(q.at(mid)[:, 0] - truth).max()
    cubic = np.abs(q.hermite(mid, dq)[:, 0] - truth).max()
    assert linear == pytest.approx(h * h * w * w / 8, rel=0.01)
    assert cubic <= 1.01 * h ** 4 * w ** 4 / 384
    # at the samples it is exact, outside the span NaN; a non-finite derivative falls back to linear
    np.testing.assert_allclose(q.hermite(t[:5], dq)[:, 0], np.sin(w * t[:5]), atol=1e-15)
    assert np.isnan(q.hermite(np.array([-1.0, 1.0]), dq)).all()
    bad = Series(t, np.where(t > 0.25, np.nan, w * np.cos(w * t))[:, None])
    np.testing.assert_array_equal(q.hermite(mid[mid > 0.3], bad), q.at(mid[mid > 0.3]))


def _estimates(mech, t, q, v, std_q, std_v) -> EstimateSeries:
    N, n, g = t.size, mech.n, len(mech.dof)
    z = np.zeros((N, n))
    std = np.column_stack([np.full((N, g), std_q), np.full((N, g), std_v)])
    return EstimateSeries(t, np.arange(N), np.zeros(N, int), q, v, z, z.copy(), np.zeros((N, mech.m)),
                          np.zeros((N, mech.n_u)), np.zeros((N, 0)), np.ones(N), np.ones(N), std,
                          np.zeros((N, 0, 3)), np.zeros((N, 0, 3)), np.zeros((N, 0)))


def test_consistency_of_sigmas_with_the_errors():
    """Errors drawn with the published sigmas: ratio 1 and 95 % within two sigmas; sigmas
    published at half the errors' spread: ratio 2 (overconfident), coverage 68 %; stamps within
    the skipped start or without a sigma are left out."""
    mech = config_mechanism("pendulum")
    tr = simulated("pendulum", duration=6.0)
    truth = TruthSeries(list(mech.joint_names), q=Series(tr.t, tr.q), v=Series(tr.t, tr.v), a=Series(tr.t, tr.a),
                        effort=Series(tr.t, tr.tau))
    rng = np.random.default_rng(3)
    t = np.arange(0.0, 6.0, 0.0025)
    sq, sv = 1e-3, 2e-2
    q = truth.q.hermite(t, truth.v) + sq * rng.standard_normal((t.size, mech.n))
    v = truth.v.hermite(t, truth.a) + sv * rng.standard_normal((t.size, mech.n))
    honest = _estimates(mech, t, q, v, sq, sv)
    honest.std[:100] = np.nan                      # (within the skipped second anyway)
    honest.std[500:600] = np.nan                   # no covariance published there
    c = compare(mech, honest, truth, skip=1.0)
    k = consistency(mech, honest, c)["pivot"]
    assert k.samples == int(c.used.sum()) - 100
    assert k.position_ratio == pytest.approx(1.0, abs=0.05) and k.velocity_ratio == pytest.approx(1.0, abs=0.05)
    assert k.position_coverage == pytest.approx(0.954, abs=0.02) and k.velocity_coverage == pytest.approx(0.954, abs=0.02)
    proud = _estimates(mech, t, q, v, sq / 2, sv / 2)
    k = consistency(mech, proud, compare(mech, proud, truth, skip=1.0))["pivot"]
    assert k.position_ratio == pytest.approx(2.0, abs=0.1) and k.velocity_ratio == pytest.approx(2.0, abs=0.1)
    assert k.position_coverage == pytest.approx(0.683, abs=0.03)
    none = _estimates(mech, t, q, v, np.nan, np.nan)
    assert consistency(mech, none, compare(mech, none, truth, skip=1.0)) is None
