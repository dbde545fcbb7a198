"""Sensor messages -> estimator samples: the one decoder the ROS node and the replay tool share.

It reads messages by attribute (``msg.header.stamp.sec``, ``msg.name``, ...), which rclpy
messages and rosbags messages have alike. For every topic of the mechanism config it knows the
accepted message types and which sensors the topic feeds:

- sensor_msgs/msg/JointState: encoders (``position`` by joint name; joints the config does not
  measure on that topic are ignored) and known inputs (``effort`` by joint name);
- sensor_msgs/msg/Imu: a gyro's ``angular_velocity`` (x, y, z in the sensor frame);
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
topic with the reason, never raised. The frame and the noise of a gyro come from the config; an
Imu message whose header.frame_id or angular_velocity_covariance says otherwise is used all the
same and counted per topic in ``disagreements`` (the node warns once per topic and reason).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from mbfg_ros.model.channels import command_channel
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


@dataclass(frozen=True)
class ReadingRows:
    """One sensor's readings from N messages of one layout: stamps (N,) int64 ns, values (N, k);
    ``rank``: where :meth:`InputRouter.decode` puts them in one message's list of readings."""
    sensor: str
    stamp_ns: np.ndarray
    value: np.ndarray
    rank: int


def axis_component(axis: np.ndarray, x, y, z):
    """axis . (x, y, z), for numbers or arrays alike (bit for bit the same either way)."""
    return axis[0] * x + axis[1] * y + axis[2] * z


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
    load_cells: dict[str, tuple[np.ndarray, str]] = field(default_factory=dict)  # name -> (axis, component)


def _check_shared_wrench(topic: str, cells: list) -> None:
    """ValueError unless the load cells ``cells`` (LoadCellModel) can share the WrenchStamped
    topic ``topic``: every message gives each of them a reading, so they have one rate and one
    frame (the message's frame_id), and the axes of each component are linearly independent
    (at most three: two cells along one direction would read the same number twice)."""
    names = ", ".join(c.config.name for c in cells)
    if len({c.config.rate for c in cells}) > 1:
        raise ValueError(f"load cells {names} read one message on {topic}: they need the same rate "
                         f"(rates: {', '.join(f'{c.config.rate:g}' for c in cells)} Hz)")
    if len({c.frame_id for c in cells}) > 1:
        raise ValueError(f"load cells {names} read one message on {topic}: they need the same "
                         "frame (a WrenchStamped has one frame_id)")
    for component in ("force", "torque"):
        axes = np.array([c.axis for c in cells if c.config.component == component]).reshape(-1, 3)
        if axes.shape[0] > np.linalg.matrix_rank(axes, tol=1e-6):
            raise ValueError(f"load cells {names} read one message on {topic}: the axes of their "
                             f"{component} components must be linearly independent")


