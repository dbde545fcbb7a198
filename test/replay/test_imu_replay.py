"""The four-bar with an IMU on its coupler (config/four_bar_imu.yaml: a gyro and an accelerometer
in one sensor_msgs/Imu) replayed from a simulated bag: both sensors are read from every message
and used, the estimate tracks, and the accelerometer (which sees the coupler's orientation through
gravity) makes it several times more accurate than the gyro alone (four_bar_gyro.yaml, the same
gyro on the same topic)."""
from __future__ import annotations

import pytest

from support.replay_bags import simulated_bag
from support.simulations import config_mechanism
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.residuals import sensor_residuals
from mbfg_ros.replay.session import ReplayOptions, replay_bag

DURATION = 4.0


@pytest.fixture(scope="module")
def imu_bag(tmp_path_factory):
    return simulated_bag(tmp_path_factory.mktemp("imu") / "imu", "four_bar_imu", DURATION)


def _replay(bag, config: str):
    mech = config_mechanism(config)
    res = replay_bag(bag, mech, ReplayOptions(processes=False))
    return mech, res, compare(mech, res.estimates, res.truth, skip=1.0)


def test_an_accelerometer_makes_the_gyro_rig_track_closely(imu_bag):
    mech, res, imu = _replay(imu_bag, "four_bar_imu")
    readings = int(DURATION * 400)
    assert res.counts["coupler_gyro"].used == readings and res.counts["coupler_accelerometer"].used == readings
    assert not res.input.problems() and not res.health.recoveries
    # measured: crank 0.64 mrad with the IMU, 3.6 mrad with the gyro alone (60 s: 0.56 and 5.7 mrad)
    assert imu.rmse["crank_joint"]["position"] < 2e-3, imu.rmse
    r = sensor_residuals(mech, res.layout, res.estimates, res.samples)["coupler_accelerometer"]
    assert r.axes == ["x", "y"] and r.unit == "m/s^2" and r.r.shape == (readings, 2)
    assert all(0.6 < x < 1.3 for x in r.summary()["rms_sigma"]), r.summary()
    _, gyro_res, gyro = _replay(imu_bag, "four_bar_gyro")
    assert gyro_res.counts["coupler_gyro"].used == readings
    assert imu.rmse["crank_joint"]["position"] < 0.5 * gyro.rmse["crank_joint"]["position"], (imu.rmse, gyro.rmse)
