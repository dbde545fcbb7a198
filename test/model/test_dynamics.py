"""Dynamics against closed-form cases and against pinocchio's own forward dynamics."""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest

from conftest import ROOT
from mbfg_ros.model.assembly import initial_state, solve_velocity
from mbfg_ros.model.mechanism import Mechanism, load_mechanism


@pytest.fixture(scope="module")
def pendulum():
    return load_mechanism(ROOT / "test" / "fixtures" / "pendulum.yaml")


def test_pendulum_closed_form(pendulum):
    """M = m L^2 / 3, G = m g (L / 2) cos(theta), friction c v, unknown input on the pivot."""
    d = pendulum.create_data()
    m, L, g, c = 2.0, 1.0, 9.81, 0.05
    for th, w, al, u in ((0.3, 1.2, -0.7, 0.4), (-2.0, 0.0, 3.0, -1.0)):
        e = pendulum.inverse_dynamics(d, np.array([th]), np.array([w]), np.array([al]), u=np.array([u]))
        expected = m * L ** 2 / 3 * al + m * g * L / 2 * math.cos(th) + c * w - u
        assert e.r[0] == pytest.approx(expected, rel=1e-10)
        assert e.r_a[0, 0] == pytest.approx(m * L ** 2 / 3, rel=1e-12)
        assert e.r_s[0] == pytest.approx(m * g * L / 2 * math.cos(th), rel=1e-10)


def test_pendulum_closed_form_with_armature_and_offset(pendulum):
    """The drive model: armature J_r adds to the inertia about the pivot (M = m L^2 / 3 + J_r,
    pinocchio's model.armature), the offset o to the effort the input needs."""
    import dataclasses
    cfg = pendulum.config
    joint = dataclasses.replace(cfg.joint("pivot"), armature=0.25, offset=-0.3, coulomb=0.2, coulomb_velocity=0.05)
    mech = Mechanism(dataclasses.replace(cfg, joints={"pivot": joint}))
    d = mech.create_data()
    m, L, g, c = 2.0, 1.0, 9.81, 0.05
    for th, w, al, u in ((0.3, 1.2, -0.7, 0.4), (-2.0, 0.01, 3.0, -1.0)):
        e = mech.inverse_dynamics(d, np.array([th]), np.array([w]), np.array([al]), u=np.array([u]))
        expected = ((m * L ** 2 / 3 + 0.25) * al + m * g * L / 2 * math.cos(th) + c * w
                    + 0.2 * math.tanh(w / 0.05) - 0.3 - u)
        assert e.r[0] == pytest.approx(expected, rel=1e-10)
        assert e.r_a[0, 0] == pytest.approx(m * L ** 2 / 3 + 0.25, rel=1e-12)
        a, _ = mech.forward_dynamics(d, np.array([th]), np.array([w]), u=np.array([u]))
        assert a[0] == pytest.approx(al - expected / (m * L ** 2 / 3 + 0.25), rel=1e-10)
    assert mech.mass_matrix(d, np.array([0.7]))[0, 0] == pytest.approx(m * L ** 2 / 3 + 0.25, rel=1e-12)


def test_mass_matrix_symmetric_positive_definite(example):
    d = example.create_data()
    rng = np.random.default_rng(3)
    q0, _ = initial_state(example, d)
    for q in (q0, rng.uniform(-3, 3, example.n)):
        M = example.mass_matrix(d, q)
        np.testing.assert_allclose(M, M.T, atol=1e-12)
        assert np.linalg.eigvalsh(M)[0] > 0


def test_inverse_dynamics_vanishes_at_forward_dynamics_accelerations(example):
    d = example.create_data()
    q, _ = initial_state(example, d)
    v = solve_velocity(example, d, q, np.linspace(0.5, -0.8, len(example.dof)))
    tau = np.zeros(example.n)
    for name in example.known_input_joints:
        tau[example.index[name]] = 0.3
    u = np.full(example.n_u, -0.2)
    a, lam = example.forward_dynamics(d, q, v, tau, u)
    r = example.inverse_dynamics(d, q, v, a, lam, tau, u).r
    assert np.max(np.abs(r)) < 1e-9 * max(1.0, np.max(np.abs(example.mass_matrix(d, q) @ a)))
    e = example.closures(d, q, v, a)
    assert np.max(np.abs(e.phidd)) < 1e-9


def test_open_chain_forward_dynamics_matches_pinocchio_aba(pendulum):
    d = pendulum.create_data()
    q, v, u = np.array([0.4]), np.array([-1.5]), np.array([0.7])
    a, lam = pendulum.forward_dynamics(d, q, v, u=u)
    friction = pendulum.friction(v)[0]
    ref = pin.aba(pendulum.model, pendulum.model.createData(), q, v, u - friction)
    np.testing.assert_allclose(a, ref, atol=1e-12)
    assert lam.size == 0


def test_constraint_forces_balance_a_static_four_bar(four_bar):
    """At rest the closure reaction plus gravity give zero net effort on each coordinate."""
    d = four_bar.create_data()
    q, v = initial_state(four_bar, d)
    a, lam = four_bar.forward_dynamics(d, q, v)
    f, t = four_bar.closure_wrench(d, 0, q, lam)
    # the rocker (body of frame_b) under its weight and the pin force: moment balance about B
    rocker_tip = four_bar.frame_placement(d, q, four_bar.frame_id("rocker_tip")).translation
    B = np.array([10.0, 0.0, 0.0])
    com = B + (rocker_tip - B) / 2
    weight = np.array([0.0, 0.0, -9.81 * 5.0])          # REP 103: z up
    I_B = 5.0 * 25.0 / 3.0
    alpha = a[four_bar.index["rocker_joint"]]
    axis = np.array([0.0, -1.0, 0.0])      # the joint axes (z of motion_plane) in the world
    moment = (np.cross(rocker_tip - B, f) + np.cross(com - B, weight)) @ axis
    assert moment == pytest.approx(I_B * alpha, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(t, 0.0, atol=1e-12)


def test_mass_scale_scales_the_link_inertia(pendulum):
    from mbfg_ros.model.mechanism import Mechanism
    heavy = Mechanism(pendulum.config, mass_scale={"rod": 2.0})
    q = np.array([0.3])
    M1 = pendulum.mass_matrix(pendulum.create_data(), q)
    M2 = heavy.mass_matrix(heavy.create_data(), q)
    np.testing.assert_allclose(M2, 2.0 * M1, rtol=1e-12)


def test_estimated_mass_scale_derivative_is_the_link_contribution(four_bar):
    """d r / d mass_scale of the coupler equals the coupler's own inverse dynamics."""
    import dataclasses
    from mbfg_ros.model.mechanism import Mechanism
    cfg = dataclasses.replace(four_bar.config, estimator=dataclasses.replace(
        four_bar.config.estimator, estimate_mass_link="coupler"))
    mech = Mechanism(cfg)
    d = mech.create_data()
    q, v, a = np.array([0.4, -0.3, 1.2]), np.array([0.5, -1.0, 0.2]), np.array([1.0, 2.0, -1.0])
    e = mech.inverse_dynamics(d, q, v, a)
    heavier = Mechanism(four_bar.config, mass_scale={"coupler": 1.5})
    r_heavy = heavier.inverse_dynamics(heavier.create_data(), q, v, a).r
    np.testing.assert_allclose(r_heavy - e.r, 0.5 * e.r_mass, atol=1e-9)
    assert np.max(np.abs(e.r_mass)) > 1.0
