"""Sensor samples and ground truth of a simulated run as standard ROS 2 messages.

Sensor topics (names and frame ids from the mechanism config):
- encoders: sensor_msgs/msg/JointState on the encoder's topic, ``position`` only, header.frame_id
  empty; encoders sampled together (same topic, same stamp) share one message listing every
  joint name;
- gyros: sensor_msgs/msg/Imu on its topic, header.frame_id = the gyro's ``frame_id``,
  angular_velocity (x, y, z) rad/s, angular_velocity_covariance diagonal noise^2,
  orientation_covariance[0] = -1 and linear_acceleration_covariance[0] = -1 (not provided);
- load cells: geometry_msgs/msg/WrenchStamped on its topic, header.frame_id = the frame of the
  cell's axis, the reading times the axis in ``force`` (component force) or ``torque``; load
  cells sampled together (same topic, same stamp: a force-torque sensor's components) share one
  message whose force (torque) is the vector their readings of that component give (exact:
  their axes of one component are independent, :class:`~mbfg_ros.io.sensor_inputs.InputRouter`);
- known inputs: sensor_msgs/msg/JointState with ``effort`` on the joint's ``topic`` (default
  /joint_commands), one message per stamp listing the known-input joints of that topic.

Ground truth under the config's ``truth_namespace`` ``<ns>`` (default /truth):
- ``<ns>/joint_states``: sensor_msgs/msg/JointState, position, velocity, effort (applied
  actuator effort) of every joint;
- ``<ns>/dynamic_joint_states``: control_msgs/msg/DynamicJointState (as ros2_control's
  joint_state_broadcaster publishes it), every joint with the interfaces position, velocity,
  acceleration and effort;
- ``<ns>/forces/<closure name>``: geometry_msgs/msg/WrenchStamped, the closure's reaction on
  frame_b's body at frame_b's origin, in frame_b (header.frame_id = frame_b);
- ``<ns>/forces/<load cell name>``: geometry_msgs/msg/WrenchStamped, the cell's true reading as in
  its sensor message.

Every header.stamp is the sample time (epoch + stamp); every log (receive) time is
epoch + receive (stamp + delay for sensors; the stamp for ground truth).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.ground_truth import GroundTruth
from mbfg_ros.sim.sensors import Sample, SensorChannel, sensor_channels


@dataclass(frozen=True)
class BagMessage:
    """One message to write: topic, ROS type name, log (receive) time in ns, the message."""
    topic: str
    msgtype: str
    log_time_ns: int
    msg: object


def _join(namespace: str, name: str) -> str:
    return namespace.rstrip("/") + "/" + name.lstrip("/")


def truth_topics(mech: Mechanism) -> dict[str, str]:
    """{topic: message type} of the ground truth of ``mech``'s config."""
    ns = mech.config.truth_namespace or "/truth"
    out = {_join(ns, "joint_states"): msgs.JOINT_STATE,
           _join(ns, "dynamic_joint_states"): msgs.DYNAMIC_JOINT_STATE}
    for name in [*mech.closure_names, *(c.config.name for c in mech.load_cells)]:
        topic = _join(ns, f"forces/{name}")
        if topic in out:
            raise MbfgError(f"the ground-truth topic {topic} would carry two forces: a closure and "
                            f"a load cell are both named {name!r}; rename one in the config")
        out[topic] = msgs.WRENCH_STAMPED
    return out


def sensor_topics(mech: Mechanism) -> dict[str, str]:
    """{topic: message type} of the sensors and known inputs of ``mech``'s config; MbfgError
    for sensors that cannot share their topic (the rules the node and the replay read by)."""
    try:
        InputRouter(mech)
    except ValueError as exc:
        raise MbfgError(str(exc)) from None
    kinds = {"encoder": msgs.JOINT_STATE, "command": msgs.JOINT_STATE, "gyro": msgs.IMU,
             "load_cell": msgs.WRENCH_STAMPED}
    out: dict[str, str] = {}
    for ch in sensor_channels(mech):
        t = kinds[ch.kind]
        if out.setdefault(ch.topic, t) != t:
            raise MbfgError(f"topic {ch.topic} would carry both {out[ch.topic]} and {t}: give the "
                            f"sensor {ch.name!r} its own topic in the config")
    return out


def _load_cell_wrench(component: str, axis: np.ndarray, value: float) -> tuple[np.ndarray, np.ndarray]:
    vec = float(value) * np.asarray(axis, float)
    zero = np.zeros(3)
    return (vec, zero) if component == "force" else (zero, vec)


