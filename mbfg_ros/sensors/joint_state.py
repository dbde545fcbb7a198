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

    def _reads(self, names, report: InputReport, n: int) -> list[tuple[int, str, str, str]]:
        """(place in the message, joint, field, sensor) of every reading a message listing the
        joints ``names`` holds for this topic; ``n`` messages without any joint of the config are
        counted."""
        out = [(i, joint, what, self.tables[what][joint]) for i, joint in enumerate(names)
               for what in self.FIELDS if joint in self.tables[what]]
        if not out:
            expected = ", ".join(sorted({j for t in self.tables.values() for j in t}))
            report.problem(f"no joint of this config in the message (expected {expected})", n)
        return out

    def decode(self, msgtype: str, msg, receive_ns: int | None, report: InputReport) -> list[Reading]:
        ns = stamp_ns(msg)
        columns = {f: list(getattr(msg, f)) for f in self.FIELDS}
        out = []
        for i, joint, what, sensor in self._reads(msg.name, report, 1):
            if i < len(columns[what]):
                out.append(Reading(sensor, ns, np.array([float(columns[what][i])])))
            else:
                report.problem(f"joint {joint} has no {what}")
        return out

    def decode_rows(self, msgtype: str, rows, receive_ns: np.ndarray, report: InputReport) -> list[ReadingRows]:
        msg = rows.template
        N = len(rows)
        stamps = rows.stamps_ns()
        columns: dict[str, np.ndarray] = {}
        out = []
        for i, joint, what, sensor in self._reads(msg.name, report, N):
            if i < len(getattr(msg, what)):
                if what not in columns:
                    columns[what] = rows.values(what)
                out.append(ReadingRows(sensor, stamps, columns[what][:, i:i + 1], len(out)))
            else:
                report.problem(f"joint {joint} has no {what}", N)
        return out
