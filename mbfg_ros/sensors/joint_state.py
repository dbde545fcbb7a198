"""sensor_msgs/msg/JointState as sensor input: joints matched by name, one field per sensor kind
(an encoder's ``position``, a known input's ``effort``). Joints the config does not read on that
topic are ignored; several encoders and known inputs may share one topic."""
from __future__ import annotations

import numpy as np

from mbfg_ros.sensors.base import InputReport, Reading, ReadingRows, TopicInput, stamp_ns

JOINT_STATE = "sensor_msgs/msg/JointState"


class JointStateInput(TopicInput):
    """A JointState topic: per field (``position``, ``effort``) the sensor of each joint; a joint's
    position is read before its effort, joints in the message's order."""

    types = (JOINT_STATE,)
    FIELDS = ("position", "effort")

    def __init__(self, topic: str) -> None:
        super().__init__(topic)
        self.tables: dict[str, dict[str, str]] = {f: {} for f in self.FIELDS}   # field -> joint -> sensor

    @property
    def sensors(self) -> tuple[str, ...]:
        return tuple(s for f in self.FIELDS for s in self.tables[f].values())

    def add(self, model) -> None:
        self.tables[model.joint_state_field][model.joint] = model.name

    def _expected(self) -> str:
        return ", ".join(sorted({j for t in self.tables.values() for j in t}))

    def decode(self, msgtype: str, msg, receive_ns: int | None, report: InputReport) -> list[Reading]:
        ns = stamp_ns(msg)
        columns = {f: list(getattr(msg, f)) for f in self.FIELDS}
        out = []
        matched = False
        for i, joint in enumerate(msg.name):
            for what in self.FIELDS:
                sensor = self.tables[what].get(joint)
                if sensor is None:
                    continue
                matched = True
                values = columns[what]
                if i < len(values):
                    out.append(Reading(sensor, ns, np.array([float(values[i])])))
                else:
                    report.problem(f"joint {joint} has no {what}")
        if not matched:
            report.problem(f"no joint of this config in the message (expected {self._expected()})")
        return out

    def decode_rows(self, msgtype: str, rows, receive_ns: np.ndarray, report: InputReport) -> list[ReadingRows]:
        msg = rows.template
        N = len(rows)
        stamps = rows.stamps_ns()
        columns = {f: (len(getattr(msg, f)), None) for f in self.FIELDS}
        out = []
        matched = False
        for i, joint in enumerate(msg.name):
            for what in self.FIELDS:
                sensor = self.tables[what].get(joint)
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
                    report.problem(f"joint {joint} has no {what}", N)
        if not matched:
            report.problem(f"no joint of this config in the message (expected {self._expected()})", N)
        return out
