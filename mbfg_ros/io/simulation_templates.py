"""A simulated rig's messages for a whole block of samples at once, from CDR byte templates.

The same messages as :mod:`mbfg_ros.io.simulation_messages` (sensor groups and ground truth,
same topics, stamps, receive times and bytes), built by its own message builders once per
message shape as :class:`~mbfg_ros.io.cdr_template.CdrTemplate` s and filled for every sample
of a block with numpy: no message object, no per-message serialisation. The live rig
(:mod:`mbfg_ros.ros.live_rig`) publishes them.

Covered: a JointState group (encoders, or known inputs, of one topic), an Imu group (at most one
gyro and one accelerometer), a WrenchStamped of one load cell; the ground truth (joint states,
dynamic joint states, closure and load-cell wrenches). A block with anything else (a
WrenchStamped shared by several load cells, two gyros on one topic, sensors of one topic at
different stamps, two samples of one sensor at one stamp, which the per-message path puts into
one message) is not covered: :meth:`SimulationTemplates.sensor_rows` returns None and the
caller takes the per-message path. Every template is checked against the ordinary
serialisation of the block's first message (:meth:`~mbfg_ros.io.cdr_template.CdrTemplate.matches`);
a mismatch also returns None. The field values are computed as the builders compute them (a
load cell's wrench is its reading times its axis, element by element), so every message is
the per-message path's bit for bit (test/io/test_simulation_templates.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_template import CdrTemplate
from mbfg_ros.io.simulation_messages import truth_topics
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.ground_truth import GroundTruth
from mbfg_ros.sensors.load_cell import component_wrench
from mbfg_ros.sim.sensors import SensorChannel, SensorSeries


@dataclass
class TopicRows:
    """N messages of one topic: receive (publish) times and header stamps (ns), CDR rows."""
    topic: str
    msgtype: str
    receive_ns: np.ndarray        # (N,) int64
    stamp_ns: np.ndarray          # (N,) int64
    rows: np.ndarray              # (N, L) uint8


def stamps_ns(t: np.ndarray, base_ns: int) -> np.ndarray:
    """``base_ns`` + ``t`` (s) in whole ns, as :func:`~mbfg_ros.io.messages.stamp_ns` rounds
    each (half to even)."""
    return int(base_ns) + np.rint(np.asarray(t, float) * 1e9).astype(np.int64)


@dataclass
class _Group:
    """One sensor message group's template and how its members' values fill it."""
    topic: str
    msgtype: str
    template: CdrTemplate
    values: Callable[[list[np.ndarray]], list[np.ndarray]]    # member values -> template arrays


class SimulationTemplates:
    """Templates of the messages of one simulated rig (``mech``: the truth Mechanism whose
    config carries the sensors; ``channels``: its sensor channels)."""

    def __init__(self, mech: Mechanism, channels: list[SensorChannel]) -> None:
        self.mech = mech
        self.channels = channels
        self._groups: dict[tuple[str, ...], _Group | None] = {}
        self._truth: list[tuple[str, str, CdrTemplate, str]] | None = None
        self._checked: set[CdrTemplate] = set()   # the templates checked against a message

    # ------------------------------------------------------------------------------------------
    def sensor_rows(self, series: list[SensorSeries], base_ns: int) -> list[TopicRows] | None:
        """The messages of the block's sensor ``series`` (stamps and receive times s from
        ``base_ns``), one TopicRows per message group; None when a group is not covered."""
        groups: dict[tuple[str, str], list[SensorSeries]] = {}
        for s in series:
            model = s.channel.model
            if not model.message_group:
                return None
            groups.setdefault((model.message_group, s.channel.topic), []).append(s)
        out = []
        for members in groups.values():
            first = members[0]
            if any(m.stamp.shape != first.stamp.shape or not np.array_equal(m.stamp, first.stamp)
                   or not np.array_equal(m.receive, first.receive) for m in members[1:]):
                return None
            group = self._group(tuple(m.channel.name for m in members))
            if group is None:
                return None
            if not first.stamp.size:
                continue
            if np.any(np.diff(first.stamp) == 0):
                return None          # samples of one stamp (jitter clipped at the block's ends): one message
            stamp = stamps_ns(first.stamp, base_ns)
            arrays = group.values([m.value for m in members])
            if not self._check(group.template, int(stamp[0]), arrays):
                return None
            out.append(TopicRows(group.topic, group.msgtype, stamps_ns(first.receive, base_ns), stamp,
                                 group.template.fill(stamp, arrays)))
        return out

    def truth_rows(self, truth: GroundTruth, base_ns: int) -> list[TopicRows] | None:
        """The ground-truth messages of ``truth`` (times s from ``base_ns``; receive = stamp),
        one TopicRows per topic; None if a template does not reproduce its message."""
        if self._truth is None:
            self._truth = self._truth_templates()
        if not truth.t.size:
            return []
        stamp = stamps_ns(truth.t, base_ns)
        sources = {"js": [truth.q, truth.v, truth.effort], "djs": [truth.q, truth.v, truth.a, truth.effort]}
        for k in range(len(truth.closure_names)):
            sources[f"closure{k}"] = [truth.closure_force[:, k], truth.closure_torque[:, k]]
        for k in range(len(truth.load_cell_names)):
            sources[f"cell{k}"] = list(component_wrench(truth.load_cell_components[k], truth.load_cell_axes[k],
                                                        truth.load_cells[:, k]))
        out = []
        for topic, msgtype, template, source in self._truth:
            if not self._check(template, int(stamp[0]), sources[source]):
                return None
            out.append(TopicRows(topic, msgtype, stamp, stamp, template.fill(stamp, sources[source])))
        return out

    # ------------------------------------------------------------------------------------------
    def _check(self, template: CdrTemplate, stamp_ns: int, arrays: list[np.ndarray]) -> bool:
        """Whether ``template`` gives the builder's bytes for the first row (checked once)."""
        if template in self._checked:
            return True
        if not template.matches(stamp_ns, [np.asarray(a)[0] for a in arrays]):
            return False
        self._checked.add(template)
        return True

    def _group(self, names: tuple[str, ...]) -> _Group | None:
        if names not in self._groups:
            self._groups[names] = self._make_group([next(c for c in self.channels if c.name == n) for n in names])
        return self._groups[names]

    def _make_group(self, members: list[SensorChannel]) -> _Group | None:
        """The template of one message group (:func:`~mbfg_ros.io.simulation_messages._message`'s
        messages), or None when not covered."""
        first = members[0]
        msgtype, topic, frame = first.model.message_type, first.topic, first.frame_id
        if msgtype == msgs.JOINT_STATE:
            parts = [m.model.message_part(np.zeros(1)) for m in members]
            field = "position" if "position" in parts[0] else "effort"
            if any(field not in p for p in parts):
                return None
            names = [p["name"] for p in parts]
            template = CdrTemplate(lambda ns, a: msgs.joint_state(ns, names, **{field: a[0]}), [len(members)])
            return _Group(topic, msgtype, template, lambda values: [np.hstack(values)])
        if msgtype == msgs.IMU:
            fields = [m.model.imu_field for m in members]
            if len(set(fields)) != len(fields):
                return None
            noise = {m.model.imu_field: float(m.model.config.noise) for m in members}
            order = sorted(range(len(members)), key=lambda i: fields[i] != "angular_velocity")
            widths = [3] * len(members)

            def build(ns, a):
                by_field = {fields[i]: a[k] for k, i in enumerate(order)}
                return msgs.imu(ns, frame, by_field.get("angular_velocity"), noise.get("angular_velocity", 0.0),
                                by_field.get("linear_acceleration"), noise.get("linear_acceleration", 0.0))
            return _Group(topic, msgtype, CdrTemplate(build, widths), lambda values: [values[i] for i in order])
        if msgtype == msgs.WRENCH_STAMPED and len(members) == 1:
            part = first.model.message_part(np.zeros(1))
            component, axis = part["component"], np.asarray(part["axis"], float)
            template = CdrTemplate(lambda ns, a: msgs.wrench_stamped(ns, frame, a[0], a[1]), [3, 3])
            return _Group(topic, msgtype, template,
                          lambda values: list(component_wrench(component, axis, values[0][:, 0])))
        return None

    def _truth_templates(self) -> list[tuple[str, str, CdrTemplate, str]]:
        """(topic, type, template, source) of every ground-truth topic, in
        :func:`~mbfg_ros.io.simulation_messages.truth_messages`' order."""
        mech = self.mech
        names = list(mech.joint_names)
        n = mech.n
        topics = list(truth_topics(mech))     # joint states, dynamic joint states, closures, cells
        out = [(topics[0], msgs.JOINT_STATE,
                CdrTemplate(lambda ns, a: msgs.joint_state(ns, names, a[0], a[1], a[2]), [n] * 3), "js"),
               (topics[1], msgs.DYNAMIC_JOINT_STATE,
                CdrTemplate(lambda ns, a: msgs.dynamic_joint_state(ns, names, {
                    "position": a[0], "velocity": a[1], "acceleration": a[2], "effort": a[3]}), [n] * 4), "djs")]
        frames = [c.frame_b for c in mech.closure_configs] + [c.header_frame(mech) for c in mech.load_cells]
        sources = [f"closure{k}" for k in range(len(mech.closure_configs))] + \
            [f"cell{k}" for k in range(len(mech.load_cells))]
        for topic, frame, source in zip(topics[2:], frames, sources):
            out.append((topic, msgs.WRENCH_STAMPED,
                        CdrTemplate(lambda ns, a, f=frame: msgs.wrench_stamped(ns, f, a[0], a[1]), [3, 3]), source))
        return out
