"""The truth integrator: energy, closures, a closed-form case, state_at, failures."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import ellipk

from support.simulations import config_mechanism, simulated
from mbfg_ros.errors import MbfgError
from mbfg_ros.sim.forward import IntegratorOptions, simulate
from mbfg_ros.sim.scenario import Scenario


def test_conservative_four_bar_conserves_energy_over_10_s():
    tr = simulated("four_bar", duration=10.0, friction=False)
    E = tr.energy()
    assert tr.t[0] == 0.0 and tr.t[-1] == pytest.approx(10.0) and len(tr.t) == 10001
    assert np.ptp(tr.q[:, 0]) > 1.0                      # it really moves
    drift = np.max(np.abs(E - E[0])) / abs(E[0])
    assert drift < 1e-6, f"relative energy drift {drift:.3g}"
    assert tr.energy_drift() < 1e-6
    assert tr.closure_residual().max() < 1e-8
    assert tr.stats.max_drift < 1e-8                      # the integrator itself, before projection


@pytest.mark.parametrize("name, scenario", [
    ("five_bar", {}),
    ("slider_crank", {"input_profile": "sine", "input_amplitude": 0.2, "input_frequency": 1.0}),
    ("spatial_rsur", {}),
])
def test_closure_residual_stays_below_1e_8(name, scenario):
    tr = simulated(name, duration=10.0, **scenario)
    assert tr.closure_residual().max() < 1e-8
    assert tr.stats.max_drift < 1e-8
    assert np.max(np.ptp(tr.q, axis=0)) > 0.05            # it really moves
    # between grid samples too, and the velocity constraint
    times = np.random.default_rng(1).uniform(0.0, 10.0, 50)
    q, v, *_ = tr.state_at(times)
    mech = tr.mechanism
    d = mech.create_data()
    for qi, vi in zip(q, v):
        phi, J = mech.closure_position(d, qi)
        assert np.max(np.abs(phi)) < 1e-8
        assert np.max(np.abs(J @ vi)) < 1e-8


@pytest.mark.parametrize("amplitude", [0.01, 0.5])
def test_pendulum_period_matches_the_closed_form(amplitude):
    """Uniform rod (1 m, 2 kg) about its end: T = 4 sqrt(I / (m g l)) K(sin^2(theta0 / 2))."""
    tr = simulated("pendulum", duration=4.0, friction=False,
                   initial_dof_offset=-math.pi / 2 - 0.1 + amplitude)
    assert tr.q[0, 0] == pytest.approx(-math.pi / 2 + amplitude)
    phi = lambda t: tr.state_at([t])[0][0, 0] + math.pi / 2          # noqa: E731
    grid = tr.q[:, 0] + math.pi / 2
    crossings = []
    for k in np.nonzero(np.sign(grid[:-1]) != np.sign(grid[1:]))[0]:
        crossings.append(brentq(phi, tr.t[k], tr.t[k + 1], xtol=1e-14))
    period = crossings[2] - crossings[0]
    I, mgl = 2.0 / 3.0, 2.0 * 9.81 * 0.5
    exact = 4.0 * math.sqrt(I / mgl) * ellipk(math.sin(amplitude / 2) ** 2)
    assert period == pytest.approx(exact, rel=1e-8)
    small_angle = 2 * math.pi * math.sqrt(I / mgl)           # and its series in the amplitude
    series = 1 + amplitude ** 2 / 16 + 11 * amplitude ** 4 / 3072
    assert abs(period / small_angle - series) < amplitude ** 6 + 1e-10
    assert np.min(grid) == pytest.approx(-amplitude, abs=1e-6)


def test_pendulum_with_armature_has_the_closed_form_period_and_conserves_energy():
    """The rod pendulum whose pivot drives a rotor of reflected inertia J_r (armature): the
    period is that of the inertia I + J_r about the pivot, T = 4 sqrt((I + J_r) / (m g l))
    K(sin^2(theta0 / 2)), and without friction the energy (the rotor's included) is conserved."""
    mech = config_mechanism("pendulum")
    joint = dataclasses.replace(mech.config.joint("pivot"), armature=0.4)
    cfg = dataclasses.replace(mech.config, joints={"pivot": joint})
    amplitude = 0.3
    tr = simulate(cfg, Scenario(duration=4.0, friction=False, initial_dof_offset=-math.pi / 2 - 0.1 + amplitude))
    phi = lambda t: tr.state_at([t])[0][0, 0] + math.pi / 2          # noqa: E731
    grid = tr.q[:, 0] + math.pi / 2
    crossings = [brentq(phi, tr.t[k], tr.t[k + 1], xtol=1e-14)
                 for k in np.nonzero(np.sign(grid[:-1]) != np.sign(grid[1:]))[0]]
    I, mgl = 2.0 / 3.0 + 0.4, 2.0 * 9.81 * 0.5
    exact = 4.0 * math.sqrt(I / mgl) * ellipk(math.sin(amplitude / 2) ** 2)
    assert crossings[2] - crossings[0] == pytest.approx(exact, rel=1e-8)
    assert tr.energy_drift() < 1e-8
    E = tr.energy()
    assert np.max(E) - np.min(E) < 1e-8 * mgl
    T = 0.5 * I * tr.v[:, 0] ** 2                                    # rod and rotor
    assert np.max(np.abs(E - T - mgl * np.sin(tr.q[:, 0]) - (E[0] - T[0] - mgl * math.sin(tr.q[0, 0])))) < 1e-8


def test_offset_shifts_the_pendulums_acceleration_at_rest():
    """A constant offset o acts like friction that never changes sign: at rest
    (I + J_r) a = -m g l cos(theta) - o."""
    mech = config_mechanism("pendulum")
    joint = dataclasses.replace(mech.config.joint("pivot"), armature=0.1, offset=0.8)
    cfg = dataclasses.replace(mech.config, joints={"pivot": joint})
    tr = simulate(cfg, Scenario(duration=0.01, friction=False))
    I, mgl = 2.0 / 3.0 + 0.1, 2.0 * 9.81 * 0.5
    assert tr.a[0, 0] == pytest.approx((-mgl * math.cos(tr.q[0, 0]) - 0.8) / I, rel=1e-9)


def test_state_at_grid_times_gives_the_grid_values():
    tr = simulated("four_bar", duration=10.0, friction=False)
    idx = np.array([0, 1, 137, 5000, 10000])
    q, v, a, lam, tau, u = tr.state_at(tr.t[idx])
    np.testing.assert_array_equal(q, tr.q[idx])
    np.testing.assert_array_equal(v, tr.v[idx])
    np.testing.assert_array_equal(a, tr.a[idx])
    np.testing.assert_array_equal(lam, tr.lam[idx])


def test_state_at_off_grid_is_consistent_with_the_dynamics():
    tr = simulated("four_bar", duration=10.0, friction=False)
    mech = tr.mechanism
    d = mech.create_data()
    times = np.array([0.0004, 3.21234, 9.9995])
    q, v, a, lam, tau, u = tr.state_at(times)
    for i, t in enumerate(times):
        k = int(round(t * 1000))
        dt = t - tr.t[k]
        np.testing.assert_allclose(q[i], tr.q[k] + tr.v[k] * dt + 0.5 * tr.a[k] * dt ** 2, atol=1e-8)
        a_ref, lam_ref = mech.forward_dynamics(d, q[i], v[i])
        np.testing.assert_allclose(a[i], a_ref, atol=1e-9)
        np.testing.assert_allclose(lam[i], lam_ref, atol=1e-7)
    q0, v0, a0, *_ = tr.state_at(times, level=0)
    np.testing.assert_allclose(q0, q, atol=1e-13)
    assert np.all(np.isnan(v0)) and np.all(np.isnan(a0))


def test_state_at_outside_the_run_is_an_error():
    tr = simulated("four_bar", duration=10.0, friction=False)
    with pytest.raises(MbfgError, match="outside the simulated span"):
        tr.state_at([10.5])


def test_output_rate_is_configurable():
    tr = simulate(config_mechanism("pendulum"), Scenario(duration=0.5),
                  options=IntegratorOptions(output_rate=250.0))
    assert len(tr.t) == 126 and tr.t[1] == pytest.approx(0.004)


def test_initial_offset_and_velocity_set_the_truths_start():
    mech = config_mechanism("four_bar")
    tr = simulate(mech, Scenario(duration=0.2, initial_dof_offset=0.1, initial_dof_velocity=(0.5,)))
    assert tr.q[0, mech.dof[0]] == pytest.approx(math.pi / 3 + 0.1)
    assert tr.v[0, mech.dof[0]] == pytest.approx(0.5)
    phi, J = mech.closure_position(mech.create_data(), tr.q[0])
    assert np.max(np.abs(phi)) < 1e-12 and np.max(np.abs(J @ tr.v[0])) < 1e-12
    with pytest.raises(MbfgError, match="needs 1 value"):
        simulate(mech, Scenario(duration=0.1, initial_dof_offset=(0.1, 0.2)))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_diverging_run_is_reported_with_time_and_joints():
    with pytest.raises(MbfgError, match=r"at t = .* s \(pivot="):
        simulate(config_mechanism("pendulum"),
                 Scenario(duration=1.0, input_profile="step", input_amplitude=1e200, input_start=0.0))


def test_redundant_closure_rows_give_the_same_motion(tmp_path):
    """A spatial revolute closure (5 rows) on the planar four-bar: 3 rows are redundant."""
    import yaml
    from conftest import CONFIG
    from mbfg_ros.model.config import parse_rig_config
    from mbfg_ros.model.mechanism import Mechanism
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(CONFIG.parent / "urdf" / "four_bar.urdf")
    doc["closures"][0].update(type="revolute", axis=[0.0, 0.0, 1.0])
    doc["closures"][0].pop("plane_normal", None)
    mech = Mechanism(parse_rig_config(doc, source=tmp_path / "revolute.yaml"))
    assert mech.m == 5
    redundant = simulate(mech, Scenario(duration=1.0, friction=False))
    planar = simulated("four_bar", duration=10.0, friction=False)
    np.testing.assert_allclose(redundant.q, planar.q[:1001], atol=1e-8)
    np.testing.assert_allclose(redundant.a, planar.a[:1001], atol=1e-6)
    assert redundant.closure_residual().max() < 1e-8
    # the reaction force is the same (minimum-norm multipliers leave the redundant rows at 0)
    f, _ = mech.closure_wrench(mech.create_data(), 0, redundant.q[500], redundant.lam[500])
    pm = planar.mechanism
    f_planar, _ = pm.closure_wrench(pm.create_data(), 0, planar.q[500], planar.lam[500])
    np.testing.assert_allclose(f, f_planar, atol=1e-6)


def test_forward_simulator_advances_in_chunks_like_a_live_rig():
    from mbfg_ros.sim.forward import ForwardSimulator
    mech = config_mechanism("four_bar")
    sim = ForwardSimulator(mech, Scenario(duration=1.0, friction=False))
    sim.advance_to(0.25)
    sim.advance_to(1.0)
    q, v, a, lam, tau, u, res = sim.state_at(np.array([0.1, 0.6, 1.0]))
    ref = simulated("four_bar", duration=10.0, friction=False)
    np.testing.assert_allclose(q, ref.q[[100, 600, 1000]], atol=1e-8)
    assert res.max() < 1e-12
    with pytest.raises(MbfgError, match="ends at 1 s"):
        sim.advance_to(2.0)
