"""A stand-in for a robot under ros2_control: publishes what its three broadcasters publish, from
a simulated run (the simulator is the ground truth, never the estimator). A process of its own:

    python test/support/ros2_control_rig.py --config config/arm6_ros2_control.yaml --duration 6 \
        --report rig.json [--wait-for /truth/joint_states] [--initial-error 0.05] [--seed 0]

Control cycle k runs at the config's sensor rate (the controller manager's update_rate; every
sensor of the config must have it) and every broadcaster stamps it t0 + k / rate with the wall
clock (t0: once every subscriber it waits for is there), as they stamp with the controller
manager's clock; it is published when the wall clock reaches that time:

- joint_state_broadcaster: sensor_msgs/JointState on /joint_states, frame_id ``base_link`` (its
  default), every joint of the URDF and :data:`GRIPPER_JOINTS`, which the estimator's model
  leaves out; position: the encoders' readings (the simulator's sensor synthesis: truth + noise),
  velocity and effort: the truth's (the gripper's fixed);
- force_torque_sensor_broadcaster (controller ``ft_sensor``): geometry_msgs/WrenchStamped on
  /ft_sensor/wrench, frame_id the load cells' frame: their readings (each cell one component
  along a coordinate axis, as in the example config);
- imu_sensor_broadcaster (controller ``imu_sensor``): sensor_msgs/Imu on /imu_sensor/imu, frame_id
  the gyro's: orientation (the true sensor frame in the base frame), angular_velocity (the
  gyro's readings), linear_acceleration (the true specific force in the sensor frame plus noise
  of :data:`ACCELERATION_NOISE`) and the static covariances (:data:`ORIENTATION_VARIANCE`, the
  gyro's noise squared, :data:`ACCELERATION_NOISE` squared on the diagonals).

All three with rclpy's system default QoS, the broadcasters' SystemDefaultsQoS; the topics are
the config's, resolved at the root. The truth goes to ``<truth_namespace>/joint_states`` at the
same stamps (reliable) for the test's monitor. At the end it writes ``--report`` (JSON):
messages published per topic, the cycles and their rate, the first and last stamps, and how
far behind the stamps the publishing ran. Exit status 0, or 1 when nobody subscribed in time.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

GRIPPER_JOINTS = ("gripper_left_finger_joint", "gripper_right_finger_joint")
"""Joints of the robot that the estimator's URDF leaves out (a gripper on the flange)."""
GRIPPER_OPENING = 0.02
"""m, where the gripper's fingers stay."""
ACCELERATION_NOISE = 0.05
"""m/s^2, standard deviation of the Imu's linear_acceleration."""
ORIENTATION_VARIANCE = 1e-4
"""rad^2, the Imu's static orientation covariance (diagonal)."""
JOINT_STATES_FRAME = "base_link"
"""The joint_state_broadcaster's frame_id parameter (its default)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--duration", type=float, default=6.0, help="s of rig time")
    p.add_argument("--report", required=True, help="JSON file written at the end")
    p.add_argument("--wait-for", action="append", default=[], metavar="TOPIC",
                   help="also wait for a subscriber on this topic (repeatable)")
    p.add_argument("--wait-timeout", type=float, default=600.0,
                   help="s to wait for the subscribers (an estimator's first start compiles)")
    p.add_argument("--initial-error", type=float, default=0.0, help="rad added to every initial DOF value")
    p.add_argument("--input-amplitude", type=float, default=3.0, help="N m, random joint torques")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


class BroadcasterRun:
    """Every control cycle's messages of a simulated run, stamped from ``t0_ns`` on request."""

    def __init__(self, config: str, duration: float, initial_error: float, amplitude: float,
                 seed: int) -> None:
        from mbfg_ros.io.topic_names import resolve_topic
        from mbfg_ros.model.validation import load_rig
        from mbfg_ros.sim.forward import simulate
        from mbfg_ros.sim.ground_truth import ground_truth
        from mbfg_ros.sim.scenario import Scenario
        from mbfg_ros.sim.sensors import SensorOptions, synthesize_series

        mech = load_rig(config).mech
        scenario = Scenario(duration=duration, initial_dof_offset=initial_error, input_profile="random",
                            input_amplitude=amplitude, input_frequency=0.5, input_start=0.0, seed=seed)
        trajectory = simulate(mech, scenario)
        series = synthesize_series(trajectory, SensorOptions(seed=seed))
        rates = {s.channel.rate for s in series}
        if len(rates) != 1:
            raise SystemExit(f"every sensor needs the control cycle's rate (rates: {sorted(rates)})")
        self.rate = rates.pop()
        self.t = series[0].stamp
        for s in series:
            assert np.array_equal(s.stamp, self.t), s.channel.name       # one stamp per cycle
        truth = ground_truth(trajectory, self.rate)
        assert np.allclose(truth.t, self.t, atol=1e-12)
        self.mech, self.truth = mech, truth
        kinds = {k: [s for s in series if s.channel.kind == k] for k in ("encoder", "gyro", "load_cell")}
        (gyro,) = kinds["gyro"]
        self.topics = {"joint_states": resolve_topic(kinds["encoder"][0].channel.topic),
                       "wrench": resolve_topic(kinds["load_cell"][0].channel.topic),
                       "imu": resolve_topic(gyro.channel.topic),
                       "truth": (mech.config.truth_namespace or "/truth").rstrip("/") + "/joint_states"}
        # joint_states: the encoders' readings where a joint has one, else the truth
        self.names = list(mech.joint_names) + list(GRIPPER_JOINTS)
        position = truth.q.copy()
        for s in kinds["encoder"]:
            position[:, mech.index[s.channel.joint]] = s.value[:, 0]
        grip = np.full((self.t.size, len(GRIPPER_JOINTS)), GRIPPER_OPENING)
        zeros = np.zeros_like(grip)
        self.position = np.hstack([position, grip])
        self.velocity = np.hstack([truth.v, zeros])
        self.effort = np.hstack([truth.effort, zeros])
        # the wrench: each cell's reading in its component along its axis
        self.wrench_frame = kinds["load_cell"][0].channel.frame_id
        self.wrench = np.zeros((self.t.size, 6))
        for s in kinds["load_cell"]:
            cell = mech.load_cells[s.channel.index]
            (i,) = np.flatnonzero(cell.axis)               # the example's cells: coordinate axes
            self.wrench[:, i + (3 if cell.config.component == "torque" else 0)] += cell.axis[i] * s.value[:, 0]
        # the Imu: the gyro's readings, the true orientation and specific force plus noise
        g = mech.gyros[gyro.channel.index]
        self.imu_frame, self.gyro_noise = gyro.channel.frame_id, gyro.channel.noise
        self.angular_velocity = gyro.value
        self.orientation, self.acceleration = self._imu_truth(trajectory, g)
        self.acceleration += ACCELERATION_NOISE * np.random.default_rng(seed).standard_normal(self.acceleration.shape)

    def _imu_truth(self, trajectory, gyro) -> tuple[np.ndarray, np.ndarray]:
        """(K, 4) quaternions x, y, z, w of the sensor frame in the base frame and (K, 3) the
        specific force (m/s^2: acceleration minus gravity) in the sensor frame, from the truth."""
        model = trajectory.mechanism.model
        data = model.createData()
        q, v, a, *_ = trajectory.state_at(self.t, 2)
        gravity = model.gravity.linear
        quat, force = np.empty((self.t.size, 4)), np.empty((self.t.size, 3))
        for k in range(self.t.size):
            pin.forwardKinematics(model, data, q[k], v[k], a[k])
            pin.updateFramePlacement(model, data, gyro.frame_id)
            R = data.oMf[gyro.frame_id].rotation @ gyro.R_mount
            quat[k] = pin.Quaternion(R).coeffs()                     # x, y, z, w
            acc = pin.getFrameClassicalAcceleration(model, data, gyro.frame_id, pin.LOCAL).linear
            force[k] = gyro.R_mount.T @ acc - R.T @ gravity
        return quat, force

    def cycle(self, k: int, t0_ns: int = 0) -> list[tuple[str, bytes]]:
        """The CDR messages of control cycle k, stamped t0_ns + t_k (broadcasters in the
        controller manager's order, then the truth)."""
        from mbfg_ros.io import messages as msgs
        ns = t0_ns + msgs.seconds_to_ns(self.t[k])
        js = msgs.joint_state(ns, self.names, self.position[k], self.velocity[k], self.effort[k],
                              frame_id=JOINT_STATES_FRAME)
        wrench = msgs.wrench_stamped(ns, self.wrench_frame, self.wrench[k, :3], self.wrench[k, 3:])
        imu = msgs.imu(ns, self.imu_frame, self.angular_velocity[k], self.gyro_noise)
        imu.orientation.x, imu.orientation.y, imu.orientation.z, imu.orientation.w = self.orientation[k]
        a = self.acceleration[k]
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = a
        imu.orientation_covariance[:] = np.diag([ORIENTATION_VARIANCE] * 3).ravel()
        imu.linear_acceleration_covariance[:] = np.diag([ACCELERATION_NOISE ** 2] * 3).ravel()
        truth = msgs.joint_state(ns, self.mech.joint_names, self.truth.q[k], self.truth.v[k],
                                 self.truth.effort[k])
        return [(self.topics["joint_states"], bytes(msgs.serialize(js))),
                (self.topics["wrench"], bytes(msgs.serialize(wrench))),
                (self.topics["imu"], bytes(msgs.serialize(imu))),
                (self.topics["truth"], bytes(msgs.serialize(truth)))]


