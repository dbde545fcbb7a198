"""Encoder residuals of multi-turn and single-turn encoders (``multi_turn``), in the compiled
step function, in the simulator's readings and in the config."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from mbfg_ros.estimation.layout import StateLayout
from mbfg_ros.estimation.step_function import StepFunction
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.model.config import RobustLossConfig, parse_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.sensors import SensorOptions, synthesize
from support.simulations import config_mechanism, config_path
import yaml


def _with_multi_turn(multi_turn: bool) -> Mechanism:
    cfg = config_mechanism("four_bar").config
    enc = tuple(dataclasses.replace(e, multi_turn=multi_turn) for e in cfg.sensors.encoders)
    est = dataclasses.replace(cfg.estimator, robust_loss=RobustLossConfig(type="none"))  # rows unweighted
    return Mechanism(dataclasses.replace(cfg, sensors=dataclasses.replace(cfg.sensors, encoders=enc),
                                         estimator=est))


def _encoder_row(mech: Mechanism, offset: float) -> float:
    """The whitened encoder row of a reading ``offset`` rad from the state's angle."""
    cfg = mech.config.estimator
    lay = StateLayout.for_mechanism(mech, cfg)
    fn = StepFunction(mech, cfg, lay, 1.0 / cfg.keyframe_rate, native_code=False)
    q, _ = initial_state(mech, mech.create_data())
    x = lay.pack(q, np.zeros(mech.n), np.zeros(mech.n))
    p = fn.layout.empty_parameters()
    b = fn.layout.block("crank_encoder")
    V = b.view(p)
    V[0, 0] = 1.0
    V[0, 1] = q[b.sensor.model.index] + offset
    r, _, _ = fn.step(x, x, p)
    return float(r[b.rows.start]) * b.sensor.sigma


def test_multi_turn_is_the_default_and_a_whole_turn_is_a_residual():
    assert config_mechanism("four_bar").encoders[0].config.multi_turn
    mech = _with_multi_turn(True)
    assert math.isclose(_encoder_row(mech, 2 * math.pi + 0.01), 2 * math.pi + 0.01, rel_tol=1e-9)


def test_single_turn_encoders_compare_modulo_two_pi():
    mech = _with_multi_turn(False)
    assert math.isclose(_encoder_row(mech, 2 * math.pi + 0.01), 0.01, rel_tol=1e-6)
    assert math.isclose(_encoder_row(mech, -4 * math.pi - 0.02), -0.02, rel_tol=1e-6)


def test_the_simulator_wraps_single_turn_readings_only():
    readings = {}
    for multi in (True, False):
        mech = _with_multi_turn(multi)
        traj = simulate(mech, Scenario(duration=2.0, initial_dof_velocity=(8.0,)))
        samples = synthesize(traj, SensorOptions(noise=False, quantize=False))
        readings[multi] = np.array([s.value[0] for s in samples if s.sensor == "crank_encoder"])
    assert readings[True].max() > math.pi           # the crank swings past pi: a continuous count
    assert readings[False].max() < math.pi and readings[False].min() >= -math.pi
    d = readings[True] - readings[False]
    assert np.allclose(np.round(d / (2 * math.pi)) * 2 * math.pi, d, atol=1e-9)


def test_config_reads_multi_turn():
    data = yaml.safe_load(config_path("four_bar").read_text())
    data["sensors"]["encoders"][0]["multi_turn"] = False
    cfg = parse_rig_config(data, source=config_path("four_bar"))
    assert cfg.sensors.encoders[0].multi_turn is False