def route_sensors(route: TopicRoute) -> tuple[str, ...]:
    """The sensor names (and ``command:<joint>``) a topic feeds."""
    out = list(route.encoders.values()) + list(route.commands.values())
    if route.gyro:
        out.append(route.gyro)
    out.extend(route.load_cells)
    return tuple(out)


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
            route(mech.config.joint(name).topic, (JOINT_STATE,)).commands[name] = command_channel(name)
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
            r.load_cells[c.config.name] = (np.asarray(c.config.axis, float), c.config.component)
        for r in self.routes.values():
            if len(r.load_cells) > 1:
                _check_shared_wrench(r.topic, [c for c in mech.load_cells if c.config.name in r.load_cells])
                r.types = (WRENCH_STAMPED,)        # a Float64 holds one number

    @property
    def topics(self) -> dict[str, tuple[str, ...]]:
        """{topic: accepted message types}."""
        return {t: r.types for t, r in self.routes.items()}

    def _problem(self, topic: str, reason: str, n: int = 1) -> list[Reading]:
        self.problems.setdefault(topic, Counter())[reason] += n
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
                ns = _stamp_ns(msg)
                out = []
                for name, (axis, component) in r.load_cells.items():
                    v = msg.wrench.force if component == "force" else msg.wrench.torque
                    value = float(axis_component(axis, float(v.x), float(v.y), float(v.z)))
                    out.append(Reading(name, ns, np.array([value])))
                return out
            if msgtype == FLOAT64:
                if receive_ns is None:
                    return self._problem(topic, "std_msgs/Float64 has no stamp and no receive time is known")
                (name,) = r.load_cells
                return [Reading(name, int(receive_ns), np.array([float(msg.data)]))]
        except (AttributeError, TypeError, ValueError) as exc:
            return self._problem(topic, f"malformed {msgtype}: {exc}")
        return self._problem(topic, f"unsupported type {msgtype}")

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
        if msgtype == FLOAT64:
            (name,) = r.load_cells
            return [ReadingRows(name, np.asarray(receive_ns, np.int64), rows.values("data"), 0)]
        stamps = rows.stamps_ns()
        if msgtype == WRENCH_STAMPED:
            out = []
            for rank, (name, (axis, component)) in enumerate(r.load_cells.items()):
                v = rows.values("wrench.force" if component == "force" else "wrench.torque")
                value = axis_component(axis, v[:, 0], v[:, 1], v[:, 2])
                out.append(ReadingRows(name, stamps, value.reshape(N, 1), rank))
            return out
        if msgtype == IMU:
            out = [ReadingRows(r.gyro, stamps, rows.values("angular_velocity"), 0)]
            self._check_imu_rows(r, rows)
            return out
        return self._joint_state_rows(r, rows, stamps)

    def _joint_state_rows(self, r: TopicRoute, rows, stamps: np.ndarray) -> list[ReadingRows]:
        msg = rows.template
        N = len(rows)
        columns = {"position": (len(msg.position), None), "effort": (len(msg.effort), None)}
        out = []
        matched = False
        for i, joint in enumerate(msg.name):
            for table, what in ((r.encoders, "position"), (r.commands, "effort")):
                sensor = table.get(joint)
                if sensor is None:
                    continue
                matched = True
                size, col = columns[what]
                if i < size:
                    if col is None:
                        col = rows.values(what)
                        columns[what] = (size, col)
                    out.append(ReadingRows(sensor, stamps, col[:, i:i + 1], len(out)))
                else:
                    self._problem(r.topic, f"joint {joint} has no {what}", N)
        if not matched:
            self._problem(r.topic, "no joint of this config in the message "
                                   f"(expected {', '.join(sorted({**r.encoders, **r.commands}))})", N)
        return out

    def _check_imu_rows(self, r: TopicRoute, rows) -> None:
        """:meth:`_check_imu` for N messages of one layout."""
        cov = rows.values("angular_velocity_covariance") \
            if len(rows.template.angular_velocity_covariance) == 9 else None
        self._check_imu_values(r, rows.template.header.frame_id, cov, len(rows))

    def _check_imu_values(self, r: TopicRoute, frame: str, cov: np.ndarray | None, n: int) -> None:
        """The checks of :meth:`_check_imu` for ``n`` messages with header.frame_id ``frame`` and
        angular velocity covariances ``cov`` (n, 9) (None: not 9 numbers), each counted."""
        if frame != r.gyro_frame_id:
            self._disagree(r.topic, f"header.frame_id {frame!r} differs from the config's frame_id "
                                    f"{r.gyro_frame_id!r} (the config's frame is used)", n)
        if cov is None:
            return
        given = np.any(cov != 0.0, axis=1)
        missing = given & (cov[:, 0] == -1.0)
        if missing.any():
            self._disagree(r.topic, "angular_velocity_covariance[0] = -1 marks the angular "
                                    "velocity as not provided (it is used)", int(missing.sum()))
        rest = given & ~missing
        if not rest.any():
            return
        std = np.sqrt(np.maximum(cov[rest][:, [4 * i for i in r.gyro_axes]], 0.0))
        off = np.any(np.abs(std - r.gyro_noise) > self.NOISE_TOLERANCE * r.gyro_noise, axis=1)
        if not off.any():
            return
        axes = "".join("xyz"[i] for i in r.gyro_axes)
        values, counts = np.unique(std[off], axis=0, return_counts=True)
        for row, k in zip(values, counts):
            self._disagree(r.topic, f"angular_velocity_covariance gives a noise of "
                                    f"{', '.join(f'{x:.3g}' for x in row)} rad/s on {axes}, the config "
                                    f"{r.gyro_noise:.3g} rad/s (the config's noise is used)", int(k))

    NOISE_TOLERANCE = 0.05
    """Relative difference between the Imu's standard deviation and the config's noise that is
    reported (the message's covariance rounded, a unit slip, a different sensor)."""

    def _check_imu(self, r: TopicRoute, msg) -> None:
        """Count what an Imu message says that the config does not: its frame_id, and its
        angular velocity covariance on the measured axes (all zeros: unknown, REP 145; -1 in
        the first element: not provided)."""
        cov = np.asarray(msg.angular_velocity_covariance, float)
        self._check_imu_values(r, msg.header.frame_id, cov.reshape(1, 9) if cov.size == 9 else None, 1)

    def _disagree(self, topic: str, what: str, n: int = 1) -> None:
        self.disagreements.setdefault(topic, Counter())[what] += n

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
