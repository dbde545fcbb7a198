"""Scenarios: the truth's modelling errors, input profiles and friction."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import mechanism
from support.simulations import config_mechanism, simulated
from mbfg_ros.errors import MbfgError
from mbfg_ros.sim.input_profiles import InputProfile
from mbfg_ros.sim.scenario import Scenario, truth_mechanism


@pytest.mark.parametrize("error", [1.0, 4.0])
def test_gravity_error_changes_the_truths_gravity_magnitude(error):
    cfg = mechanism("four_bar")
    truth = truth_mechanism(cfg, Scenario(gravity_error=error))
    assert np.linalg.norm(truth.gravity) == pytest.approx(9.81 + error)
    np.testing.assert_allclose(truth.gravity / np.linalg.norm(truth.gravity), [0.0, 0.0, -1.0])
    np.testing.assert_allclose(cfg.gravity, [0.0, 0.0, -9.81])      # the config is untouched


def test_gravity_error_changes_the_motion():
    nominal = simulated("pendulum", duration=1.0, friction=False)
    heavier = simulated("pendulum", duration=1.0, friction=False, gravity_error=4.0)
    d = nominal.mechanism.create_data()
    # the truth obeys its own gravity: the config model's dynamics do not fit it
    a_cfg, _ = config_mechanism("pendulum").forward_dynamics(d, heavier.q[500], heavier.v[500])
    assert abs(a_cfg[0] - heavier.a[500, 0]) > 0.1
    assert not np.allclose(nominal.q, heavier.q)


def test_mass_and_length_errors_change_the_truth():
    cfg = mechanism("four_bar")
    truth = truth_mechanism(cfg, Scenario(mass_scale={"coupler": 1.2}, length_scale={"rocker_joint": 1.01}))
    masses = lambda m: sum(i.mass for i in m.model.inertias)        # noqa: E731
    assert masses(truth) == pytest.approx(masses(cfg) + 0.2 * 8.0)
    jc = truth.model.getJointId("coupler_joint")
    np.testing.assert_allclose(truth.model.inertias[jc].inertia, 1.2 * cfg.model.inertias[jc].inertia)
    np.testing.assert_allclose(truth.model.inertias[jc].lever, cfg.model.inertias[jc].lever)
    jid = truth.model.getJointId("rocker_joint")
    np.testing.assert_allclose(truth.model.jointPlacements[jid].translation, [10.1, 0.0, 0.0])


def test_unknown_names_in_modelling_errors_are_named():
    cfg = mechanism("four_bar")
    with pytest.raises(MbfgError, match=r"mass_scale: unknown link 'coupling' \(known: .*coupler"):
        truth_mechanism(cfg, Scenario(mass_scale={"coupling": 1.1}))
    with pytest.raises(MbfgError, match=r"length_scale: unknown joint 'crank' \(known: crank_joint"):
        truth_mechanism(cfg, Scenario(length_scale={"crank": 1.1}))


def test_scenario_rejects_bad_values():
    with pytest.raises(MbfgError, match="duration"):
        Scenario(duration=0.0)
    with pytest.raises(MbfgError, match="duration"):
        Scenario(duration=-1.0)
    with pytest.raises(MbfgError, match="unknown input profile 'ramp'"):
        Scenario(input_profile="ramp")
    with pytest.raises(MbfgError, match="positive factor"):
        Scenario(mass_scale={"crank": 0.0})
    with pytest.raises(MbfgError, match=r"disturbance must be a standard deviation >= 0 .*-1"):
        Scenario(disturbance=-1.0)
    with pytest.raises(MbfgError, match="disturbance_rate must be a positive rate in Hz"):
        Scenario(disturbance=1.0, disturbance_rate=0.0)


def test_friction_is_the_configs_or_none():
    cfg = mechanism("slider_crank")
    assert cfg.has_friction
    assert truth_mechanism(cfg, Scenario()).has_friction
    assert not truth_mechanism(cfg, Scenario(friction=False)).has_friction


def test_friction_dissipates_energy():
    tr = simulated("slider_crank", duration=3.0)
    E = tr.energy()
    assert E[-1] < E[0] - 0.01 * abs(E[0]) - 1e-3
    assert np.all(np.diff(E) < 1e-9)              # never gains energy without inputs
    lossless = simulated("slider_crank", duration=3.0, friction=False)
    assert lossless.energy_drift() < 1e-6


@pytest.mark.parametrize("profile", ["step", "sine", "random"])
def test_input_profiles_on_known_and_unknown_inputs(profile):
    sc = Scenario(duration=4.0, input_profile=profile, input_amplitude=0.5, input_frequency=2.0,
                  input_start=1.0, seed=5)
    pend = InputProfile(config_mechanism("pendulum"), sc)          # one unknown input
    slider = InputProfile(mechanism("slider_crank"), sc)           # one known input (crank)
    t = np.linspace(0.0, 4.0, 4001)
    tau_p, u = pend.efforts(t)
    tau_s, u_s = slider.efforts(t)
    assert u.shape == (4001, 1) and u_s.shape == (4001, 0) and not np.any(tau_p)
    crank = mechanism("slider_crank").index["crank_joint"]
    assert np.count_nonzero(tau_s[:, [i for i in range(3) if i != crank]]) == 0
    before = t < 1.0
    assert not np.any(u[before]) and not np.any(tau_s[before])
    after = t - 1.0
    if profile == "step":
        np.testing.assert_allclose(u[~before, 0], 0.5)
    elif profile == "sine":
        np.testing.assert_allclose(u[~before, 0], 0.5 * np.sin(2 * math.pi * 2.0 * after[~before]), atol=1e-12)
    else:
        assert 0.2 < np.std(u[~before, 0]) < 1.0
        assert np.max(np.abs(np.diff(u[:, 0]))) < 0.05          # smooth
        u2 = InputProfile(config_mechanism("pendulum"), sc).efforts(t)[1]
        np.testing.assert_array_equal(u, u2)                    # deterministic for a seed
        other = InputProfile(config_mechanism("pendulum"), Scenario(input_profile="random", seed=6))
        assert not np.allclose(other.efforts(t)[1], u)
    np.testing.assert_allclose(tau_s[:, crank], u[:, 0])       # every input joint gets the profile


def test_profile_none_means_zero_inputs():
    tr = simulated("slider_crank", duration=3.0)
    assert not np.any(tr.tau) and tr.u.shape == (len(tr.t), 0)


@pytest.mark.parametrize("name, profile", [("pendulum", "random"), ("slider_crank", "step")])
def test_inputs_act_in_the_truths_dynamics(name, profile):
    tr = simulated(name, duration=2.0, input_profile=profile, input_amplitude=0.3,
                   input_start=0.5, friction=name != "pendulum")
    mech = tr.mechanism
    d = mech.create_data()
    assert np.any(tr.efforts()[-1])
    for k in range(0, len(tr.t), 97):
        r = mech.inverse_dynamics(d, tr.q[k], tr.v[k], tr.a[k], tr.lam[k], tr.tau[k], tr.u[k]).r
        assert np.max(np.abs(r)) < 1e-8


def test_a_disturbance_acts_on_every_joint_and_is_never_published():
    """The unmodelled force (Scenario.disturbance): piecewise constant per joint at its rate,
    felt by the truth's dynamics (the inverse dynamics of the truth leave exactly it), counted in
    the energy balance, absent from the published efforts; reproducible from the seed."""
    sc = dict(duration=2.0, disturbance=0.5, disturbance_rate=50.0, seed=3)
    tr = simulated("four_bar", **sc)
    mech = tr.mechanism
    d = mech.create_data()
    assert not np.any(tr.tau) and not np.any(tr.efforts())          # no sensor publishes it
    profile = InputProfile(mech, Scenario(**sc))
    push = profile.disturbance_at(tr.t)
    for k in range(1, len(tr.t), 7):
        r = mech.inverse_dynamics(d, tr.q[k], tr.v[k], tr.a[k], tr.lam[k], tr.tau[k], tr.u[k]).r
        np.testing.assert_allclose(r, push[k], atol=1e-7)
    draws = profile.disturbance_at(0.01 + np.arange(100) / 50.0)    # one time inside each draw
    assert draws.shape == (100, mech.n) and 0.4 < np.std(draws) < 0.6
    np.testing.assert_array_equal(profile.disturbance_at([0.021, 0.039]), draws[[1, 1]])   # held
    assert tr.energy_drift() < 1e-8                                  # its work is in the balance
    assert np.max(np.abs(tr.q - simulated("four_bar", duration=2.0, seed=3).q)) > 1e-3
    np.testing.assert_array_equal(InputProfile(mech, Scenario(**sc)).disturbance_at(tr.t), push)
    assert not np.any(InputProfile(mech, Scenario(duration=2.0)).disturbance_at(tr.t))
