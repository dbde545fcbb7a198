"""The accelerometer kind: its numeric model against the closed form of a rod pendulum and against
finite differences of the frame's position, its symbolic model against the numeric one, its
config section (a shared Imu topic needs one rate and one frame_id)."""
from __future__ import annotations

import dataclasses
import math

import casadi as ca
import numpy as np
import pinocchio as pin
import pytest
import yaml

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.model.config import AccelerometerConfig, parse_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.symbolic import SymbolicMechanism, function
from support.simulations import PENDULUM, config_mechanism, config_path

G = 9.81


def _pendulum(length: float, rpy=(0.0, 0.0, 0.0), axes=("x", "y", "z")) -> Mechanism:
    """The test pendulum (a rod about z, gravity -y) with an accelerometer ``length`` m along it."""
    data = yaml.safe_load(PENDULUM.read_text())
    data["frames"] = [{"name": "tip", "parent": "rod", "xyz": [length, 0.0, 0.0]}]
    data["sensors"]["accelerometers"] = [{"name": "tip_acc", "frame": "tip", "noise": 0.01, "topic": "imu",
                                          "rotation_rpy": list(rpy), "axes": list(axes)}]
    return Mechanism(parse_rig_config(data, source=PENDULUM))


def test_specific_force_of_a_rod_pendulum():
    """At angle th, rate w, acceleration al, a point L along the rod reads, in the rod's frame,
    (-L w^2 + g sin th, L al + g cos th, 0): centripetal, tangential, minus gravity (at rest it
    reads +g upwards)."""
    L = 0.7
    mech = _pendulum(L)
    acc = mech.sensors_of("accelerometer")[0]
    d = mech.create_data()
    for th, w, al in ((0.3, 0.0, 0.0), (1.2, 2.5, -4.0), (-2.0, -1.5, 7.0)):
        y = acc.value(mech, d, np.array([th]), np.array([w]), np.array([al]))
        expect = [-L * w * w + G * math.sin(th), L * al + G * math.cos(th), 0.0]
        np.testing.assert_allclose(y, expect, atol=1e-12)
    # the mount's rotation: the sensor's x along the rod's y
    turned = _pendulum(L, rpy=(0.0, 0.0, math.pi / 2), axes=("x",))
    t = turned.sensors_of("accelerometer")[0]
    y = t.value(turned, turned.create_data(), np.array([1.2]), np.array([2.5]), np.array([-4.0]))
    assert t.measured(y) == pytest.approx([L * -4.0 + G * math.cos(1.2)], abs=1e-12)
    assert acc.unit(mech) == "m/s^2" and acc.residual_rows == 3 and t.residual_rows == 1


def test_value_is_the_second_derivative_of_the_frame_position():
    """Along q(t) = q0 + v t + a t^2 / 2 the model is R^T (d^2 p / dt^2 - g) in the sensor frame,
    with d^2p/dt^2 a central difference of pinocchio's frame placement (an arm, a turned mount)."""
    base = config_mechanism("arm6").config
    acc = AccelerometerConfig("flange_acc", "flange", 0.01, "imu", rotation_rpy=(0.3, -0.5, 1.1))
    mech = Mechanism(dataclasses.replace(base, sensors=dataclasses.replace(base.sensors, accelerometers=(acc,))))
    model = mech.sensors_of("accelerometer")[0]
    d = mech.create_data()
    rng = np.random.default_rng(4)
    for _ in range(3):
        q0, v, a = rng.standard_normal(mech.n), rng.standard_normal(mech.n), rng.standard_normal(mech.n)

        def position(t):
            data = mech.model.createData()
            pin.framesForwardKinematics(mech.model, data, q0 + v * t + 0.5 * a * t * t)
            return data.oMf[model.frame_id].translation.copy(), data.oMf[model.frame_id].rotation.copy()
        h = 1e-4
        p_dd = (position(h)[0] - 2 * position(0.0)[0] + position(-h)[0]) / (h * h)
        R = position(0.0)[1]
        expect = model.R_mount.T @ R.T @ (p_dd - mech.gravity)
        np.testing.assert_allclose(model.value(mech, d, q0, v, a), expect, atol=2e-5)


@pytest.mark.parametrize("rig", ["four_bar_imu", "arm6_acc"])
def test_symbolic_equals_numeric(rig):
    if rig == "arm6_acc":
        base = config_mechanism("arm6").config
        acc = AccelerometerConfig("flange_acc", "flange", 0.01, "imu", rotation_rpy=(0.3, -0.5, 1.1), axes=("x", "z"))
        mech = Mechanism(dataclasses.replace(base, sensors=dataclasses.replace(base.sensors, accelerometers=(acc,))))
    else:
        mech = config_mechanism(rig)
    model = mech.sensors_of("accelerometer")[0]
    sym = SymbolicMechanism(mech)
    n = mech.n
    q, v, a, s = ca.SX.sym("q", n), ca.SX.sym("v", n), ca.SX.sym("a", n), ca.SX.sym("s")
    f = function("acc", [q, v, a, s], [model.symbolic(sym, q, v, a, s)])
    d = mech.create_data()
    rng = np.random.default_rng(7)
    for scale in (1.0, 0.8):
        qn, vn, an = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
        got = np.array(f(qn, vn, an, scale)).ravel()
        np.testing.assert_allclose(got, model.measured(model.value(mech, d, qn, vn, an, gravity_scale=scale)),
                                   rtol=1e-10, atol=1e-10)


def test_imu_state_at_rest_reads_gravity_up():
    """The four-bar's IMU at its initial pose, at rest: |specific force| = g, in the plane."""
    mech = config_mechanism("four_bar_imu")
    acc = mech.sensors_of("accelerometer")[0]
    d = mech.create_data()
    q, _ = initial_state(mech, d)
    y = acc.value(mech, d, q, np.zeros(mech.n), np.zeros(mech.n))
    assert np.linalg.norm(y) == pytest.approx(G, rel=1e-12) and abs(y[2]) < 1e-12


def _with(change) -> dict:
    data = yaml.safe_load(config_path("four_bar_imu").read_text())
    change(data)
    return data


@pytest.mark.parametrize("change,field,reason", [
    (lambda d: d["sensors"]["accelerometers"][0].update(rate=200.0), "sensors.accelerometers[0].topic",
     "same rate"),
    (lambda d: d["sensors"]["accelerometers"][0].update(frame_id="acc"), "sensors.accelerometers[0].topic",
     "same frame_id"),
    (lambda d: d["sensors"]["accelerometers"].append(dict(d["sensors"]["accelerometers"][0], name="second")),
     "sensors.accelerometers[1].topic", "two accelerometers publish on coupler/imu"),
    (lambda d: d["sensors"]["accelerometers"][0].update(frame="copler"), "sensors.accelerometers[0].frame",
     "did you mean 'coupler'"),
    (lambda d: d["sensors"]["accelerometers"][0].update(axes=["x", "w"]), "sensors.accelerometers[0].axes",
     "x, y, z"),
])
def test_config_errors_name_the_field(change, field, reason):
    source = config_path("four_bar_imu")
    with pytest.raises(ConfigError) as err:
        Mechanism(parse_rig_config(_with(change), source=source))
    assert err.value.field == field and reason in str(err.value), str(err.value)
