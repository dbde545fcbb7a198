"""``python -m mbfg_ros.ros.latency_probe --estimator NAME --out FILE``: the subscriber of the
node benchmark (``mbfg benchmark --node``), in a process of its own.

It subscribes to the estimator's ``~/joint_states`` as serialized bytes (no decoding: the probe
should cost its machine little) with the message info, and records for every estimate its
header stamp (read from the CDR bytes: the keyframe's time), the time the estimator published
it (``source_timestamp``) and the time DDS delivered it here (``received_timestamp``; both
CLOCK_REALTIME ns, set by the middleware) and the time the callback ran (``time.time_ns()``).
It keeps the newest /diagnostics statuses of the estimator (by name: ``<estimator>: <status>``,
with their values) and counts the messages of every ``--topic`` (other outputs subscribed to so
that the estimator builds them; an output nobody subscribes to costs the node nothing).

Every ``--status-period`` s it writes a small JSON (``<out>.status.json``: estimates so far, the
newest stamp, when the newest estimate arrived, whether the estimator's publisher is matched,
the newest diagnostics) for the runner to follow; on SIGINT it writes ``<out>``, an ``.npz``
with the arrays ``stamp``, ``source``, ``received``, ``callback`` (int64 ns) and the final
status as JSON text in ``status``, and exits 0.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.node_runner import split_ros_args
from mbfg_ros.termination import follow_parent

RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
_STAMP = struct.Struct("<iI")


def header_stamp_ns(cdr: bytes) -> int:
    """The header stamp (ns) of a serialized message that starts with a std_msgs/Header (little
    endian CDR: 4 bytes of encapsulation, then sec int32 and nanosec uint32)."""
    sec, nanosec = _STAMP.unpack_from(cdr, 4)
    return sec * 1_000_000_000 + nanosec


class LatencyProbe(Node):
    """Records the estimator's estimates and diagnostics (see the module docstring)."""

    def __init__(self, estimator: str, out: Path, topics: list[tuple[str, str]],
                 status_period: float) -> None:
        super().__init__("mbfg_latency_probe", enable_rosout=False)
        self.estimator = estimator.rstrip("/")
        self.out = Path(out)
        self.status_path = self.out.with_name(self.out.name + ".status.json")
        self.stamp: list[int] = []
        self.source: list[int] = []
        self.received: list[int] = []
        self.callback_ns: list[int] = []
        self.diagnostics: dict[str, dict] = {}
        self.diagnostics_ns = 0                      # CLOCK_REALTIME when the newest arrived
        self.diagnostics_count = 0
        self.counts: dict[str, int] = {}
        joint_states = f"{self.estimator}/joint_states"
        self._estimates = self.create_subscription(message_class("sensor_msgs/msg/JointState"),
                                                   joint_states, self._on_estimate, RELIABLE, raw=True)
        self.create_subscription(message_class("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                 self._on_diagnostics, 10)
        for msgtype, topic in topics:
            if topic == joint_states:
                continue
            self.counts[topic] = 0
            self.create_subscription(message_class(msgtype), topic,
                                     lambda _m, topic=topic: self._count(topic), RELIABLE, raw=True)
        self.create_timer(status_period, self.write_status)

    def _on_estimate(self, cdr: bytes, info) -> None:
        now = time.time_ns()
        self.stamp.append(header_stamp_ns(cdr))
        self.source.append(int(info["source_timestamp"]))
        self.received.append(int(info["received_timestamp"]))
        self.callback_ns.append(now)

    def _count(self, topic: str) -> None:
        self.counts[topic] += 1

    def _on_diagnostics(self, msg) -> None:
        prefix = f"{self.estimator}: "
        mine = {s.name[len(prefix):]: {"level": s.level if isinstance(s.level, int)
                                       else int.from_bytes(s.level, "little"),
                                       "message": s.message, "values": {kv.key: kv.value for kv in s.values}}
                for s in msg.status if s.name.startswith(prefix)}
        if mine:
            self.diagnostics = mine
            self.diagnostics_ns = time.time_ns()
            self.diagnostics_count += 1

    def status(self) -> dict:
        return {"estimates": len(self.stamp),
                "newest_stamp_ns": self.stamp[-1] if self.stamp else None,
                "last_estimate_ns": self.callback_ns[-1] if self.callback_ns else None,
                "publisher_matched": self._estimates.get_publisher_count() > 0,
                "diagnostics_ns": self.diagnostics_ns, "diagnostics_count": self.diagnostics_count,
                "diagnostics": self.diagnostics, "topic_counts": dict(self.counts)}

    def write_status(self) -> None:
        tmp = self.status_path.with_name(self.status_path.name + ".tmp")
        tmp.write_text(json.dumps(self.status()))
        tmp.replace(self.status_path)

    def write_result(self) -> None:
        arrays = {name: np.asarray(getattr(self, name), dtype=np.int64)
                  for name in ("stamp", "source", "received")}
        arrays["callback"] = np.asarray(self.callback_ns, dtype=np.int64)
        tmp = self.out.with_name(self.out.name + ".tmp.npz")
        np.savez(tmp, status=np.array(json.dumps(self.status())), **arrays)
        tmp.replace(self.out)


def _arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="latency_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--estimator", default="/mbfg_estimator", help="the estimator's node name")
    p.add_argument("--out", required=True, metavar="FILE", help="the .npz written at the end")
    p.add_argument("--topic", action="append", default=[], metavar="TYPE:TOPIC",
                   help="another output to subscribe to and count (repeatable), e.g. "
                        "geometry_msgs/msg/WrenchStamped:/mbfg_estimator/forces/pin")
    p.add_argument("--status-period", type=float, default=0.25, metavar="S",
                   help="how often the status JSON is written (default 0.25 s)")
    args = p.parse_args(argv)
    topics = []
    for item in args.topic:
        msgtype, sep, topic = item.partition(":")
        if not sep or not topic:
            p.error(f"--topic expects TYPE:TOPIC (value: {item!r})")
        topics.append((msgtype, topic))
    args.topics = topics
    return args


def main(argv: list[str] | None = None) -> int:
    follow_parent()                    # no orphan when a runner dies
    argv, ros_args = split_ros_args(argv)
    args = _arguments(argv)
    rclpy.init(args=["latency_probe", *ros_args])
    node = None
    try:
        node = LatencyProbe(args.estimator, Path(args.out), args.topics, args.status_period)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        node.write_result()
        return 0
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
