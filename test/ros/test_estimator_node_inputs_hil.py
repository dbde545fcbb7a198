"""The estimator node's inputs from a rig that is not the simulator (published from this test
over DDS): extra joints in a JointState are ignored, a load cell published as plain
std_msgs/Float64 is picked up (the node follows the publisher's type), unusable messages are
counted on /diagnostics, never dropped silently; one Imu topic feeds a gyro and an
accelerometer."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from conftest import CONFIG, mechanism
from mbfg_ros.model.assembly import initial_state
from mbfg_ros.ros.launch_description import estimator_description
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.output_monitor import MonitorThread
from mbfg_ros.ros.processes import NodeProcesses, ros_environment

pytestmark = pytest.mark.ros


def test_joint_state_extras_float64_load_cell_and_unusable_messages(four_bar, tmp_path):
    env = ros_environment(tmp_path)
    description = estimator_description(str(CONFIG / "four_bar.yaml"),
                                        parameters={"diagnostics_period": 0.5, "health_window": 60.0})
    JointState = message_class("sensor_msgs/msg/JointState")
    Float64 = message_class("std_msgs/msg/Float64")
    with NodeProcesses(description, tmp_path, env) as procs, \
            MonitorThread(four_bar, int(env["ROS_DOMAIN_ID"])) as m:
        enc = m.create_publisher(JointState, "/encoders", 100)
        cell = m.create_publisher(Float64, "/rocker_pin/wrench", 100)
        end = time.monotonic() + 60
        while enc.get_subscription_count() == 0 or cell.get_subscription_count() == 0:
            assert time.monotonic() < end, procs.log_text("mbfg_estimator")
            assert not procs.exited(), procs.log_text("mbfg_estimator")
            time.sleep(0.1)
        bad = JointState(name=["crank_joint"])                # no position: unusable
        for _ in range(5):
            bad.header.stamp = m.get_clock().now().to_msg()
            enc.publish(bad)
        start = time.monotonic()
        k = 0
        while time.monotonic() - start < 3.0:
            msg = JointState(name=["some_other_joint", "crank_joint"],
                             position=[0.0, math.pi / 3 + 0.05 * math.sin(k * 0.002)])
            msg.header.stamp = m.get_clock().now().to_msg()
            enc.publish(msg)
            if k % 5 == 0:
                cell.publish(Float64(data=-30.0))
            k += 1
            time.sleep(0.002)
        def received(mon, sensor):
            st = mon.sensor_status().get(sensor)
            return int(st.values["received"]) if st is not None else 0

        ok = m.wait_for(lambda mon: received(mon, "rocker_pin_load") > 10
                        and received(mon, "crank_encoder") > 500, 60)
        log = procs.log_text("mbfg_estimator")
        assert ok, log
        assert "/rocker_pin/wrench is published as std_msgs/msg/Float64" in log
        queue = m.node_status("input queue")
        assert queue.values.get("unusable /encoders") == "5 x joint crank_joint has no position", queue
        # WARN while the unusable messages are in the node's 5 s health window (on a loaded
        # machine the wait above can outlast it, and the WARN rightly clears)
        history = m.status_history[f"{m.names.namespace}: input queue"]
        assert any(lvl == 1 and "unusable" in msg for _, lvl, msg in history), history
        assert len(m.estimates) > 50
        assert m.topics["/mbfg_estimator/joint_states"].names == {tuple(four_bar.joint_names)}
        assert log.count("unusable message on /encoders") == 1


def test_one_imu_topic_feeds_its_gyro_and_its_accelerometer(tmp_path):
    """config/four_bar_imu.yaml: the node subscribes once to the IMU's topic and reads every Imu
    message as a gyro reading and an accelerometer reading."""
    imu = mechanism("four_bar_imu")
    env = ros_environment(tmp_path)
    description = estimator_description(str(CONFIG / "four_bar_imu.yaml"), parameters={"diagnostics_period": 0.5})
    Imu = message_class("sensor_msgs/msg/Imu")
    d = imu.create_data()
    q, _ = initial_state(imu, d)
    acc = imu.sensors_of("accelerometer")[0].value(imu, d, q, np.zeros(imu.n), np.zeros(imu.n))   # at rest
    with NodeProcesses(description, tmp_path, env) as procs, MonitorThread(imu, int(env["ROS_DOMAIN_ID"])) as m:
        pub = m.create_publisher(Imu, "/coupler/imu", 100)
        end = time.monotonic() + 60
        while pub.get_subscription_count() == 0:
            assert time.monotonic() < end and not procs.exited(), procs.log_text("mbfg_estimator")
            time.sleep(0.1)
        assert pub.get_subscription_count() == 1                 # one subscription for both sensors
        msg = Imu()
        msg.header.frame_id = "coupler_imu"
        msg.angular_velocity_covariance[0::4] = [0.017453292519943295 ** 2] * 3
        msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z = (float(x) for x in acc)
        msg.linear_acceleration_covariance[0::4] = [0.05 ** 2] * 3
        start = time.monotonic()
        while time.monotonic() - start < 2.0:
            msg.header.stamp = m.get_clock().now().to_msg()
            pub.publish(msg)
            time.sleep(0.0025)

        def received(mon, sensor):
            st = mon.sensor_status().get(sensor)
            return int(st.values["received"]) if st is not None else 0

        ok = m.wait_for(lambda mon: received(mon, "coupler_gyro") > 300 and received(mon, "coupler_accelerometer") > 300,
                        60)
        assert ok, procs.log_text("mbfg_estimator")
        assert received(m, "coupler_gyro") == received(m, "coupler_accelerometer")
        assert "counted on /diagnostics" not in procs.log_text("mbfg_estimator")      # nothing disagreed