def restamp(cdr: bytes, stamp_ns: int) -> bytes:
    """The CDR bytes of a message whose first field is a std_msgs/Header, stamped ``stamp_ns``
    (little-endian CDR: after the 4-byte encapsulation, int32 sec and uint32 nanosec)."""
    assert cdr[:2] == b"\x00\x01", "little-endian CDR"
    buf = bytearray(cdr)
    struct.pack_into("<iI", buf, 4, *divmod(stamp_ns, 1_000_000_000))
    return bytes(buf)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_system_default

    from mbfg_ros.io import messages as msgs
    from mbfg_ros.ros.message_classes import message_class
    from mbfg_ros.termination import follow_parent

    follow_parent()
    run = BroadcasterRun(args.config, args.duration, args.initial_error, args.input_amplitude, args.seed)
    # every cycle's messages serialized now, stamped relative (t_k); restamped when published, so
    # publishing keeps up with the control cycle on a busy machine
    cycles = [run.cycle(k) for k in range(run.t.size)]
    rclpy.init(args=[])
    node = rclpy.create_node("ros2_control_rig")
    types = {"joint_states": msgs.JOINT_STATE, "wrench": msgs.WRENCH_STAMPED, "imu": msgs.IMU,
             "truth": msgs.JOINT_STATE}
    reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
    pubs = {run.topics[k]: node.create_publisher(message_class(t), run.topics[k],
                                                 reliable if k == "truth" else qos_profile_system_default)
            for k, t in types.items()}
    log = node.get_logger()
    end = time.monotonic() + args.wait_timeout
    waiting = sorted(set(pubs) | set(args.wait_for))
    while True:
        missing = [t for t in waiting
                   if (pubs[t].get_subscription_count() if t in pubs else node.count_subscribers(t)) == 0]
        if not missing:
            break
        if time.monotonic() > end:
            log.error(f"no subscriber on {', '.join(missing)} after {args.wait_timeout:g} s")
            return 1
        time.sleep(0.05)
    log.info(f"the subscribers are there: {run.t.size} control cycles at {run.rate:g} Hz")
    start = time.monotonic()
    t0_ns = time.time_ns()
    published = {t: 0 for t in pubs}
    late = np.zeros(run.t.size)
    for k in range(run.t.size):
        wait = start + run.t[k] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        late[k] = time.monotonic() - start - run.t[k]
        stamp = t0_ns + msgs.seconds_to_ns(run.t[k])
        for topic, cdr in cycles[k]:
            pubs[topic].publish(restamp(cdr, stamp))
            published[topic] += 1
    time.sleep(1.0)                      # the last messages on their way before the writers go
    report = {"published": published, "cycles": int(run.t.size), "rate": run.rate,
              "first_stamp_ns": t0_ns + msgs.seconds_to_ns(run.t[0]),
              "last_stamp_ns": t0_ns + msgs.seconds_to_ns(run.t[-1]),
              "joint_names": run.names, "late_max_s": float(late.max()), "late_mean_s": float(late.mean())}
    Path(args.report).write_text(json.dumps(report, indent=1))
    log.info(f"published {published}; behind the stamps: mean {late.mean() * 1e3:.1f} ms, "
             f"max {late.max() * 1e3:.1f} ms")
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
