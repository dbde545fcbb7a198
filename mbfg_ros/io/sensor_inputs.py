"""Sensor messages -> estimator samples: the one decoder the ROS node and the replay tool share.

It reads messages by attribute (``msg.header.stamp.sec``, ``msg.name``, ...), which rclpy
messages and rosbags messages have alike. For every topic of the mechanism config it keeps the
:class:`~mbfg_ros.sensors.base.TopicInput` of the topic's message type, which knows the accepted
message types and which sensors the topic feeds (each sensor kind names its own, see
:mod:`mbfg_ros.sensors`):

- sensor_msgs/msg/JointState: encoders (``position`` by joint name; joints the config does not
  measure on that topic are ignored) and known inputs (``effort`` by joint name);
- sensor_msgs/msg/Imu: a gyro's ``angular_velocity`` and an accelerometer's
  ``linear_acceleration`` (x, y, z in the sensor frame; one topic may carry both);
- geometry_msgs/msg/WrenchStamped: a load cell's reading = axis . force (or torque), in the
  cell's frame; several load cells may read one topic (the components of a force-torque
  sensor's wrench, as ros2_control's force_torque_sensor_broadcaster publishes it): each
  message then gives a reading to every one of them, so they must share the rate and the frame
  and their axes of one component must be linearly independent (ValueError otherwise);
- std_msgs/msg/Float64: a load cell's reading as a plain number (no stamp: the receive time is
  used), only on a topic that one load cell reads.

Each decoded reading is (sensor name, stamp in ns, value); :meth:`InputRouter.decode_rows`
decodes many messages of one fixed layout at once (:class:`~mbfg_ros.io.cdr_layout.FixedRows`,
the replay's bulk path) into :class:`ReadingRows` with the same values and the same counts as
:meth:`InputRouter.decode` message by message. Malformed messages are counted per
topic with the reason, never raised. The frame and the noise of an Imu sensor come from the
config; an Imu message whose header.frame_id or covariance says otherwise is used all the same
and counted per topic in ``disagreements`` (the node warns once per topic and reason).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sensors.base import Reading, ReadingRows, TopicInput
from mbfg_ros.sensors.imu import IMU, NOISE_TOLERANCE  # noqa: F401
from mbfg_ros.sensors.joint_state import JOINT_STATE  # noqa: F401
from mbfg_ros.sensors.load_cell import FLOAT64, WRENCH_STAMPED, axis_component  # noqa: F401
from mbfg_ros.sensors.registry import channels, topic_inputs

__all__ = ["FLOAT64", "IMU", "JOINT_STATE", "WRENCH_STAMPED", "InputRouter", "Reading", "ReadingRows",
           "TopicRoute", "axis_component", "route_sensors"]

TopicRoute = TopicInput
"""What one topic feeds: its accepted types (``types``) and sensors (``sensors``)."""


class _TopicReport:
    """Counts a topic's problems and disagreements in the router's tables."""

    def __init__(self, router: "InputRouter", topic: str) -> None:
        self.router, self.topic = router, topic

    def problem(self, reason: str, n: int = 1) -> None:
        self.router._problem(self.topic, reason, n)

    def disagree(self, what: str, n: int = 1) -> None:
        self.router.disagreements.setdefault(self.topic, Counter())[what] += n


def route_sensors(route: TopicRoute) -> tuple[str, ...]:
    """The sensor names (and ``command:<joint>``) a topic feeds."""
    return route.sensors


class InputRouter:
    """Decodes the sensor topics of a mechanism config into estimator samples."""

    NOISE_TOLERANCE = NOISE_TOLERANCE

    def __init__(self, mech: Mechanism, remap: dict[str, str] | None = None,
                 namespace: str | None = None) -> None:
        """``namespace``: resolve the config's relative topics there (replay: "/", the bag's
        root); None keeps them as written (the node subscribes with them and ROS resolves them
        in its namespace). ``remap`` maps a (resolved) config topic to the topic actually
        carrying it (e.g. in a bag). ValueError when two sensors cannot share a topic (after
        the remapping), or when the sensors of a topic cannot read its messages together
        (:meth:`~mbfg_ros.sensors.base.TopicInput.check`: load cells of one WrenchStamped)."""
        remap = remap or {}
        self.routes: dict[str, TopicInput] = {}
        self.problems: dict[str, Counter] = {}
        self.disagreements: dict[str, Counter] = {}     # topic -> what disagrees -> messages
        self._reports: dict[str, _TopicReport] = {}

        def topic_of(topic: str) -> str:
            if namespace is not None:
                topic = resolve_topic(topic, namespace)
            return remap.get(topic, topic)
        self.routes = topic_inputs(channels(mech), topic_of)
        for route in self.routes.values():
            route.check()

    @property
    def topics(self) -> dict[str, tuple[str, ...]]:
        """{topic: accepted message types}."""
        return {t: r.types for t, r in self.routes.items()}

    def _problem(self, topic: str, reason: str, n: int = 1) -> list:
        self.problems.setdefault(topic, Counter())[reason] += n
        return []

    def _report(self, topic: str) -> _TopicReport:
        r = self._reports.get(topic)
        if r is None:
            r = self._reports[topic] = _TopicReport(self, topic)
        return r

    def decode(self, topic: str, msgtype: str, msg, receive_ns: int | None = None) -> list[Reading]:
        """The readings in one message (empty, and a counted problem, if it is unusable)."""
        r = self.routes.get(topic)
        if r is None:
            return self._problem(topic, "not a sensor topic of this config")
        if msgtype not in r.types:
            return self._problem(topic, f"message type {msgtype}, expected {' or '.join(r.types)}")
        try:
            return r.decode(msgtype, msg, receive_ns, self._report(topic))
        except (AttributeError, TypeError, ValueError) as exc:
            return self._problem(topic, f"malformed {msgtype}: {exc}")

    def decode_rows(self, topic: str, msgtype: str, rows, receive_ns: np.ndarray) -> list[ReadingRows]:
        """The readings in N messages of one layout (:class:`~mbfg_ros.io.cdr_layout.FixedRows`,
        ``receive_ns`` (N,) their log times): what :meth:`decode` gives message by message,
        and the same problems and disagreements, counted N times."""
        N = len(rows)
        r = self.routes.get(topic)
        if r is None:
            self._problem(topic, "not a sensor topic of this config", N)
            return []
        if msgtype not in r.types:
            self._problem(topic, f"message type {msgtype}, expected {' or '.join(r.types)}", N)
            return []
        return r.decode_rows(msgtype, rows, receive_ns, self._report(topic))
