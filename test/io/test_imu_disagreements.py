"""An Imu message whose frame_id or angular velocity covariance disagrees with the config is
still used (the config's frame and noise) and counted per topic and reason."""
from __future__ import annotations

import numpy as np

from conftest import mechanism
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.sensor_inputs import IMU, InputRouter


def _imu(frame_id: str, noise: float, cov0: float | None = None):
    m = msgs.imu(1_700_000_000_000_000_000, frame_id, [0.1, 0.2, 0.3], noise)
    if cov0 is not None:
        m.angular_velocity_covariance[0] = cov0
    return m


def test_imu_frame_and_covariance_disagreements_are_counted_not_dropped():
    mech = mechanism("four_bar_gyro")         # coupler_gyro: frame_id coupler_imu, 1 deg/s, z axis
    gyro = mech.config.sensors.gyros[0]
    router = InputRouter(mech)
    topic = gyro.topic
    assert router.decode(topic, IMU, _imu("coupler_imu", gyro.noise))       # as configured
    assert router.decode(topic, IMU, _imu("coupler_imu", gyro.noise * 1.02))  # rounding: fine
    assert router.disagreements == {}
    zeros = _imu("coupler_imu", 0.0)                                        # unknown (REP 145)
    assert router.decode(topic, IMU, zeros) and router.disagreements == {}
    readings = router.decode(topic, IMU, _imu("imu_link", gyro.noise * 3))
    assert len(readings) == 1 and np.allclose(readings[0].value, [0.1, 0.2, 0.3])
    router.decode(topic, IMU, _imu("imu_link", gyro.noise))
    router.decode(topic, IMU, _imu("coupler_imu", gyro.noise, cov0=-1.0))
    got = router.disagreements[topic]
    frame = [k for k in got if k.startswith("header.frame_id 'imu_link'")]
    noise = [k for k in got if k.startswith("angular_velocity_covariance gives a noise of 0.0524 rad/s on z")]
    assert len(frame) == 1 and got[frame[0]] == 2 and "'coupler_imu'" in frame[0]
    assert len(noise) == 1 and got[noise[0]] == 1 and "0.0175 rad/s" in noise[0]
    assert sum(got.values()) == 4 and router.problems == {}
