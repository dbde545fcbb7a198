"""Bag writing and reading with rosbags: topics, types, frames, stamps, both storage plugins."""
from __future__ import annotations

import numpy as np
import pytest

from support.simulations import config_mechanism, simulated
from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.bag_reader import bag_custom_data, bag_epoch, bag_topics, read_bag
from mbfg_ros.io.bag_writer import BagWriter, write_simulation_bag
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.io.simulation_messages import BagMessage
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.sensors import Sample, SensorOptions, synthesize

EPOCH_NS = 1_700_000_000_000_000_000


def test_stamps_are_exact_integer_nanoseconds():
    t = msgs.time_msg(msgs.stamp_ns(0.123456789, EPOCH_NS))
    assert (t.sec, t.nanosec) == (1_700_000_000, 123_456_789)
    assert msgs.time_to_ns(t) == EPOCH_NS + 123_456_789
    assert msgs.stamp_ns(9.999, EPOCH_NS) - EPOCH_NS == 9_999_000_000


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_four_bar_bag_round_trip(tmp_path, storage):
    tr = simulated("four_bar", duration=10.0, friction=False)
    samples = synthesize(tr, SensorOptions(delay=0.004))
    truth = ground_truth(tr)
    out = tmp_path / "fb"
    summary = write_simulation_bag(out, tr.mechanism, samples, truth, storage=storage)
    topics = bag_topics(out)
    assert topics == summary["topics"]
    assert topics["/encoders"] == {"type": "sensor_msgs/msg/JointState", "count": 10000}
    assert topics["/rocker_pin/wrench"] == {"type": "geometry_msgs/msg/WrenchStamped", "count": 2000}
    assert topics["/truth/joint_states"] == {"type": "sensor_msgs/msg/JointState", "count": 2000}
    assert topics["/truth/dynamic_joint_states"] == {"type": "control_msgs/msg/DynamicJointState", "count": 2000}
    assert topics["/truth/forces/coupler_rocker"]["type"] == "geometry_msgs/msg/WrenchStamped"
    assert topics["/truth/forces/rocker_pin_load"]["type"] == "geometry_msgs/msg/WrenchStamped"
    assert bag_epoch(out) == 1.7e9
    assert (out / ("fb.mcap" if storage == "mcap" else "fb.db3")).exists()
    # sensor messages: header stamp = epoch + stamp, log time = stamp + delay
    enc = [s for s in samples if s.sensor == "crank_encoder"]
    records = list(read_bag(out, topics=["/encoders"]))
    assert len(records) == 10000
    for s, r in zip(enc[:50], records[:50]):
        assert msgs.time_to_ns(r.msg.header.stamp) == EPOCH_NS + round(s.stamp * 1e9)
        assert r.log_time_ns == EPOCH_NS + round((s.stamp + 0.004) * 1e9)
        assert r.msg.name == ["crank_joint"] and r.msg.header.frame_id == ""
        assert r.msg.position.tolist() == [s.value[0]] and r.msg.velocity.size == 0
    cell = next(iter(read_bag(out, topics=["/rocker_pin/wrench"]))).msg
    first_cell = next(s for s in samples if s.sensor == "rocker_pin_load")
    assert cell.header.frame_id == "rocker_tip"
    assert cell.wrench.force.x == first_cell.value[0] and cell.wrench.force.y == 0.0
    # ground truth: every joint, frames, the true values
    js = [r for r in read_bag(out, topics=["/truth/joint_states"])]
    assert js[0].msg.name == tr.mechanism.joint_names
    np.testing.assert_array_equal(js[7].msg.position, truth.q[7])
    np.testing.assert_array_equal(js[7].msg.velocity, truth.v[7])
    assert js[7].log_time_ns == msgs.time_to_ns(js[7].msg.header.stamp) == EPOCH_NS + 35_000_000
    acc = next(iter(read_bag(out, topics=["/truth/dynamic_joint_states"]))).msg
    assert acc.joint_names == tr.mechanism.joint_names
    assert [list(iv.interface_names) for iv in acc.interface_values] == \
        [["position", "velocity", "acceleration", "effort"]] * len(acc.joint_names)
    np.testing.assert_array_equal(msgs.joint_values(acc, "acceleration", acc.joint_names), truth.a[0])
    np.testing.assert_array_equal(msgs.joint_values(acc, "position", acc.joint_names), truth.q[0])
    force = list(read_bag(out, topics=["/truth/forces/coupler_rocker"]))[3].msg
    assert force.header.frame_id == "rocker_tip"
    np.testing.assert_array_equal([force.wrench.force.x, force.wrench.force.y, force.wrench.force.z],
                                  truth.closure_force[3, 0])
    load = list(read_bag(out, topics=["/truth/forces/rocker_pin_load"]))[3].msg
    assert load.header.frame_id == "rocker_tip" and load.wrench.force.x == truth.load_cells[3, 0]
    # everything in log-time order
    logs = [r.log_time_ns for r in read_bag(out)]
    assert logs == sorted(logs)


