"""Sensor messages -> estimator samples: the one decoder the ROS node and the replay tool share.

It reads messages by attribute (``msg.header.stamp.sec``, ``msg.name``, ...), which rclpy
messages and rosbags messages have alike. For every topic of the mechanism config it knows the
accepted message types and which sensors the topic feeds:

- sensor_msgs/msg/JointState: encoders (``position`` by joint name; joints the config does not
  measure on that topic are ignored) and known inputs (``effort`` by joint name);
- sensor_msgs/msg/Imu: a gyro's ``angular_velocity`` (x, y, z in the sensor frame);
- geometry_msgs/msg/WrenchStamped: a load cell's reading = axis . force (or torque), in the
  cell's frame;
- std_msgs/msg/Float64: a load cell's reading as a plain number (no stamp: the receive time is
  used).

Each decoded reading is (sensor name, stamp in ns, value); malformed messages are counted per
topic with the reason, never raised. The frame and the noise of a gyro come from the config; an
Imu message whose header.frame_id or angular_velocity_covariance says otherwise is used all the
same and counted per topic in ``disagreements`` (the node warns once per topic and reason).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.estimation.estimator import COMMAND_PREFIX
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.model.mechanism import Mechanism

JOINT_STATE = "sensor_msgs/msg/JointState"
IMU = "sensor_msgs/msg/Imu"
WRENCH_STAMPED = "geometry_msgs/msg/WrenchStamped"
FLOAT64 = "std_msgs/msg/Float64"


@dataclass(frozen=True)
class Reading:
    sensor: str
    stamp_ns: int
    value: np.ndarray


@dataclass
class TopicRoute:
    """What one topic feeds."""
    topic: str
    types: tuple[str, ...]
    encoders: dict[str, str] = field(default_factory=dict)     # joint -> sensor name
    commands: dict[str, str] = field(default_factory=dict)     # joint -> "command:<joint>"
    gyro: str | None = None
    gyro_frame_id: str = ""                 # the config's frame_id of the gyro's messages
    gyro_noise: float = 0.0                 # rad/s, the config's noise
    gyro_axes: tuple[int, ...] = ()         # the measured axes (0 x, 1 y, 2 z)
    load_cell: str | None = None
    load_axis: np.ndarray | None = None
    load_component: str = "force"


def _stamp_ns(msg) -> int:
    st = msg.header.stamp
    return int(st.sec) * 1_000_000_000 + int(st.nanosec)


class InputRouter:
    """Decodes the sensor topics of a mechanism config into estimator samples."""

    def __init__(self, mech: Mechanism, remap: dict[str, str] | None = None,
                 namespace: str | None = None) -> None:
        """``namespace``: resolve the config's relative topics there (replay: "/", the bag's
        root); None keeps them as written (the node subscribes with them and ROS resolves them
        in its namespace). ``remap`` maps a (resolved) config topic to the topic actually
        carrying it (e.g. in a bag)."""
        remap = remap or {}
        self.routes: dict[str, TopicRoute] = {}
        self.problems: dict[str, Counter] = {}
        self.disagreements: dict[str, Counter] = {}     # topic -> what disagrees -> messages

        def route(topic: str, types: tuple[str, ...]) -> TopicRoute:
            if namespace is not None:
                topic = resolve_topic(topic, namespace)
            topic = remap.get(topic, topic)
            r = self.routes.get(topic)
            if r is None:
                r = self.routes[topic] = TopicRoute(topic, types)
            elif set(types) != set(r.types):
                raise ValueError(f"topic {topic} is used by sensors of different message types")
            return r

        for e in mech.encoders:
            route(e.config.topic, (JOINT_STATE,)).encoders[e.config.joint] = e.config.name
        for name in mech.known_input_joints:
            route(mech.config.joint(name).topic, (JOINT_STATE,)).commands[name] = COMMAND_PREFIX + name
        for g in mech.gyros:
            r = route(g.config.topic, (IMU,))
            if r.gyro is not None:
                raise ValueError(f"two gyros publish on {r.topic}")
            r.gyro = g.config.name
            r.gyro_frame_id = g.config.frame_id or g.config.name
            r.gyro_noise = float(g.config.noise)
            r.gyro_axes = tuple(int(i) for i in g.rows)
        for c in mech.load_cells:
            r = route(c.config.topic, (WRENCH_STAMPED, FLOAT64))
            if r.load_cell is not None:
                raise ValueError(f"two load cells publish on {r.topic}")
            r.load_cell = c.config.name
            r.load_axis = np.asarray(c.config.axis, float)
            r.load_component = c.config.component

    @property
    def topics(self) -> dict[str, tuple[str, ...]]:
        """{topic: accepted message types}."""
        return {t: r.types for t, r in self.routes.items()}

    def _problem(self, topic: str, reason: str) -> list[Reading]:
        self.problems.setdefault(topic, Counter())[reason] += 1
        return []

    def decode(self, topic: str, msgtype: str, msg, receive_ns: int | None = None) -> list[Reading]:
        """The readings in one message (empty, and a counted problem, if it is unusable)."""
        r = self.routes.get(topic)
        if r is None:
            return self._problem(topic, "not a sensor topic of this config")
        if msgtype not in r.types:
            return self._problem(topic, f"message type {msgtype}, expected {' or '.join(r.types)}")
        try:
            if msgtype == JOINT_STATE:
                return self._joint_state(r, msg)
            if msgtype == IMU:
                w = msg.angular_velocity
                reading = [Reading(r.gyro, _stamp_ns(msg), np.array([w.x, w.y, w.z], float))]
                self._check_imu(r, msg)
                return reading
            if msgtype == WRENCH_STAMPED:
                v = msg.wrench.force if r.load_component == "force" else msg.wrench.torque
                value = float(r.load_axis @ np.array([v.x, v.y, v.z], float))
                return [Reading(r.load_cell, _stamp_ns(msg), np.array([value]))]
            if msgtype == FLOAT64:
                if receive_ns is None:
                    return self._problem(topic, "std_msgs/Float64 has no stamp and no receive time is known")
                return [Reading(r.load_cell, int(receive_ns), np.array([float(msg.data)]))]
        except (AttributeError, TypeError, ValueError) as exc:
            return self._problem(topic, f"malformed {msgtype}: {exc}")
        return self._problem(topic, f"unsupported type {msgtype}")

    NOISE_TOLERANCE = 0.05
    """Relative difference between the Imu's standard deviation and the config's noise that is
    reported (the message's covariance rounded, a unit slip, a different sensor)."""

    def _check_imu(self, r: TopicRoute, msg) -> None:
        """Count what an Imu message says that the config does not: its frame_id, and its
        angular velocity covariance on the measured axes (all zeros: unknown, REP 145; -1 in
        the first element: not provided)."""
        frame = msg.header.frame_id
        if frame != r.gyro_frame_id:
            self._disagree(r.topic, f"header.frame_id {frame!r} differs from the config's frame_id "
                                    f"{r.gyro_frame_id!r} (the config's frame is used)")
        cov = np.asarray(msg.angular_velocity_covariance, float)
        if cov.size != 9 or not np.any(cov):
            return
        if cov[0] == -1.0:
            self._disagree(r.topic, "angular_velocity_covariance[0] = -1 marks the angular "
                                    "velocity as not provided (it is used)")
            return
        std = np.sqrt(np.maximum(cov[[4 * i for i in r.gyro_axes]], 0.0))
        if np.any(np.abs(std - r.gyro_noise) > self.NOISE_TOLERANCE * r.gyro_noise):
            axes = "".join("xyz"[i] for i in r.gyro_axes)
            self._disagree(r.topic, f"angular_velocity_covariance gives a noise of "
                                    f"{', '.join(f'{x:.3g}' for x in std)} rad/s on {axes}, the config "
                                    f"{r.gyro_noise:.3g} rad/s (the config's noise is used)")

    def _disagree(self, topic: str, what: str) -> None:
        self.disagreements.setdefault(topic, Counter())[what] += 1

    def _joint_state(self, r: TopicRoute, msg) -> list[Reading]:
        ns = _stamp_ns(msg)
        names = list(msg.name)
        pos = list(msg.position)
        eff = list(msg.effort)
        out = []
        matched = False
        for i, joint in enumerate(names):
            # an encoder reads the joint's position, a known-input command its effort
            for table, values, what in ((r.encoders, pos, "position"), (r.commands, eff, "effort")):
                sensor = table.get(joint)
                if sensor is None:
                    continue
                matched = True
                if i < len(values):
                    out.append(Reading(sensor, ns, np.array([float(values[i])])))
                else:
                    self._problem(r.topic, f"joint {joint} has no {what}")
        if not matched:
            self._problem(r.topic, "no joint of this config in the message "
                                   f"(expected {', '.join(sorted({**r.encoders, **r.commands}))})")
        return out
