"""The simulator's lean dynamics agree with the model's forward dynamics."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import EXAMPLES, mechanism
from support.simulations import config_mechanism
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.sim.constrained_dynamics import ConstrainedDynamics


@pytest.mark.parametrize("name", EXAMPLES + ["pendulum"])
def test_accelerations_and_multipliers_match_the_model(name):
    mech = config_mechanism(name) if name == "pendulum" else mechanism(name)
    d = mech.create_data()
    dyn = ConstrainedDynamics(mech)
    rng = np.random.default_rng(3)
    q0, _ = initial_state(mech, d)
    for _ in range(5):
        q, v, _ = dyn.project(q0 + 0.05 * rng.standard_normal(mech.n), rng.standard_normal(mech.n))
        tau = rng.standard_normal(mech.n)
        u = rng.standard_normal(mech.n_u)
        a_ref, lam_ref = mech.forward_dynamics(d, q, v, tau, u)
        a, lam = dyn.accelerations(q, v, tau, u)
        scale = max(1.0, np.max(np.abs(a_ref)))
        np.testing.assert_allclose(a, a_ref, atol=1e-10 * scale)
        np.testing.assert_allclose(lam, lam_ref, atol=1e-9 * max(1.0, np.max(np.abs(lam_ref), initial=0.0)))
        # the constrained accelerations satisfy the closure rows at acceleration level
        e = mech.closures(d, q, v, a)
        assert np.max(np.abs(e.phidd), initial=0.0) < 1e-9 * scale


def test_projection_lands_on_both_manifolds():
    mech = mechanism("spatial_rsur")
    d = mech.create_data()
    dyn = ConstrainedDynamics(mech)
    q0, _ = initial_state(mech, d)
    q, v, res = dyn.project(q0 + 1e-3, np.ones(mech.n))
    phi, J = mech.closure_position(d, q)
    assert res < 1e-13 and np.max(np.abs(phi)) < 1e-13
    assert np.max(np.abs(J @ v)) < 1e-12
    assert np.linalg.norm(q - q0) < 1e-2


def test_baumgarte_pulls_a_drifted_state_back():
    mech = mechanism("four_bar")
    d = mech.create_data()
    q0, v0 = initial_state(mech, d)
    q = q0 + np.array([0.0, 1e-6, 0.0])
    a0, _ = ConstrainedDynamics(mech, baumgarte=0.0).accelerations(q, v0)
    a1, _ = ConstrainedDynamics(mech, baumgarte=10.0).accelerations(q, v0)
    phi, J = mech.closure_position(d, q)
    # Phi'' + 2 w Phi' + w^2 Phi = 0 with Phi' = 0: the correction is J (a1 - a0) = -w^2 Phi
    np.testing.assert_allclose(J @ (a1 - a0), -100.0 * phi, atol=1e-10)
