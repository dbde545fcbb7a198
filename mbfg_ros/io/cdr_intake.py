"""Serialized sensor messages -> readings: the live node's intake, in bulk where it can.

The ``estimator`` node takes every message waiting on a topic at once, as the CDR bytes DDS
delivered (rclpy's ``raw`` subscriptions: no Python message object per message). Messages of one
fixed layout (the same joint names, frame id and array lengths every time: what a driver
publishes) are decoded together with numpy through :class:`~mbfg_ros.io.cdr_layout.CdrLayout`
and :meth:`~mbfg_ros.io.sensor_inputs.InputRouter.decode_rows`, the replay's bulk path; a
layout is learned from the first message of each size on each topic (at most
:data:`MAX_LAYOUTS` per size). Every other message (another layout, std_msgs/Float64, a message
that does not deserialize) takes the per-message path: deserialized with the rosbags typestore
and decoded by :meth:`~mbfg_ros.io.sensor_inputs.InputRouter.decode`. Both give the same
readings, in the same order, with the same problems counted (test/io/test_cdr_intake.py).
No ROS imports.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_layout import CdrLayout
from mbfg_ros.io.sensor_inputs import FLOAT64, InputRouter

MAX_LAYOUTS = 4
"""Layouts learned per (topic, type, message size); messages matching none go one by one."""

BULK_MIN = 4
"""Fewest messages of one take decoded through a layout: numpy's fixed cost per call makes the
bulk path slower than the per-message one below it (JointState of 7 joints, 2 vCPU: one message
~40 us either way at 4, bulk ~4 us per message at 50; one alone ~2x slower in bulk)."""

IntakeReading = tuple[str, int, np.ndarray]
"""(sensor, header stamp ns, value): one reading, in the order the messages came."""


class CdrIntake:
    """Decodes serialized messages of the ``router``'s topics (see the module docstring)."""

    def __init__(self, router: InputRouter, bulk: bool = True) -> None:
        self.router = router
        self.bulk = bulk
        store = msgs.typestore()
        self._deserialize, self._serialize = store.deserialize_cdr, store.serialize_cdr
        self._layouts: dict[tuple[str, str, int], list[CdrLayout | None]] = {}
        self.bulk_messages = 0          # messages decoded through a layout
        self.single_messages = 0        # messages decoded one by one

    def decode(self, topic: str, msgtype: str, raws: Sequence[bytes],
               receive_ns: Sequence[int]) -> list[IntakeReading]:
        """The readings of the messages ``raws`` (CDR bytes, receive order) of ``topic``, received
        at ``receive_ns`` (node clock, one per message: a Float64's stamp); unusable messages
        are counted by the router (``problems``), as :meth:`InputRouter.decode` counts them."""
        N = len(raws)
        if not N:
            return []
        route = self.router.routes.get(topic)
        if not self.bulk or N < BULK_MIN or msgtype == FLOAT64 or route is None or msgtype not in route.types:
            return self._single(topic, msgtype, raws, receive_ns, range(N))
        per_message: list[list[IntakeReading] | None] = [None] * N
        rest = self._fixed(topic, msgtype, raws, receive_ns, per_message)
        for i in rest:
            per_message[i] = self._single(topic, msgtype, raws, receive_ns, (i,))
        if not rest and len(per_message) == 1:
            return per_message[0]
        return [r for readings in per_message for r in readings]

    # ------------------------------------------------------------------------------------------
    def _fixed(self, topic: str, msgtype: str, raws: Sequence[bytes], receive_ns: Sequence[int],
               per_message: list) -> list[int]:
        """Decode the messages that match a layout into ``per_message``; returns the others' indexes."""
        groups, rest = split_by_layout(
            raws, lambda size: self._layouts.setdefault((topic, msgtype, size), []), msgtype,
            self._deserialize, self._serialize)
        for layout, data, where in groups:
            self._decode_rows(topic, msgtype, layout, data, where, receive_ns, per_message)
        return rest

    def _decode_rows(self, topic: str, msgtype: str, layout: CdrLayout, data: np.ndarray, where: list[int],
                     receive_ns: Sequence[int], per_message: list) -> None:
        recv = np.array([receive_ns[i] for i in where], np.int64)
        decoded = self.router.decode_rows(topic, msgtype, layout.decode(data), recv)
        decoded.sort(key=lambda rr: rr.rank)
        columns = [(rr.sensor, rr.stamp_ns.tolist(), rr.value) for rr in decoded]
        for k, i in enumerate(where):
            per_message[i] = [(sensor, stamps[k], value[k]) for sensor, stamps, value in columns]
        self.bulk_messages += len(where)

    def _single(self, topic: str, msgtype: str, raws: Sequence[bytes], receive_ns: Sequence[int],
                which) -> list[IntakeReading]:
        out: list[IntakeReading] = []
        router = self.router
        for i in which:
            try:
                msg = self._deserialize(bytes(raws[i]), msgtype)
            except Exception as exc:                # noqa: BLE001 - any corrupt message
                router._problem(topic, f"cannot deserialize {msgtype}: {type(exc).__name__}")
                continue
            out.extend((r.sensor, r.stamp_ns, r.value) for r in router.decode(topic, msgtype, msg, receive_ns[i]))
            self.single_messages += 1
        return out


LayoutGroup = tuple[CdrLayout, np.ndarray, list[int]]
"""(a layout, the rows (N, size) of the messages matching it, their indexes in the batch)."""


def split_by_layout(raws: Sequence[bytes], layouts_of: Callable[[int], list], msgtype: str,
                    deserialize, serialize, most: int = MAX_LAYOUTS) -> tuple[list[LayoutGroup], list[int]]:
    """Group a batch of serialized messages ``raws`` by the fixed layout each matches: per
    message size, the layouts learned so far (``layouts_of(size)``: a list kept by the caller;
    a layout is learned here from the first message matching none, at most ``most`` per size,
    None where a message has none). Returns the groups and the sorted indexes of the messages
    matching no layout (to be decoded one by one)."""
    by_size: dict[int, list[int]] = {}
    for i, raw in enumerate(raws):
        by_size.setdefault(len(raw), []).append(i)
    groups: list[LayoutGroup] = []
    rest: list[int] = []
    for size, idx in by_size.items():
        data = np.frombuffer(b"".join(raws[i] for i in idx), np.uint8).reshape(len(idx), size)
        todo = np.arange(len(idx))
        layouts = layouts_of(size)

        def take(layout: CdrLayout) -> None:
            nonlocal todo
            ok = layout.matches(data[todo])
            if ok.any():
                groups.append((layout, data[todo[ok]], [idx[int(j)] for j in todo[ok]]))
            todo = todo[~ok]

        for layout in layouts:
            if layout is not None and todo.size:
                take(layout)
        while todo.size and len(layouts) < most:
            layout = CdrLayout.learn(raws[idx[int(todo[0])]], msgtype, deserialize, serialize)
            layouts.append(layout)
            if layout is None:
                break
            take(layout)
        rest.extend(idx[int(j)] for j in todo)
    rest.sort()
    return groups, rest
