"""InputRouter on the layouts ros2_control's broadcasters publish (config/arm6_ros2_control.yaml):
one JointState with every joint (and more) for the encoders, one WrenchStamped read by six load
cells, an Imu with every field filled for the gyro; message by message and in bulk alike."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import CONFIG, mechanism
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_layout import CdrLayout
from mbfg_ros.io.sensor_inputs import FLOAT64, IMU, JOINT_STATE, WRENCH_STAMPED, InputRouter
from mbfg_ros.model.mechanism import load_mechanism

STAMP = 1_700_000_000_250_000_000
STORE = msgs.typestore()
FORCE, TORQUE = [1.5, -2.0, 9.81], [0.03, -0.4, 0.002]


@pytest.fixture(scope="module")
def arm():
    return mechanism("arm6_ros2_control")


def test_one_joint_state_with_every_joint_feeds_the_six_encoders(arm):
    router = InputRouter(arm)
    # the joint_state_broadcaster's message: every joint of the robot (a gripper's too), the
    # velocity and effort arrays, frame_id base_link
    names = arm.joint_names + ["gripper_left_finger_joint", "gripper_right_finger_joint"]
    position = np.arange(len(names)) * 0.1 - 0.3
    msg = msgs.joint_state(STAMP, names, position, np.ones(len(names)), -np.ones(len(names)),
                           frame_id="base_link")
    readings = router.decode("joint_states", JOINT_STATE, msg)
    by_sensor = {e.config.joint: e.config.name for e in arm.encoders}
    assert [(r.sensor, r.stamp_ns, float(r.value[0])) for r in readings] == \
        [(by_sensor[j], STAMP, float(position[i])) for i, j in enumerate(arm.joint_names)]
    assert router.problems == {}


def test_one_wrench_gives_each_of_the_six_load_cells_its_component(arm):
    router = InputRouter(arm)
    assert router.topics["ft_sensor/wrench"] == (WRENCH_STAMPED,)      # no Float64: six numbers
    msg = msgs.wrench_stamped(STAMP, "ft_sensor_link", FORCE, TORQUE)
    readings = router.decode("ft_sensor/wrench", WRENCH_STAMPED, msg)
    assert {r.sensor: float(r.value[0]) for r in readings} == {
        "ft_force_x": 1.5, "ft_force_y": -2.0, "ft_force_z": 9.81,
        "ft_torque_x": 0.03, "ft_torque_y": -0.4, "ft_torque_z": 0.002}
    assert {r.stamp_ns for r in readings} == {STAMP}
    # a plain number cannot feed six cells: counted, not guessed
    assert router.decode("ft_sensor/wrench", FLOAT64, STORE.types[FLOAT64](data=1.0), STAMP) == []
    assert router.problems["ft_sensor/wrench"] == {
        "message type std_msgs/msg/Float64, expected geometry_msgs/msg/WrenchStamped": 1}


def test_bulk_decoding_of_the_wrench_is_the_message_by_message_one(arm):
    router = InputRouter(arm)
    rng = np.random.default_rng(3)
    messages = [msgs.wrench_stamped(STAMP + 2_000_000 * i, "ft_sensor_link", rng.normal(size=3),
                                    rng.normal(size=3)) for i in range(20)]
    raws = [bytes(msgs.serialize(m)) for m in messages]
    layout = CdrLayout.learn(raws[0], WRENCH_STAMPED, STORE.deserialize_cdr, STORE.serialize_cdr)
    rows = layout.decode(np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), -1))
    bulk = router.decode_rows("ft_sensor/wrench", WRENCH_STAMPED, rows, np.zeros(len(raws), np.int64))
    one_by_one = [router.decode("ft_sensor/wrench", WRENCH_STAMPED, m) for m in messages]
    assert [b.rank for b in bulk] == list(range(6))
    for b in bulk:
        i = b.rank
        assert b.sensor == one_by_one[0][i].sensor
        assert b.stamp_ns.tolist() == [r[i].stamp_ns for r in one_by_one]
        assert b.value[:, 0].tobytes() == np.array([r[i].value[0] for r in one_by_one]).tobytes()


def test_the_imu_broadcasters_message_feeds_the_gyro_without_disagreement(arm):
    router = InputRouter(arm)
    gyro = arm.config.sensors.gyros[0]
    msg = msgs.imu(STAMP, "imu_link", [0.1, -0.2, 0.3], gyro.noise)
    # imu_sensor_broadcaster fills every field: orientation, acceleration, static covariances
    msg.orientation.x, msg.orientation.w = 0.6, 0.8
    msg.linear_acceleration.z = 9.81
    msg.orientation_covariance[:] = np.diag([1e-4] * 3).ravel()
    msg.linear_acceleration_covariance[:] = np.diag([0.0025] * 3).ravel()
    (reading,) = router.decode("imu_sensor/imu", IMU, msg)
    assert reading.sensor == "flange_gyro" and reading.value.tolist() == [0.1, -0.2, 0.3]
    assert router.disagreements == {} and router.problems == {}


@pytest.mark.parametrize("old, new, words", [
    ("rate: 500.0}", "rate: 250.0}", "need the same rate"),
    ("frame: ft_sensor_link", "frame: flange", "need the same frame"),
    ("axis: [1.0, 0.0, 0.0]", "axis: [0.0, 1.0, 0.0]", "must be linearly independent"),
])
def test_load_cells_that_cannot_share_a_wrench_are_refused(tmp_path, old, new, words):
    text = (CONFIG / "arm6_ros2_control.yaml").read_text()
    text = text.replace("../urdf/", f"{CONFIG.parent / 'urdf'}/")
    line = next(ln for ln in text.splitlines() if "name: ft_force_x" in ln)
    path = tmp_path / "rig.yaml"
    path.write_text(text.replace(line, line.replace(old, new)))
    with pytest.raises(ValueError, match=words) as err:
        InputRouter(load_mechanism(path))
    assert "ft_force_x" in str(err.value) and "ft_sensor/wrench" in str(err.value)
