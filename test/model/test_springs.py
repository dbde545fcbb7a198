"""The spring-damper force element: its generalised force and exact derivatives against finite
differences, the per-body forces against it, its energy, a mass on a spring in closed form, and
the config's errors."""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
import yaml

from conftest import ROOT
from mbfg_ros.errors import ConfigError
from mbfg_ros.model.config import parse_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.forward import simulate
from support.all_kinds import all_kinds_mechanism
from support.finite_differences import assert_jacobian, jacobian
from support.simulations import config_mechanism, config_path


@pytest.fixture(scope="module")
def all_kinds_springs() -> Mechanism:
    """Two damped springs on a spatial linkage: between two moving bodies and to the ground."""
    return all_kinds_mechanism()


def _states(mech, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, mech.n), rng.standard_normal(mech.n) * 3.0


@pytest.mark.parametrize("rig", ["iftomm/a03_andrews", "all_kinds"])
@pytest.mark.parametrize("seed", [0, 1])
def test_generalized_force_derivatives_match_finite_differences(rig, seed, all_kinds_springs):
    mech = all_kinds_springs if rig == "all_kinds" else config_mechanism(rig)
    d = mech.create_data()
    q, v = _states(mech, seed)
    e = mech.springs.evaluate(d.springs, q, v)
    Q = lambda qq, vv: mech.springs.evaluate(d.springs, qq, vv, derivatives=False).Q  # noqa: E731
    assert_jacobian(e.Q_q, jacobian(lambda x: Q(x, v), q), "dQ/dq")
    assert_jacobian(e.Q_v, jacobian(lambda x: Q(q, x), v), "dQ/dv")
    # the simulator's derivative-free path gives the same force
    np.testing.assert_allclose(mech.springs.generalized_force(mech.model, mech.model.createData(), q, v), e.Q,
                               atol=1e-12 * max(1.0, np.abs(e.Q).max()))


def test_per_body_forces_reproduce_the_generalized_force(all_kinds_springs):
    """The springs' forces applied to the bodies (the joint load cells' external forces) add up
    to Q: rnea(q, v, a, fext) = RNEA(q, v, a) - Q."""
    mech = all_kinds_springs
    d = mech.create_data()
    q, v = _states(mech, 3)
    a = np.zeros(mech.n)
    fext = mech.spring_external_forces(d, q, v)
    with_f = pin.rnea(mech.model, mech.model.createData(), q, v, a, fext)
    without = pin.rnea(mech.model, mech.model.createData(), q, v, a)
    Q = mech.springs.evaluate(d.springs, q, v, derivatives=False).Q
    np.testing.assert_allclose(without - with_f, Q, atol=1e-10)


def test_potential_energy_is_the_work_of_the_stiffness(all_kinds_springs):
    """-dV/dq is the generalised force at rest, and mechanical_energy holds V."""
    mech = all_kinds_springs
    d = mech.create_data()
    q, _ = _states(mech, 4)
    zero = np.zeros(mech.n)
    V = lambda x: mech.springs.potential_energy(mech.model, mech.model.createData(), x)  # noqa: E731
    Q = mech.springs.evaluate(d.springs, q, zero, derivatives=False).Q
    assert_jacobian(-Q, jacobian(V, q), "dV/dq")
    gravity_only = float(pin.computeMechanicalEnergy(mech.model, mech.model.createData(), q, zero))
    assert mech.mechanical_energy(d, q, zero) == pytest.approx(gravity_only + V(q), rel=1e-12)


@pytest.mark.parametrize("damping", [0.0, 4.0])
def test_mass_on_a_spring_matches_the_closed_form(damping, tmp_path):
    """m x'' + c x' + k x = 0 from x0 = 0.1 m at rest: x = x0 e^(-zeta w t) (cos wd t + zeta w /
    wd sin wd t), w = sqrt(k / m) = 10 rad/s, zeta = c / (2 sqrt(k m))."""
    doc = yaml.safe_load(config_path("spring_mass").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "test" / "fixtures" / "spring_mass.urdf")
    doc["springs"][0]["damping"] = damping
    mech = Mechanism(parse_rig_config(doc, source=tmp_path / "spring_mass.yaml"))
    tr = simulate(mech, Scenario(duration=2.0))
    m, k, x0 = 2.0, 200.0, 0.1
    w = math.sqrt(k / m)
    zeta = damping / (2.0 * math.sqrt(k * m))
    wd = w * math.sqrt(1.0 - zeta ** 2)
    t = tr.t
    exact = x0 * np.exp(-zeta * w * t) * (np.cos(wd * t) + zeta * w / wd * np.sin(wd * t))
    np.testing.assert_allclose(tr.q[:, 0], exact, atol=1e-9)
    # the slide's load cell reads the force the block needs: m x'' = the spring's pull, so the
    # wrench the joint transmits is 0 along the slide (the spring acts on the block directly)
    d = mech.create_data()
    y = mech.load_cells[0].evaluate(mech, d, tr.q[700], tr.v[700], tr.a[700], np.zeros(0), derivatives=False)[0]
    assert abs(y) < 1e-9
    # energy: the spring's k x^2 / 2 included; conserved without damping, and with it E(t) - E(0)
    # is what the damper dissipated, c x'^2 integrated (the closed form's)
    E = tr.energy()
    assert E[0] == pytest.approx(0.5 * k * x0 ** 2, rel=1e-12)
    W = tr.work_done()
    if damping == 0.0:
        assert np.max(np.abs(E - E[0])) < 1e-9 * E[0] and not W.any()
    else:
        xd = -x0 * w ** 2 / wd * np.exp(-zeta * w * t) * np.sin(wd * t)
        np.testing.assert_allclose(E, 0.5 * k * exact ** 2 + 0.5 * m * xd ** 2, atol=1e-9 * E[0])
        np.testing.assert_allclose(E - E[0], W, atol=1e-9 * E[0])
    assert tr.energy_drift() < 1e-8


@pytest.mark.parametrize("spring, field, message", [
    ({"frame_b": "anchor"}, "springs[0].frame_b", "same rigid body"),
    ({"frame_b": "nowhere"}, "springs[0].frame_b", "nowhere"),
    ({"stiffness": 0.0, "damping": 0.0}, "springs[0].stiffness", "needs a stiffness or a damping"),
    ({"stiffness": -1.0}, "springs[0].stiffness", "must not be negative"),
    ({"rest_length": "long"}, "springs[0].rest_length", "expected a number"),
    ({"spring_rate": 3.0}, "springs[0]", "spring_rate"),
])
def test_bad_springs_are_named(spring, field, message, tmp_path):
    doc = yaml.safe_load(config_path("spring_mass").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "test" / "fixtures" / "spring_mass.urdf")
    doc["frames"].append({"name": "anchor2", "parent": "world", "xyz": [0.0, 1.0, 0.0]})
    if spring.get("frame_b") == "anchor":
        doc["springs"][0]["frame_a"] = "anchor2"
    doc["springs"][0].update(spring)
    with pytest.raises(ConfigError) as info:
        Mechanism(parse_rig_config(doc, source=tmp_path / "bad.yaml"))
    text = str(info.value)
    assert field in text and message in text, text
