"""Sensor samples and ground truth of a simulated run as standard ROS 2 messages.

Sensor topics (names and frame ids from the mechanism config):
- encoders: sensor_msgs/msg/JointState on the encoder's topic, ``position`` only, header.frame_id
  empty; encoders sampled together (same topic, same stamp) share one message listing every
  joint name;
- gyros and accelerometers: sensor_msgs/msg/Imu on its topic, header.frame_id = the sensor's
  ``frame_id``, angular_velocity (x, y, z) rad/s and linear_acceleration (x, y, z) m/s^2 with
  their covariances diagonal noise^2; orientation_covariance[0] = -1 (not provided), and so for
  the field of a sensor the topic does not carry (a gyro and an accelerometer sharing a topic
  share its messages);
- load cells: geometry_msgs/msg/WrenchStamped on its topic, header.frame_id = the frame of the
  cell's axis, the reading times the axis in ``force`` (component force) or ``torque``; load
  cells sampled together (same topic, same stamp: a force-torque sensor's components) share one
  message whose force (torque) is the vector their readings of that component give (exact:
  their axes of one component are independent, :meth:`~mbfg_ros.sensors.load_cell.WrenchInput.check`);
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

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.sensor_inputs import InputRouter
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sensors.load_cell import component_wrench, shared_wrench
from mbfg_ros.sim.ground_truth import GroundTruth
from mbfg_ros.sim.sensors import Sample, SensorChannel, sensor_channels

MESSAGE_ORDER = {msgs.JOINT_STATE: 1}
"""Messages of one receive time are written in this order of their type (others 0 first, then the
JointStates), each type in the order of its first sample."""


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
    out: dict[str, str] = {}
    for ch in sensor_channels(mech):
        t = ch.model.message_type
        if out.setdefault(ch.topic, t) != t:
            raise MbfgError(f"topic {ch.topic} would carry both {out[ch.topic]} and {t}: give the "
                            f"sensor {ch.name!r} its own topic in the config")
    return out


def _message(msgtype: str, ns: int, frame_id: str, parts: list[dict]):
    """The message of one sample group's readings (each sensor's
    :meth:`~mbfg_ros.sensors.base.SensorModel.message_part`)."""
    if msgtype == msgs.JOINT_STATE:
        names = [p["name"] for p in parts]
        if "position" in parts[0]:
            return msgs.joint_state(ns, names, position=[p["position"] for p in parts])
        return msgs.joint_state(ns, names, effort=[p["effort"] for p in parts])
    if msgtype == msgs.IMU:
        fields = {k: v for p in parts for k, v in p.items()}
        return msgs.imu(ns, frame_id, fields.get("angular_velocity"), fields.get("angular_velocity_noise", 0.0),
                        fields.get("linear_acceleration"), fields.get("linear_acceleration_noise", 0.0))
    if msgtype == msgs.WRENCH_STAMPED:
        return msgs.wrench_stamped(ns, frame_id, *shared_wrench(parts))
    raise MbfgError(f"the simulator cannot write {msgtype}")


def sensor_messages(samples: Iterable[Sample], mech: Mechanism, epoch_ns: int,
                    channels: list[SensorChannel] | None = None) -> Iterator[BagMessage]:
    """Messages of ``samples`` (sorted by receive time) for ``mech``'s sensors; samples of one
    message group (encoders, or known inputs, or an Imu's sensors, or the load cells of one
    WrenchStamped) on one topic with the same stamp and receive time are merged into one message."""
    by_name = {ch.name: ch for ch in (channels or sensor_channels(mech))}
    pending: list[Sample] = []

    def flush() -> Iterator[BagMessage]:
        merged: dict[tuple, list[Sample]] = {}
        for i, s in enumerate(pending):
            model = by_name[s.sensor].model
            if not model.message_group:
                key: tuple = (i,)                       # a message of its own
            else:
                key = (model.message_group, model.topic, s.stamp, 0)
                if model.message_type != msgs.JOINT_STATE:   # one field per sensor: a repeat starts another
                    while any(x.sensor == s.sensor for x in merged.get(key, ())):
                        key = key[:3] + (key[3] + 1,)
            merged.setdefault(key, []).append(s)
        groups = sorted(merged.values(), key=lambda g: MESSAGE_ORDER.get(by_name[g[0].sensor].model.message_type, 0))
        for group in groups:
            topic, stamp = by_name[group[0].sensor].topic, group[0].stamp
            ch = by_name[group[0].sensor]
            msgtype = ch.model.message_type
            msg = _message(msgtype, msgs.stamp_ns(stamp, epoch_ns), ch.frame_id,
                           [by_name[s.sensor].model.message_part(s.value) for s in group])
            yield BagMessage(topic, msgtype, msgs.stamp_ns(group[0].receive, epoch_ns), msg)
        pending.clear()

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
            f, tq = component_wrench(truth.load_cell_components[k], truth.load_cell_axes[k],
                                      truth.load_cells[i, k])
            yield BagMessage(topic, msgs.WRENCH_STAMPED, ns,
                             msgs.wrench_stamped(ns, truth.load_cell_frames[k], f, tq))