def test_gyro_messages_are_imu_with_unknown_orientation(tmp_path):
    tr = simulated("four_bar", duration=10.0, friction=False)
    mech = config_mechanism("four_bar_gyro")
    samples = synthesize(tr, config_mechanism=mech)
    write_simulation_bag(tmp_path / "g", mech, samples, None)
    records = list(read_bag(tmp_path / "g"))
    assert len(records) == 4000 and {r.topic for r in records} == {"/coupler/imu"}
    imu = records[10].msg
    assert records[10].msgtype == "sensor_msgs/msg/Imu"
    assert imu.header.frame_id == "coupler_imu"
    assert imu.orientation_covariance[0] == -1.0 and imu.linear_acceleration_covariance[0] == -1.0
    np.testing.assert_allclose(np.diag(imu.angular_velocity_covariance.reshape(3, 3)), np.full(3, 0.017453292519943295 ** 2))
    np.testing.assert_array_equal([imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z],
                                  samples[10].value)


def test_encoders_of_one_topic_share_a_message_and_commands_carry_effort(tmp_path):
    five = simulated("five_bar", duration=10.0)
    samples = synthesize(five)
    write_simulation_bag(tmp_path / "five", five.mechanism, samples, None)
    records = list(read_bag(tmp_path / "five", topics=["/encoders"]))
    assert len(records) == 10000
    assert records[5].msg.name == ["crank1_joint", "crank2_joint"]
    by = {s.sensor: s.value[0] for s in samples if s.stamp == 0.005}
    assert records[5].msg.position.tolist() == [by["crank1_encoder"], by["crank2_encoder"]]
    slider = simulated("slider_crank", duration=10.0, input_profile="sine", input_amplitude=0.2, input_frequency=1.0)
    samples = synthesize(slider)
    write_simulation_bag(tmp_path / "sc", slider.mechanism, samples, None, storage="sqlite3")
    cmd = list(read_bag(tmp_path / "sc", topics=["/joint_commands"]))
    assert len(cmd) == 10000
    m = cmd[1500].msg
    assert m.name == ["crank_joint"] and m.position.size == 0
    assert m.effort[0] == pytest.approx(0.2 * np.sin(2 * np.pi * 0.5))
    enc = list(read_bag(tmp_path / "sc", topics=["/encoders"]))
    assert len(enc) == 10000 and enc[0].msg.name == ["crank_joint", "slider_joint"]


def test_load_cells_of_one_topic_share_a_wrench_that_reads_back_as_their_readings(tmp_path):
    arm = simulated("arm6_ros2_control", duration=0.1)
    samples = synthesize(arm)
    write_simulation_bag(tmp_path / "arm", arm.mechanism, samples, None)
    records = list(read_bag(tmp_path / "arm", topics=["/ft_sensor/wrench"]))
    assert len(records) == 50 and {r.msg.header.frame_id for r in records} == {"ft_sensor_link"}
    router = InputRouter(config_mechanism("arm6_ros2_control"), namespace="/")
    read = [(x.sensor, x.stamp_ns, x.value[0]) for r in records
            for x in router.decode(r.topic, r.msgtype, r.msg)]
    cells = [s for s in samples if s.kind == "load_cell"]
    want = sorted((s.sensor, EPOCH_NS + round(s.stamp * 1e9), s.value[0]) for s in cells)
    assert [r[:2] for r in sorted(read)] == [w[:2] for w in want]
    np.testing.assert_allclose([r[2] for r in sorted(read)], [w[2] for w in want], rtol=1e-12, atol=1e-15)


