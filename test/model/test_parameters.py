"""The identifiable parameters of a rig and the sensor calibration the config now holds: the
symbolic and the numeric sensor models agree with a calibrated config (values and Jacobians),
the calibration fields parse and refuse what is impossible, the simulator reads with them, and
the parameter list names what a rig has."""
from __future__ import annotations

import dataclasses

import casadi as ca
import numpy as np
import pytest
import yaml

from support.simulations import config_mechanism
from test_symbolic import _check
from mbfg_ros.errors import ConfigError
from mbfg_ros.model.config import parse_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.parameters import GROUPS, INERTIAL, model_parameters
from mbfg_ros.model.symbolic import SymbolicMechanism, function
from mbfg_ros.sensors.base import StateParts
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize_series


def calibrated(name: str = "spatial_rsur") -> Mechanism:
    """The rig with every sensor calibrated away from 1 and 0."""
    cfg = config_mechanism(name).config
    s = cfg.sensors
    sensors = dataclasses.replace(
        s, encoders=tuple(dataclasses.replace(e, offset=0.02) for e in s.encoders),
        gyros=tuple(dataclasses.replace(g, scale=(1.01, 0.98, 1.03), bias=(0.01, -0.02, 0.005)) for g in s.gyros),
        load_cells=tuple(dataclasses.replace(c, scale=1.05, offset=2.0) for c in s.load_cells))
    return Mechanism(dataclasses.replace(cfg, sensors=sensors))


def test_the_calibration_is_in_the_symbolic_and_the_numeric_model():
    mech = calibrated()
    assert mech.gyros and mech.load_cells and mech.encoders
    _check(mech)                                       # gyros and load cells, values and Jacobians
    # each sensor's symbolic residual vanishes at its numeric (calibrated) reading
    sym = SymbolicMechanism(mech)
    q, v, a, tau = (ca.SX.sym(s, mech.n) for s in ("q", "v", "a", "tau"))
    lam, u = ca.SX.sym("lam", mech.m), ca.SX.sym("u", mech.n_u)
    z = StateParts(q, v, a, lam, u, ca.SX(0, 1), 1.0, 1.0)
    rng = np.random.default_rng(3)
    d = mech.create_data()
    qn, vn, an = (0.3 * rng.standard_normal(mech.n) for _ in range(3))
    ln, un, tn = rng.standard_normal(mech.m), rng.standard_normal(mech.n_u), rng.standard_normal(mech.n)
    for s in mech.sensors:
        y = ca.SX.sym("y", s.dim)
        f = function("r", [q, v, a, lam, u, tau, y], [s.residual(sym, z, y, tau, None)])
        yn = s.value(mech, d, qn, vn, an, ln, un, tn)
        assert np.abs(np.array(f(qn, vn, an, ln, un, tn, yn))).max() < 1e-9, s.name
    e = mech.encoders[0]
    assert e.value(mech, d, qn)[0] == pytest.approx(qn[e.index] + 0.02, abs=1e-15)


def test_the_simulator_reads_with_the_calibration():
    mech = calibrated()
    plain = config_mechanism("spatial_rsur")
    tr = simulate(plain.config, Scenario(duration=0.2))
    off = {s.channel.name: s for s in synthesize_series(tr, SensorOptions(noise=False, quantize=False), mech)}
    on = {s.channel.name: s for s in synthesize_series(tr, SensorOptions(noise=False, quantize=False), plain)}
    for e in mech.encoders:
        name = e.config.name
        assert np.allclose(off[name].value, on[name].value + 0.02, atol=1e-12)
    for g in mech.gyros:
        name = g.config.name
        assert np.allclose(off[name].value, np.array([1.01, 0.98, 1.03]) * on[name].value + [0.01, -0.02, 0.005],
                           atol=1e-12)
    for c in mech.load_cells:
        name = c.config.name
        assert np.allclose(off[name].value, 1.05 * on[name].value + 2.0, atol=1e-9)


def _rig(sensors: str) -> dict:
    return yaml.safe_load(f"""
mechanism: {{urdf: {config_mechanism('pendulum').config.urdf}, gravity: [0, -9.81, 0]}}
sensors:
{sensors}
""")


def test_calibration_fields_parse_and_refuse_impossible_values():
    cfg = parse_rig_config(_rig("""  encoders: [{name: e, joint: pivot, noise: 0.001, topic: enc, offset: -0.03}]
  gyros: [{name: g, frame: rod, noise: 0.01, topic: imu, scale: 1.02, bias: [0.1, 0.2, 0.3]}]
"""))
    assert cfg.sensors.encoders[0].offset == -0.03
    assert cfg.sensors.gyros[0].scale == (1.02, 1.02, 1.02) and cfg.sensors.gyros[0].bias == (0.1, 0.2, 0.3)
    with pytest.raises(ConfigError, match=r"sensors.gyros\[0\].scale.*from 0.001 to 1000"):
        parse_rig_config(_rig("  gyros: [{name: g, frame: rod, noise: 0.01, topic: imu, scale: [1, 0, 1]}]"))
    with pytest.raises(ConfigError, match=r"bias.*list of 3 numbers"):
        parse_rig_config(_rig("  gyros: [{name: g, frame: rod, noise: 0.01, topic: imu, bias: 0.1}]"))


def test_the_pendulums_parameters():
    mech = config_mechanism("pendulum")
    params = model_parameters(mech)
    names = [p.name for p in params]
    assert names == ([f"rod.{f}" for f in INERTIAL] + ["pivot.viscous", "pivot.coulomb", "pivot.armature",
                                                         "pivot.offset", "pivot_encoder.offset"])
    value = {p.name: p.nominal for p in params}
    assert value["rod.mass"] == pytest.approx(2.0) and value["rod.mx"] == pytest.approx(1.0)
    assert value["rod.izz"] == pytest.approx(2.0 / 3.0) and value["pivot.viscous"] == 0.05
    assert [p.group for p in params] == sorted((p.group for p in params), key=GROUPS.index)
    with pytest.raises(ConfigError, match="unknown parameter group 'masses'"):
        model_parameters(mech, ("masses",))


def test_every_sensor_but_the_first_encoder_has_a_time_offset():
    """The timing group: one ``time_offset`` (s) per sensor but the reference (the first encoder;
    the first sensor on a rig without encoders), its config value the nominal; a single-sensor
    rig has none."""
    mech = config_mechanism("spatial_rsur")
    cfg = mech.config
    gyros = tuple(dataclasses.replace(g, time_offset=0.002) for g in cfg.sensors.gyros)
    mech = Mechanism(dataclasses.replace(cfg, sensors=dataclasses.replace(cfg.sensors, gyros=gyros)))
    params = model_parameters(mech, ("timing",))
    assert [(p.name, p.nominal, p.unit) for p in params] == [("coupler_gyro.time_offset", 0.002, "s"),
                                                             ("coupler_axial.time_offset", 0.0, "s")]
    assert [p.group for p in model_parameters(mech)][-2:] == ["timing", "timing"]
    assert model_parameters(config_mechanism("pendulum"), ("timing",)) == []
    gyro_only = [p.name for p in model_parameters(config_mechanism("four_bar_gyro"), ("timing",))]
    assert gyro_only == []                   # (its one sensor, the gyro, is the reference)
