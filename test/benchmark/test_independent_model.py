"""The independent-coordinate model of the Kalman observers: problems and sensor Jacobians."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import mechanism
from support.finite_differences import assert_jacobian, jacobian

from mbfg_ros.benchmark.observers.independent_model import IndependentModel


@pytest.mark.parametrize("name", ["four_bar", "four_bar_gyro", "five_bar", "five_bar_gyro"])
def test_state_satisfies_the_closures_and_the_dynamics(name):
    mech = mechanism(name)
    m = IndependentModel(mech)
    s0 = m.initial()
    z = s0.q[m.dof] + 0.05
    zd = np.linspace(0.3, -0.4, m.g)
    s = m.state(z, zd, s0.q)
    phi, J = mech.closure_position(m.data, s.q)
    assert np.max(np.abs(phi)) < 1e-10
    assert np.max(np.abs(J @ s.v)) < 1e-10
    np.testing.assert_allclose(s.q[m.dof], z)
    np.testing.assert_allclose(s.v[m.dof], zd)
    a, lam = mech.forward_dynamics(m.data, s.q, s.v)
    np.testing.assert_allclose(s.a, a)
    R = m.velocity_matrix(s.q)
    assert np.max(np.abs(J @ R)) < 1e-10
    np.testing.assert_allclose(R @ zd, s.v, atol=1e-12)


@pytest.mark.parametrize("name", ["four_bar", "four_bar_gyro", "five_bar", "five_bar_gyro"])
def test_observation_jacobian_matches_finite_differences(name):
    mech = mechanism(name)
    m = IndependentModel(mech)
    s0 = m.initial()
    names = list(m.channels)
    x0 = np.concatenate([s0.q[m.dof] + 0.1, np.linspace(0.7, -0.3, m.g)])

    def h(x):
        q = m.position(x[:m.g], s0.q)
        return m.measure(names, q, m.velocity(q, x[m.g:]))

    q = m.position(x0[:m.g], s0.q)
    y, H = m.measure_jacobian(names, q, m.velocity(q, x0[m.g:]))
    np.testing.assert_allclose(y, h(x0))
    assert_jacobian(H, jacobian(h, x0), f"{name} dh/d[z, z']", rtol=1e-6)


def test_observation_picks_the_configured_gyro_axes_and_wraps_encoder_angles():
    m = IndependentModel(mechanism("four_bar_gyro"))
    assert m.observation(["coupler_gyro"], [np.array([1.0, 2.0, 3.0])]).tolist() == [3.0]
    e = IndependentModel(mechanism("four_bar"))
    r = e.residual(["crank_encoder"], np.array([np.pi - 0.01]), np.array([-np.pi + 0.01]))
    assert r[0] == pytest.approx(-0.02)
    assert np.diag(e.noise(["crank_encoder"]))[0] == pytest.approx(np.radians(1.0) ** 2)
