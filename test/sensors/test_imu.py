"""An Imu topic feeding a gyro and an accelerometer (config/four_bar_imu.yaml): one message is read
by both, message by message and in bulk alike; the simulator writes one message per stamp with
both fields; each sensor's covariance is checked against its own noise."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_layout import CdrLayout
from mbfg_ros.io.sensor_inputs import IMU, InputRouter
from mbfg_ros.io.simulation_messages import sensor_messages, sensor_topics
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.sensors import SensorOptions, samples_from_series, sensor_channels, synthesize_series
from support.simulations import config_mechanism, simulated

EPOCH_NS = 1_700_000_000_000_000_000
STORE = msgs.typestore()


def _imu(k: int, acc_noise: float = 0.05):
    """An Imu of four_bar_imu's IMU (its frame_id, the gyro's noise) at 400 Hz."""
    return msgs.imu(EPOCH_NS + k * 2_500_000, "coupler_imu", [0.1 * k, 0.2, 0.3], 0.017453292519943295,
                    [1.0, -9.0 + k, 0.5], acc_noise)


def test_a_message_with_both_fields_is_read_by_both():
    mech = config_mechanism("four_bar_imu")
    router = InputRouter(mech)
    assert router.topics == {"coupler/imu": (IMU,)}
    assert router.routes["coupler/imu"].sensors == ("coupler_gyro", "coupler_accelerometer")
    readings = router.decode("coupler/imu", IMU, _imu(3))
    assert [r.sensor for r in readings] == ["coupler_gyro", "coupler_accelerometer"]
    assert readings[0].stamp_ns == readings[1].stamp_ns == EPOCH_NS + 7_500_000
    np.testing.assert_array_equal(readings[0].value, [0.1 * 3, 0.2, 0.3])
    np.testing.assert_array_equal(readings[1].value, [1.0, -6.0, 0.5])
    assert router.problems == {} and router.disagreements == {}
    # the gyro alone (four_bar_gyro.yaml reads the same topic) takes the angular velocity only
    alone = InputRouter(config_mechanism("four_bar_gyro"))
    assert [r.sensor for r in alone.decode("coupler/imu", IMU, _imu(3))] == ["coupler_gyro"]


def test_bulk_decoding_gives_the_same_readings_and_counts():
    mech = config_mechanism("four_bar_imu")
    messages = [_imu(k, acc_noise=0.05 if k % 2 else 0.2) for k in range(6)]
    one = InputRouter(mech)
    expect = [r for m in messages for r in one.decode("coupler/imu", IMU, m)]
    raws = [bytes(msgs.serialize(m)) for m in messages]
    layout = CdrLayout.learn(raws[0], IMU, STORE.deserialize_cdr, STORE.serialize_cdr)
    rows = layout.decode(np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), -1))
    bulk = InputRouter(mech)
    got = bulk.decode_rows("coupler/imu", IMU, rows, np.zeros(len(raws), np.int64))
    assert [(g.sensor, g.rank) for g in got] == [("coupler_gyro", 0), ("coupler_accelerometer", 1)]
    for g in got:
        mine = [r for r in expect if r.sensor == g.sensor]
        np.testing.assert_array_equal(g.stamp_ns, [r.stamp_ns for r in mine])
        np.testing.assert_array_equal(g.value, np.array([r.value for r in mine]))
    assert bulk.disagreements == one.disagreements
    what = dict(one.disagreements["coupler/imu"])
    assert what == {"linear_acceleration_covariance gives a noise of 0.2, 0.2 m/s^2 on xy, the config "
                    "0.05 m/s^2 (the config's noise is used)": 3}


def test_the_simulator_writes_one_message_per_stamp_with_both_fields():
    mech = config_mechanism("four_bar_imu")
    channels = sensor_channels(mech)
    assert [c.group for c in channels] == ["gyro|coupler_gyro"] * 2
    assert sensor_topics(mech) == {"coupler/imu": IMU}
    series = {s.channel.name: s for s in synthesize_series(simulated("four_bar_imu", duration=0.2),
                                                           SensorOptions(seed=3))}
    gyro, acc = series["coupler_gyro"], series["coupler_accelerometer"]
    np.testing.assert_array_equal(gyro.stamp, acc.stamp)
    out = list(sensor_messages(samples_from_series(list(series.values())), mech, EPOCH_NS))
    assert len(out) == gyro.stamp.size == 80 and all(m.msgtype == IMU for m in out)
    router = InputRouter(mech)
    for k, m in enumerate(out):
        assert m.msg.header.frame_id == "coupler_imu"
        readings = router.decode(m.topic, m.msgtype, m.msg)
        np.testing.assert_array_equal(readings[0].value, gyro.value[k])
        np.testing.assert_array_equal(readings[1].value, acc.value[k])
    assert router.disagreements == {}


def test_sensors_of_one_imu_message_keep_one_rate():
    mech = config_mechanism("four_bar_imu")
    with pytest.raises(MbfgError, match="coupler_gyro and coupler_accelerometer share the topic coupler/imu"):
        sensor_channels(mech, SensorOptions(rates={"accelerometer": 200.0}))
    assert {c.rate for c in sensor_channels(mech, SensorOptions(rates={"gyro": 200.0, "accelerometer": 200.0}))} \
        == {200.0}


def test_an_accelerometer_on_its_own_topic_has_messages_of_its_own():
    base = config_mechanism("four_bar_imu").config
    acc = dataclasses.replace(base.sensors.accelerometers[0], topic="coupler/accel", frame_id="coupler_acc",
                              rate=100.0)
    mech = Mechanism(dataclasses.replace(base, sensors=dataclasses.replace(base.sensors, accelerometers=(acc,))))
    assert sensor_topics(mech) == {"coupler/imu": IMU, "coupler/accel": IMU}
    groups = {c.name: c.group for c in sensor_channels(mech)}
    assert groups == {"coupler_gyro": "gyro|coupler_gyro",
                      "coupler_accelerometer": "accelerometer|coupler_accelerometer"}
    m = _imu(0)
    assert [r.sensor for r in InputRouter(mech).decode("coupler/accel", IMU, m)] == ["coupler_accelerometer"]