def test_custom_epoch_and_metadata(tmp_path):
    tr = simulated("pendulum", duration=4.0, friction=False, initial_dof_offset=-1.5707963267948966 - 0.1 + 0.01)
    write_simulation_bag(tmp_path / "p", tr.mechanism, synthesize(tr), ground_truth(tr), epoch=0.0,
                         custom_data={"mbfg.note": "test"})
    first = next(iter(read_bag(tmp_path / "p")))
    assert first.log_time_ns == 0 and msgs.time_to_ns(first.msg.header.stamp) == 0
    assert bag_epoch(tmp_path / "p") == 0.0
    assert bag_custom_data(tmp_path / "p")["mbfg.note"] == "test"


def test_existing_paths_are_refused_unless_overwrite(tmp_path):
    tr = simulated("pendulum", duration=4.0, friction=False, initial_dof_offset=-1.5707963267948966 - 0.1 + 0.01)
    samples = synthesize(tr)
    out = tmp_path / "bag"
    write_simulation_bag(out, tr.mechanism, samples, None)
    with pytest.raises(MbfgError, match="exists already"):
        write_simulation_bag(out, tr.mechanism, samples, None)
    write_simulation_bag(out, tr.mechanism, samples[:10], None, overwrite=True)
    assert bag_topics(out)["/encoders"]["count"] == 10
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(MbfgError, match="not a rosbag2 directory"):
        write_simulation_bag(precious, tr.mechanism, samples, None, overwrite=True)
    assert (precious / "thesis.tex").exists()


def test_a_failed_write_leaves_no_partial_bag(tmp_path):
    tr = simulated("pendulum", duration=4.0, friction=False, initial_dof_offset=-1.5707963267948966 - 0.1 + 0.01)
    bad = synthesize(tr)[:5] + [Sample("no_such_sensor", "encoder", 1.0, 1.0, np.zeros(1))]
    with pytest.raises(MbfgError, match="unknown sensor 'no_such_sensor'"):
        write_simulation_bag(tmp_path / "partial", tr.mechanism, bad, None)
    assert not (tmp_path / "partial").exists()


def test_bag_writer_counts_and_refuses_a_second_type_on_a_topic(tmp_path):
    with BagWriter(tmp_path / "w") as bag:
        bag.write(BagMessage("/a", msgs.JOINT_STATE, 5, msgs.joint_state(5, ["j"], position=[1.0])))
        with pytest.raises(MbfgError, match="two types"):
            bag.add_topic("/a", msgs.IMU)
    assert bag.summary()["topics"] == {"/a": {"type": msgs.JOINT_STATE, "count": 1}}


def test_reading_a_missing_bag_is_a_clear_error(tmp_path):
    with pytest.raises(MbfgError, match="no such bag"):
        list(read_bag(tmp_path / "nothing"))


@pytest.mark.distro
def test_control_msgs_definitions_are_the_upstream_ones_built_for_the_pip_environment():
    """The rosbags types of control_msgs and the rclpy ones built from tools/control_msgs come
    from one definition (comments aside), and a message crosses between them (CDR) unchanged."""
    from pathlib import Path
    from rclpy.serialization import deserialize_message, serialize_message
    from control_msgs.msg import DynamicJointState
    tools = Path(__file__).resolve().parents[2] / "tools" / "control_msgs" / "msg"
    for name, text in msgs.CONTROL_MSGS_DEFINITIONS.items():
        upstream = (tools / (name.rsplit("/", 1)[1] + ".msg")).read_text()
        fields = [ln for ln in upstream.splitlines() if ln.strip() and not ln.startswith("#")]
        assert fields == text.splitlines()
    m = msgs.dynamic_joint_state(1_700_000_000_123_000_000, ["a", "b"],
                                 {"position": [1.0, 2.0], "acceleration": [3.0, 4.0]},
                                 {"position_variance": {"b": 0.5}})
    ros = deserialize_message(bytes(msgs.serialize(m)), DynamicJointState)
    assert list(ros.joint_names) == ["a", "b"] and ros.header.stamp.nanosec == 123_000_000
    assert list(ros.interface_values[1].interface_names) == ["position", "acceleration", "position_variance"]
    back = msgs.typestore().deserialize_cdr(serialize_message(ros), msgs.DYNAMIC_JOINT_STATE)
    np.testing.assert_array_equal(msgs.joint_values(back, "acceleration", ["b", "a"]), [4.0, 3.0])
    assert msgs.joint_values(back, "position_variance", ["a"]) is None
