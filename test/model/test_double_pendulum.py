"""The DFKI double pendulum's URDFs and configs reproduce its published plants (model 3.0 of design
C.0, test/fixtures/double_pendulum/model_parameters.yml; models 2.0 and 1.0 of design A.0,
test/fixtures/double_pendulum/design_A.0/): the mass matrix, Coriolis, gravity and friction of
src/python/double_pendulum/model/plant.py, except the rotor coupling -gr Ir that a diagonal
armature cannot hold, and the smooth Coulomb friction's shape."""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
import pytest
import yaml

from conftest import CONFIG, ROOT, load_tool
from mbfg_ros.model.mechanism import load_mechanism

PARAMETERS = ROOT / "test" / "fixtures" / "double_pendulum" / "model_parameters.yml"
RIGS = {  # config: (its URDF, the parameters it is built from)
    "double_pendulum": ("double_pendulum", "test/fixtures/double_pendulum/model_parameters.yml"),
    "double_pendulum_a0": ("double_pendulum_a0",
                           "test/fixtures/double_pendulum/design_A.0/model_2.0/model_parameters.yml"),
    "double_pendulum_a0_model1": ("double_pendulum_a0_model1",
                                  "test/fixtures/double_pendulum/design_A.0/model_1.0/model_parameters.yml"),
}


@pytest.fixture(scope="module")
def generator():
    return load_tool("make_double_pendulum_urdf")


@pytest.fixture(scope="module")
def p():
    return yaml.safe_load(PARAMETERS.read_text())


def published(p, q, v):
    """M, C(q, v) v - G(q) and F(v) of the published plant ("UnderactuatedLecture" formulas)."""
    m1, m2, l1, r1, r2, I1, I2, Ir, gr, g = (p[k] for k in ("m1", "m2", "l1", "r1", "r2", "I1", "I2", "Ir",
                                                             "gr", "g"))
    c2, s2 = math.cos(q[1]), math.sin(q[1])
    m12 = I2 + m2 * l1 * r2 * c2 - gr * Ir
    M = np.array([[I1 + I2 + m2 * l1 ** 2 + 2 * m2 * l1 * r2 * c2 + gr ** 2 * Ir + Ir, m12],
                  [m12, I2 + gr ** 2 * Ir]])
    C = np.array([[-2 * m2 * l1 * r2 * s2 * v[1], -m2 * l1 * r2 * s2 * v[1]], [m2 * l1 * r2 * s2 * v[0], 0.0]])
    G = np.array([-m1 * g * r1 * math.sin(q[0]) - m2 * g * (l1 * math.sin(q[0]) + r2 * math.sin(q[0] + q[1])),
                  -m2 * g * r2 * math.sin(q[0] + q[1])])
    F = np.array([p["b1"] * v[0] + p["cf1"] * math.atan(100 * v[0]), p["b2"] * v[1] + p["cf2"] * math.atan(100 * v[1])])
    return M, C @ v - G, F


@pytest.fixture(scope="module", params=sorted(RIGS))
def rig(request):
    """(config name, its URDF's name, the parameters' path, the parameters, the mechanism)."""
    urdf, source = RIGS[request.param]
    return (request.param, urdf, source, yaml.safe_load((ROOT / source).read_text()),
            load_mechanism(CONFIG / f"{request.param}.yaml"))


def test_the_urdf_is_what_the_generator_writes(generator, rig):
    _, urdf, source, p, _ = rig
    assert (ROOT / "urdf" / f"{urdf}.urdf").read_text() == generator.urdf(p, source)


def test_the_configs_drive_is_the_generators(generator, rig):
    _, _, _, p, mech = rig
    for joint, d in generator.drive(p).items():
        jc = mech.config.joint(joint)
        assert (jc.viscous, jc.coulomb, jc.coulomb_velocity, jc.armature) == pytest.approx(
            (d["viscous"], d["coulomb"], d["coulomb_velocity"], d["armature"]), rel=1e-15)
        assert jc.actuation == "unknown"


def test_the_model_is_the_published_plant(rig):
    _, _, _, p, mech = rig
    rng = np.random.default_rng(0)
    d = mech.create_data()
    coupling = p["gr"] * p["Ir"]
    for _ in range(20):
        q, v = rng.uniform(-4, 4, 2), rng.uniform(-8, 8, 2)
        M, bias, F = published(p, q, v)
        ours = mech.mass_matrix(d, q)
        np.testing.assert_allclose(ours, M + coupling * np.array([[0, 1], [1, 0]]), rtol=1e-12, atol=1e-14)
        h = pin.rnea(mech.model, mech.model.createData(), q, v, np.zeros(2))
        np.testing.assert_allclose(h, bias, rtol=1e-12, atol=1e-12)
        fric = mech.friction(v)[0]                 # tanh saturates faster than atan: cf / (100 |v|) apart
        cf = np.array([p["cf1"], p["cf2"]])
        assert np.all(np.abs(fric - F) <= 1.01 * cf / (100 * np.abs(v)) + 1e-12)
        assert mech.friction(np.array([1e-4, -1e-4]))[0] == pytest.approx(
            [p["b1"] * 1e-4 + p["cf1"] * math.atan(1e-2), -p["b2"] * 1e-4 - p["cf2"] * math.atan(1e-2)], rel=1e-4)


def test_the_published_split_is_kept_in_its_base_parameters(generator, p):
    """The published link 2 has a negative inertia about its centre of mass; the URDF's split
    is consistent and keeps I1 + m2 l1^2, I2, m2 r2 and m1 r1 + m2 l1."""
    assert p["I2"] < p["m2"] * p["r2"] ** 2
    link1, link2 = generator.consistent_links(p)
    assert link1.inertia > 0 and link2.inertia > 0 and link2.com < p["l2"]
    l1 = p["l1"]
    assert link2.inertia + link2.mass * link2.com ** 2 == pytest.approx(p["I2"], rel=1e-12)
    assert link2.mass * link2.com == pytest.approx(p["m2"] * p["r2"], rel=1e-12)
    assert link1.mass * link1.com + link2.mass * l1 == pytest.approx(p["m1"] * p["r1"] + p["m2"] * l1, rel=1e-12)
    assert link1.inertia - p["Ir"] + link1.mass * link1.com ** 2 + link2.mass * l1 ** 2 == pytest.approx(
        p["I1"] + p["m2"] * l1 ** 2, rel=1e-12)
