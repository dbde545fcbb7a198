"""The recorded-torque scoring and its inverse-dynamics baselines: Savitzky-Golay derivatives on
real (jittered) stamps, the model's inverse dynamics with its drive model, the normalised RMSE."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import savgol_coeffs

from conftest import CONFIG
from mbfg_ros.benchmark.effort_scoring import inverse_dynamics_effort, normalised_rmse, savgol_derivatives
from mbfg_ros.model.mechanism import load_mechanism


@pytest.mark.parametrize("causal", [True, False])
def test_savgol_is_exact_on_a_quadratic_at_jittered_stamps(causal):
    rng = np.random.default_rng(0)
    t = np.arange(200) * 0.002 + rng.normal(0.0, 2e-4, 200)
    q = np.column_stack([1.0 + 2.0 * t - 3.0 * t ** 2, -0.5 * t ** 2])
    m = savgol_derivatives(t, q, window=31, causal=causal)
    ok = np.isfinite(m.a[:, 0])
    first = 30 if causal else 15                        # the window ends at, or is centred on, the sample
    assert ok.sum() == 170 and ok[first] and not ok[first - 1]
    np.testing.assert_allclose(m.q[ok], q[ok], atol=1e-10)
    np.testing.assert_allclose(m.v[ok, 0], 2.0 - 6.0 * t[ok], atol=1e-8)
    np.testing.assert_allclose(m.a[ok], np.tile([-6.0, -1.0], (ok.sum(), 1)), atol=1e-6)


@pytest.mark.parametrize("causal, deriv", [(True, 1), (True, 2), (False, 1), (False, 2)])
def test_savgol_on_uniform_stamps_is_scipys(causal, deriv):
    dt, w = 0.002, 25 if causal else 31
    t = np.arange(120) * dt
    q = np.sin(7.0 * t) + 0.3 * np.cos(19.0 * t)
    m = savgol_derivatives(t, q, window=w, causal=causal)
    k = 80
    pos = w - 1 if causal else w // 2
    c = savgol_coeffs(w, 2, deriv=deriv, delta=dt, pos=pos, use="dot")
    expected = c @ q[k - pos:k - pos + w]
    assert (m.v if deriv == 1 else m.a)[k] == pytest.approx(expected, rel=1e-7, abs=1e-9)


def test_inverse_dynamics_effort_is_the_models_with_its_drive():
    mech = load_mechanism(CONFIG / "double_pendulum.yaml")
    rng = np.random.default_rng(1)
    q, v, a = rng.normal(size=(3, 5, 2))
    got = inverse_dynamics_effort(mech, q, v, a)
    d = mech.create_data()
    for i in range(5):
        np.testing.assert_allclose(got[i], mech.inverse_dynamics(d, q[i], v[i], a[i]).r, rtol=1e-12, atol=1e-12)
    q[2, 0] = np.nan
    assert np.isnan(inverse_dynamics_effort(mech, q, v, a)[2]).all()


def test_normalised_rmse():
    x = np.array([[1.0, -2.0], [3.0, 2.0], [np.nan, 1.0]])
    np.testing.assert_allclose(normalised_rmse(np.zeros_like(x), x), [1.0, 1.0])
    np.testing.assert_allclose(normalised_rmse(x, x), [0.0, 0.0])
    np.testing.assert_allclose(normalised_rmse(2 * x, x), [1.0, 1.0])