def _load_cells_wrench(cells: list, values: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """(force, torque) whose components along each cell's axis are its reading (``cells``:
    LoadCellModel; one cell: the reading times its axis)."""
    out = []
    for component in ("force", "torque"):
        rows = [(c.axis, v) for c, v in zip(cells, values) if c.config.component == component]
        if len(rows) == 1:
            out.append(_load_cell_wrench(component, rows[0][0], rows[0][1])[component == "torque"])
        elif rows:
            A = np.array([a for a, _ in rows], float)
            out.append(np.linalg.lstsq(A, np.array([v for _, v in rows], float), rcond=None)[0])
        else:
            out.append(np.zeros(3))
    return out[0], out[1]


def sensor_messages(samples: Iterable[Sample], mech: Mechanism, epoch_ns: int,
                    channels: list[SensorChannel] | None = None) -> Iterator[BagMessage]:
    """Messages of ``samples`` (sorted by receive time) for ``mech``'s sensors; JointState
    samples of one topic with the same stamp and receive time are merged into one message, and
    so are the load cells of one topic (one WrenchStamped)."""
    by_name = {ch.name: ch for ch in (channels or sensor_channels(mech))}
    pending: list[Sample] = []

    def flush() -> Iterator[BagMessage]:
        merged: dict[tuple[str, str, float], list[Sample]] = {}
        for s in pending:
            ch = by_name[s.sensor]
            if s.kind in ("encoder", "command", "load_cell"):
                merged.setdefault((s.kind, ch.topic, s.stamp), []).append(s)
        for s in pending:               # gyros, and a topic's load cells where the first one is
            ch = by_name[s.sensor]
            if s.kind == "gyro":
                yield _imu(s, ch)
            elif s.kind == "load_cell" and ("load_cell", ch.topic, s.stamp) in merged:
                yield _wrench(merged.pop(("load_cell", ch.topic, s.stamp)), ch)
        for (kind, topic, stamp), group in merged.items():
            ns = msgs.stamp_ns(stamp, epoch_ns)
            names = [by_name[s.sensor].joint for s in group]
            values = [float(s.value[0]) for s in group]
            msg = (msgs.joint_state(ns, names, position=values) if kind == "encoder"
                   else msgs.joint_state(ns, names, effort=values))
            yield BagMessage(topic, msgs.JOINT_STATE, msgs.stamp_ns(group[0].receive, epoch_ns), msg)
        pending.clear()

    def _imu(s: Sample, ch: SensorChannel) -> BagMessage:
        ns = msgs.stamp_ns(s.stamp, epoch_ns)
        log = msgs.stamp_ns(s.receive, epoch_ns)
        return BagMessage(ch.topic, msgs.IMU, log, msgs.imu(ns, ch.frame_id, s.value, ch.noise))

    def _wrench(group: list[Sample], ch: SensorChannel) -> BagMessage:
        f, t = _load_cells_wrench([mech.load_cells[by_name[s.sensor].index] for s in group],
                                  [float(s.value[0]) for s in group])
        ns = msgs.stamp_ns(group[0].stamp, epoch_ns)
        log = msgs.stamp_ns(group[0].receive, epoch_ns)
        return BagMessage(ch.topic, msgs.WRENCH_STAMPED, log, msgs.wrench_stamped(ns, ch.frame_id, f, t))

    current = None
    for s in samples:
        if s.sensor not in by_name:
            raise MbfgError(f"sample of unknown sensor {s.sensor!r} (this rig has: "
                            f"{', '.join(by_name) or 'none'})")
        if current is not None and s.receive != current:
            yield from flush()
        current = s.receive
        pending.append(s)
    yield from flush()


def truth_messages(truth: GroundTruth, mech: Mechanism, epoch_ns: int) -> Iterator[BagMessage]:
    """The ground-truth messages of every sample of ``truth``, in time order (log time = stamp)."""
    topics = truth_topics(mech)
    ns_root = mech.config.truth_namespace or "/truth"
    js_topic = _join(ns_root, "joint_states")
    acc_topic = _join(ns_root, "dynamic_joint_states")
    closure_topics = [_join(ns_root, f"forces/{n}") for n in truth.closure_names]
    cell_topics = [_join(ns_root, f"forces/{n}") for n in truth.load_cell_names]
    assert all(t in topics for t in closure_topics + cell_topics)
    names = truth.joint_names
    for i, t in enumerate(truth.t):
        ns = msgs.stamp_ns(t, epoch_ns)
        yield BagMessage(js_topic, msgs.JOINT_STATE, ns,
                         msgs.joint_state(ns, names, truth.q[i], truth.v[i], truth.effort[i]))
        yield BagMessage(acc_topic, msgs.DYNAMIC_JOINT_STATE, ns,
                         msgs.dynamic_joint_state(ns, names, {
                             "position": truth.q[i], "velocity": truth.v[i],
                             "acceleration": truth.a[i], "effort": truth.effort[i]}))
        for k, topic in enumerate(closure_topics):
            yield BagMessage(topic, msgs.WRENCH_STAMPED, ns,
                             msgs.wrench_stamped(ns, truth.closure_frames[k], truth.closure_force[i, k],
                                                 truth.closure_torque[i, k]))
        for k, topic in enumerate(cell_topics):
            f, tq = _load_cell_wrench(truth.load_cell_components[k], truth.load_cell_axes[k],
                                      truth.load_cells[i, k])
            yield BagMessage(topic, msgs.WRENCH_STAMPED, ns,
                             msgs.wrench_stamped(ns, truth.load_cell_frames[k], f, tq))
