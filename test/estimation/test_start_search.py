"""Start hypotheses: the DOF velocities a hypothesis starts at come from the first gyro readings,
on every axis the gyro measures."""
from __future__ import annotations

import dataclasses

import numpy as np

from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.sensor_streams import SensorStream
from mbfg_ros.estimation.start_search import StartSearch
from mbfg_ros.model.assembly import initial_state, solve_velocity
from mbfg_ros.model.mechanism import Mechanism
from support.simulations import config_mechanism


def test_velocities_from_a_three_axis_gyro():
    """spatial_rsur with its 3-axis coupler gyro alone: noise-free readings at the true motion
    give back the true DOF velocity (every axis enters the least squares; the prior is loose)."""
    base = config_mechanism("spatial_rsur").config
    cfg = dataclasses.replace(base, sensors=dataclasses.replace(base.sensors, encoders=(), load_cells=()),
                              estimator=dataclasses.replace(base.estimator, native_code="off"))
    mech = Mechanism(cfg)
    gyro = mech.gyros[0]
    assert list(gyro.rows) == [0, 1, 2]
    search = StartSearch(Estimator(mech, freeze_gc=False))
    d = mech.create_data()
    q, _ = initial_state(mech, d)
    v = solve_velocity(mech, d, q, np.array([1.7]))
    stream = SensorStream(gyro.name, "gyro", 0, 3)
    readings = [(stream, 0.0, gyro.value(mech, d, q, v))]
    got = search._velocities(q, np.zeros(1), np.full(1, 1e6), readings)        # a prior that barely pulls
    np.testing.assert_allclose(got, [1.7], rtol=1e-9)
