"""The ros2_control example live: a stand-in for the robot (its own process,
``test/support/ros2_control_rig.py``) publishes what joint_state_broadcaster,
force_torque_sensor_broadcaster and imu_sensor_broadcaster publish (names, frames, QoS, one
stamp per 500 Hz control cycle from the wall clock) from a simulated run of the 6-DOF arm
(random joint torques of 3 N m, every DOF 0.05 rad off the config's start); the estimator is
started as ``estimator_ros2_control.launch.py`` starts it (config/arm6_ros2_control.yaml and its
params file) and reads the broadcasters' topics with no adapter node.

Asserted, over the estimates stamped at least 2 s after the first one (start-up): every DOF's
position RMSE <= 2 mrad (the issue's bound; measured ~0.2-0.3 mrad); every message published
reached the node or is counted lost in DDS, and every reading is accounted for (received = used
+ late + too old + rejected + discarded + pending per sensor, nothing unaccounted); the gripper
joints of /joint_states, the Imu's orientation and acceleration and the broadcasters' frames
raise no problem and no disagreement; the readings arrive at the control cycle's rate.
The estimator may run behind real time on a loaded machine: the test waits for it to process
everything (no timing is asserted).
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import pytest

from conftest import CONFIG, ROOT
from mbfg_ros.model.mechanism import load_mechanism
from mbfg_ros.ros.launch_description import ProcessSpec, ros2_control_description
from mbfg_ros.ros.output_monitor import MonitorThread
from mbfg_ros.ros.processes import NodeProcesses, ros_environment

pytestmark = [pytest.mark.ros, pytest.mark.slow]

RIG = ROOT / "test" / "support" / "ros2_control_rig.py"
DURATION = 6.0
TOPICS = ("/joint_states", "/ft_sensor/wrench", "/imu_sensor/imu")
COUNTS = ("received", "used", "late", "too_old", "rejected_nonfinite", "rejected_duplicate",
          "discarded", "pending")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("ros2_control")
    env = ros_environment(log_dir)
    report = log_dir / "rig.json"
    description = ros2_control_description(parameters={"diagnostics_period": 0.5})
    (node,) = description.nodes
    mech = load_mechanism(node.parameters["config"])
    description.processes.append(ProcessSpec("ros2_control_rig", (
        sys.executable, str(RIG), "--config", node.parameters["config"], "--duration", str(DURATION),
        "--initial-error", "0.05", "--report", str(report),
        "--wait-for", "/truth/joint_states", "--wait-for", "/mbfg_estimator/joint_states")))
    with NodeProcesses(description, log_dir, env) as procs, \
            MonitorThread(mech, int(env["ROS_DOMAIN_ID"]), outputs=("joint_states", "/diagnostics")) as m:
        end = time.monotonic() + 900          # an estimator's first start compiles its step function
        while "ros2_control_rig" not in procs.exited() and time.monotonic() < end:
            assert "mbfg_estimator" not in procs.exited(), procs.log_text("mbfg_estimator")
            time.sleep(0.2)
        assert procs.exited().get("ros2_control_rig") == 0, \
            procs.log_text("ros2_control_rig") + procs.log_text("mbfg_estimator")
        rig = json.loads(report.read_text())

        def settled(mon):
            q = mon.node_status("input queue")
            return (q is not None and q.values["waiting"] == "0" and q.values["reordering"] == "0"
                    and all(int(q.values.get(f"messages {t}", 0)) + int(q.values.get(f"lost {t}", 0))
                            >= rig["published"][t] for t in TOPICS)
                    and mon.estimates and mon.estimates[-1][0] >= rig["last_stamp_ns"] - 100_000_000)
        # (on a loaded machine the first start's native compile of this rig's function takes minutes)
        if not m.wait_for(settled, 600):
            q = m.node_status("input queue")
            pytest.fail(f"the node did not take every message: input queue {q and q.values}; published "
                        f"{rig['published']}, last stamp {rig['last_stamp_ns']}; {m.coverage()}\n"
                        + procs.log_text("mbfg_estimator"))
        m.wait_for(lambda mon: False, 1.5)                 # the last diagnostics
        yield m, rig, procs.log_text("mbfg_estimator"), mech


def test_the_estimate_tracks_the_broadcasters_robot(live):
    m, rig, log, mech = live
    err = m.tracking(after=2.0)
    print("\nDOF position RMSE after start-up (mrad): "
          + ", ".join(f"{j} {1e3 * e['q_rmse']:.3f}" for j, e in err.items())
          + f"; {min(e['samples'] for e in err.values())} estimates each; " + m.coverage())
    assert set(err) == set(mech.dof_names), (err, m.coverage())
    for joint, e in err.items():
        assert e["samples"] > 600, (m.coverage(), log)            # 4 s of 200 Hz keyframes
        assert e["q_rmse"] <= 2e-3, (joint, err, log)
    solver = m.node_status("solver").values
    assert solver["recoveries"] == "0" and solver["resets"] == "0", solver


def test_every_message_and_reading_is_accounted_for(live):
    m, rig, _, mech = live
    queue = m.node_status("input queue").values
    print(f"\npublished {rig['published']} ({rig['cycles']} cycles at {rig['rate']:g} Hz; publishing "
          f"behind the stamps by {1e3 * rig['late_mean_s']:.1f} ms mean, {1e3 * rig['late_max_s']:.1f} max); "
          f"at the node: " + ", ".join(f"{t} {queue[f'messages {t}']} (lost {queue.get(f'lost {t}', 0)})"
                                      for t in TOPICS))
    assert queue["unaccounted_readings"] == "0" and queue["dropped"] == "0", queue
    for t in TOPICS:
        lost = int(queue.get(f"lost {t}", 0))
        assert int(queue[f"messages {t}"]) + lost == rig["published"][t] == rig["cycles"], (t, queue)
        assert lost <= 0.01 * rig["cycles"], (t, queue)
    # nothing unusable (the gripper's joints are ignored), no disagreement (the Imu's frame_id and
    # angular velocity covariance are the config's)
    assert not any(k.startswith(("unusable", "disagrees")) for k in queue), queue
    messages = {s.name: int(queue[f"messages {'/' + s.topic}"]) for s in mech.config.sensors.all()}
    for sensor, status in m.sensor_status().items():
        v = {k: int(status.values[k]) for k in COUNTS}
        assert v["received"] == sum(v[k] for k in COUNTS[1:]), (sensor, v)
        assert v["received"] == messages[sensor], (sensor, v, messages[sensor])   # one per message
        assert v["used"] + v["late"] >= 0.99 * v["received"], (sensor, v)   # late: used, after its keyframe
        assert float(status.values["rate_hz"]) == pytest.approx(rig["rate"], rel=0.02), (sensor, status)
        assert status.level == 0 or status.message.startswith("silent"), (sensor, status)
    assert set(m.sensor_status()) == {s.name for s in mech.config.sensors.all()}


def test_the_outputs_follow_the_keyframes_with_the_examples_frames(live):
    m, rig, _, mech = live
    est = m.topics["/mbfg_estimator/joint_states"]
    assert est.names == {tuple(mech.joint_names)}                     # not the gripper's joints
    assert est.stamp_period() == pytest.approx(1.0 / mech.config.estimator.keyframe_rate, rel=1e-3)
    published = int(m.node_status("outputs").values["published /mbfg_estimator/joint_states"])
    keyframes = int(m.node_status("solver").values["keyframes"])
    assert published == keyframes >= 0.95 * DURATION * mech.config.estimator.keyframe_rate
    stamps = np.array(est.stamps)
    period_ns = 1e9 / mech.config.estimator.keyframe_rate              # stamps on the keyframe grid
    assert rig["first_stamp_ns"] - period_ns <= stamps.min() and stamps.max() <= rig["last_stamp_ns"] + period_ns
