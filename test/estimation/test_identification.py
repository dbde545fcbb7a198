"""`mbfg identify`'s solver against the simulator: a pendulum whose truth differs from its config
in every parameter group it has (the rod 10 % heavier, friction, armature, a torque offset, an
encoder 0.01 rad off) gives every identifiable parameter back within 3 standard deviations and
5 %, and names the ones it cannot identify; the parameters' Jacobian of the step function
against finite differences; the base-parameter search on known information matrices."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from support.identification_rigs import MASS_FACTOR, readings, truth_trajectory, write_configs
from support.simulations import config_mechanism
from mbfg_ros.estimation.identification import (COMBINATION_NOTE, NO_INFORMATION_NOTE, IdentificationError,
                                                 IdentificationOptions, Identifier, base_parameters,
                                                 default_groups, identify)
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.step_function import StepFunction
from mbfg_ros.model.config import JointConfig, LoadCellConfig, RobustLossConfig, load_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.parameters import DYNAMICS_GROUPS, ParametricMechanism, model_parameters

DURATION = 6.0


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    nominal, truth = write_configs(tmp_path_factory.mktemp("ident"))
    tr = truth_trajectory(truth, DURATION)
    mech = Mechanism(load_rig_config(nominal))
    truth_values = {p.name: p.nominal for p in model_parameters(
        Mechanism(load_rig_config(truth), mass_scale={"rod": MASS_FACTOR}))}
    nominal_values = {p.name: p.nominal for p in model_parameters(mech)}
    return mech, tr, truth_values, nominal_values


@pytest.fixture(scope="module")
def result(pendulum):
    mech, tr, _, _ = pendulum
    return identify(readings(tr), mech)


def combination_truth(p, truth: dict, nominal: dict) -> float:
    """The truth of what an identified parameter stands for."""
    return truth[p.name] + sum(c * (truth[u] - nominal[u]) for u, c in p.combination)


def test_every_identifiable_parameter_within_three_sigma_and_five_percent(pendulum, result):
    _, _, truth, nominal = pendulum
    assert result.converged
    got = {p.name: p for p in result.identified()}
    assert set(got) == {"rod.mx", "rod.my", "rod.izz", "pivot.viscous", "pivot.coulomb", "pivot.offset"}
    for p in got.values():
        t = combination_truth(p, truth, nominal)
        scale = max(abs(t), 0.05 if p.name == "rod.my" else 0.0, 0.3 if p.name == "pivot.offset" else 0.0)
        assert abs(p.value - t) <= 3 * p.sigma, (p.name, p.value, t, p.sigma)
        assert abs(p.value - t) <= 0.05 * scale, (p.name, p.value, t)
    # the first moment 10 % up, the inertia about the hinge with the armature's change in it
    assert got["rod.mx"].value == pytest.approx(1.1, rel=0.01)
    assert got["rod.izz"].combination == [("pivot.armature", pytest.approx(1.0, abs=1e-6))]


def test_the_unidentifiable_parameters_are_named_with_why(result):
    why = {p.name: p.note for p in result.unidentified()}
    assert why["rod.mass"] == NO_INFORMATION_NOTE            # a rotation about a fixed hinge
    assert why["rod.ixx"] == NO_INFORMATION_NOTE
    assert why["pivot.armature"] == COMBINATION_NOTE          # only rod.izz + armature enters
    assert why["pivot_encoder.offset"] == COMBINATION_NOTE    # the same as turning the rod's centre of mass
    for p in result.unidentified():
        assert p.value == p.parameter.nominal and np.isnan(p.sigma)


def test_the_fit_improves_and_the_excitation_is_reported(result):
    before, after = result.before.fits["dynamics:pivot"], result.after.fits["dynamics:pivot"]
    assert after.rms < 0.1 * before.rms
    assert before.effort_rms > 1.0
    assert result.after.fits["pivot_encoder"].whitened_rms == pytest.approx(1.0, abs=0.1)
    assert result.after.excitation[0] > 20


def test_two_recordings_identify_the_shared_parameters(pendulum, result):
    mech, tr, _, _ = pendulum
    halves = [readings(tr, t0=0.0, t1=DURATION / 2), readings(tr, t0=DURATION / 2)]
    two = identify(halves, mech)
    one = {p.name: p for p in result.identified()}
    for p in two.identified():
        assert abs(p.value - one[p.name].value) <= 3 * one[p.name].sigma + 3 * p.sigma, p.name
    assert two.keyframes == pytest.approx(result.keyframes, abs=2)


def test_parameter_jacobian_matches_finite_differences():
    """The step function's sixth output (d rows / d theta) against central differences of its rows,
    on a rig with closures, an encoder, a gyro and a load cell, every parameter group present
    (the gyro's and the load cell's time offsets too; without the robust kernel, whose weight
    the Jacobian holds constant)."""
    mech = config_mechanism("spatial_rsur")
    cfg = dataclasses.replace(mech.config.estimator, robust_loss=RobustLossConfig(type="none"))
    params = model_parameters(mech)
    sym = ParametricMechanism(mech, params, dynamics_weights=True)
    lay = StateLayout.for_mechanism(mech, cfg)
    fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate, sym=sym, native_code=False)
    L = fn.layout
    rng = np.random.default_rng(3)
    x0 = lay.pack(mech.neutral() + 0.1, 0.3 * np.ones(mech.n), np.ones(mech.n))
    x1 = x0 + 0.01 * rng.standard_normal(lay.dim)
    p = L.empty_parameters()
    for b in L.blocks:                                  # one reading per sensor mid-step
        v = b.view(p)
        v[0, 0] = 0.5
        v[0, 1:1 + b.sensor.dim] = 0.2
    theta = 0.01 * rng.standard_normal(L.theta.stop - L.theta.start)
    theta[len(params):] = 1.0 + 0.1 * rng.random(mech.n)        # the dynamics weights
    p[L.theta] = theta
    fn.step(x0, x1, p)
    J = fn.step.Jt_theta.T.copy()
    assert np.isfinite(J).all() and np.abs(J).max() > 0
    timing = [i for i, par in enumerate(params) if par.group == "timing"]
    assert [params[i].owner for i in timing] == ["coupler_gyro", "coupler_axial"]   # (the encoder: the reference)
    for i in timing:                                    # a time offset moves its own sensor's rows only
        b = L.block(params[i].owner)
        assert np.abs(J[b.rows, i]).max() > 0
        assert np.abs(np.delete(J[:, i], np.arange(b.rows.start, b.rows.stop))).max() == 0
    for i in range(theta.size):
        eps = 1e-6 * max(1.0, abs(theta[i]))
        pp, pm = p.copy(), p.copy()
        pp[L.theta.start + i] += eps
        pm[L.theta.start + i] -= eps
        rp = fn.step(x0, x1, pp)[0].copy()
        rm = fn.step(x0, x1, pm)[0].copy()
        fd = (rp - rm) / (2 * eps)
        assert np.allclose(J[:, i], fd, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(fd).max())), i


def test_at_zero_the_parametric_rows_are_the_configs():
    mech = config_mechanism("spatial_rsur")
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    h = 1.0 / cfg.keyframe_rate
    plain = StepFunction(mech, cfg, lay, h, native_code=False)
    param = StepFunction(mech, cfg, lay, h, sym=ParametricMechanism(mech, model_parameters(mech)), native_code=False)
    x0 = lay.pack(mech.neutral() + 0.2, 0.5 * np.ones(mech.n), np.ones(mech.n))
    x1 = x0 + 0.001
    p0, p1 = plain.layout.empty_parameters(), param.layout.empty_parameters()
    assert param.layout.P == plain.layout.P + param.sym.parameter_count
    r0 = plain.step(x0, x1, p0)[0].copy()
    r1 = param.step(x0, x1, p1)[0].copy()
    assert np.allclose(r0, r1, rtol=1e-12, atol=1e-12)


def test_base_parameters_of_known_information_matrices():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 4))
    A = 100 * np.column_stack([A[:, 0], A[:, 1], A[:, 0] + 2 * A[:, 1], np.zeros(50), A[:, 2], 1e3 * A[:, 3]])
    H = A.T @ A
    assert list(base_parameters(H, 1e-6)) == [0, 1, 4, 5]       # the combination and the empty column out
    # a parameter whose standard deviation would exceed 1 % of its scale stays out
    scales = np.array([1.0, 1.0, 1.0, 1.0, 1e-3, 1.0])
    assert list(base_parameters(H, 1e-6, scales)) == [0, 1, 5]


def test_unknown_inputs_leave_the_dynamics_out(pendulum):
    mech = config_mechanism("pendulum")                 # actuation: unknown
    groups, note = default_groups(mech)
    assert not set(groups) & set(DYNAMICS_GROUPS) and "unknown" in note
    assert Identifier(mech).groups == ("encoder",)


def test_an_actuator_load_cell_measures_an_unknown_input():
    base = config_mechanism("four_bar").config       # the crank's effort unknown, a load cell on it
    cells = base.sensors.load_cells + (LoadCellConfig("crank_motor", "actuator", 0.1, "/a", joint="crank_joint"),)
    mech = Mechanism(dataclasses.replace(
        base, joints={**base.joints, "crank_joint": JointConfig("crank_joint", actuation="unknown")},
        sensors=dataclasses.replace(base.sensors, load_cells=cells)))
    groups, note = default_groups(mech)
    assert set(DYNAMICS_GROUPS) <= set(groups) and "load_cell" in groups and note == ""


def test_bad_options_are_refused(pendulum):
    mech = pendulum[0]
    with pytest.raises(IdentificationError, match="no parameter to identify"):
        Identifier(mech, IdentificationOptions(groups=()))
    with pytest.raises(IdentificationError, match="max_iterations"):
        Identifier(mech, IdentificationOptions(max_iterations=0))
    with pytest.raises(IdentificationError, match="model_accuracy"):
        Identifier(mech, IdentificationOptions(model_accuracy=0.0))


def test_a_start_from_the_encoders_takes_their_offset_off():
    """initial_pose: sensors: the start pose is the first reading less the encoder's offset."""
    mech = config_mechanism("pendulum")
    s = mech.config.sensors
    offset = Mechanism(dataclasses.replace(mech.config, sensors=dataclasses.replace(
        s, encoders=tuple(dataclasses.replace(e, offset=0.2) for e in s.encoders))))
    first = {}
    for name, m in (("plain", mech), ("offset", offset)):
        est = Estimator(m, freeze_gc=False)
        est.add_sample(m.encoders[0].config.name, 0.0, [0.5])         # waits for the start
        first[name] = est.inbox.first_dof_values(m, est.measuring)
    assert first["plain"] == pytest.approx([0.5]) and first["offset"] == pytest.approx([0.3])
