"""A TF buffer for the HIL tests: filled from /tf and /tf_static over DDS, looked up like tf2.

With tf2_ros importable (a ROS machine) it is ``tf2_ros.Buffer`` with a ``TransformListener``;
in the pip environment (no tf2_ros) it is :class:`TfBuffer`, fed by real subscriptions with
tf2_ros's QoS (/tf_static transient-local, so a late joiner gets the static frames, as with
tf2). Either way :meth:`TfRecorder.lookup` answers what ``lookup_transform(target, source,
stamp)`` answers: the pose of ``source`` in ``target`` at ``stamp`` (4x4), or LookupError when
the frames are not connected or a moving link has no data around the stamp (tf2 never
extrapolates). :class:`TfRecorder` also records the header frame ids (and stamps) of other
topics, so a test can look every published frame id up.
"""
from __future__ import annotations

import threading
from bisect import bisect_left
from collections import defaultdict

import numpy as np
from rclpy.qos import qos_profile_sensor_data

from mbfg_ros.ros.background_node import BackgroundNode
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.tf_publisher import TF_QOS, TF_STATIC_QOS

try:
    import tf2_ros
except ImportError:
    tf2_ros = None


def _matrix(t) -> np.ndarray:
    """4x4 of a geometry_msgs/Transform."""
    x, y, z, w = t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = [t.translation.x, t.translation.y, t.translation.z]
    return M


def _stamp_ns(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


class TfBuffer:
    """Parent links of every frame: static ones, and time series of the moving ones."""

    def __init__(self) -> None:
        self.static: dict[str, tuple[str, np.ndarray]] = {}
        self.dynamic: dict[str, dict[int, tuple[str, np.ndarray]]] = defaultdict(dict)
        self.lock = threading.Lock()

    def add(self, msg, static: bool) -> None:
        with self.lock:
            for t in msg.transforms:
                entry = (t.header.frame_id, _matrix(t.transform))
                if static:
                    self.static[t.child_frame_id] = entry
                else:
                    self.dynamic[t.child_frame_id][_stamp_ns(t.header)] = entry

    def _parent(self, frame: str, stamp_ns: int) -> tuple[str, np.ndarray] | None:
        if frame in self.static:
            return self.static[frame]
        series = self.dynamic.get(frame)
        if not series:
            return None
        stamps = sorted(series)
        if not stamps[0] <= stamp_ns <= stamps[-1]:
            raise LookupError(f"{frame}: no transform around {stamp_ns * 1e-9:.3f} s (data from "
                              f"{stamps[0] * 1e-9:.3f} to {stamps[-1] * 1e-9:.3f} s)")
        i = bisect_left(stamps, stamp_ns)
        if stamps[i] == stamp_ns:
            return series[stamp_ns]
        (p0, M0), (p1, M1) = series[stamps[i - 1]], series[stamps[i]]
        if p0 != p1:
            raise LookupError(f"{frame}: its parent changed from {p0} to {p1}")
        s = (stamp_ns - stamps[i - 1]) / (stamps[i] - stamps[i - 1])
        # linear interpolation of the translation, normalised linear of the rotation
        M = (1 - s) * M0 + s * M1
        u, _, vt = np.linalg.svd(M[:3, :3])
        M[:3, :3] = u @ vt
        return p0, M

    def _to_root(self, frame: str, stamp_ns: int) -> tuple[str, np.ndarray]:
        M = np.eye(4)
        seen = {frame}
        while True:
            link = self._parent(frame, stamp_ns)
            if link is None:
                return frame, M
            frame, Mp = link
            if frame in seen:
                raise LookupError(f"a loop in TF at {frame}")
            seen.add(frame)
            M = Mp @ M

    def lookup(self, target: str, source: str, stamp_ns: int) -> np.ndarray:
        with self.lock:
            if not (source in self.static or source in self.dynamic or
                    any(p == source for p, _ in self.static.values()) or
                    any(p == source for s in self.dynamic.values() for p, _ in s.values())):
                raise LookupError(f"frame {source!r} does not exist in TF")
            root_s, Ms = self._to_root(source, stamp_ns)
            root_t, Mt = self._to_root(target, stamp_ns)
        if root_s != root_t:
            raise LookupError(f"{source!r} (tree of {root_s!r}) and {target!r} (tree of {root_t!r}) "
                              "are not connected")
        return np.linalg.inv(Mt) @ Ms


class TfRecorder:
    """A node on ``domain_id`` that fills a TF buffer and records the header frame ids of
    ``topics`` ({topic: message type}) and the stamps of the /tf it received (what the buffer
    can answer for: its /tf subscription may be matched later than the others); close it (or
    use it as a context manager)."""

    def __init__(self, domain_id: int, topics: dict[str, str] | None = None) -> None:
        self._background = BackgroundNode(domain_id, "tf_recorder")
        self.node = self._background.node
        self.uses_tf2_ros = tf2_ros is not None
        self.frames: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        self._tf_stamps: set[int] = set()
        self._lock = threading.Lock()
        from tf2_msgs.msg import TFMessage
        if self.uses_tf2_ros:
            from rclpy.duration import Duration
            self.buffer = tf2_ros.Buffer(cache_time=Duration(seconds=120))
            self._listener = tf2_ros.TransformListener(self.buffer, self.node, spin_thread=False)
            self.node.create_subscription(TFMessage, "/tf", self._record_tf, TF_QOS)
        else:
            self.buffer = TfBuffer()

            def on_tf(m) -> None:
                self.buffer.add(m, False)
                self._record_tf(m)
            self.node.create_subscription(TFMessage, "/tf", on_tf, TF_QOS)
            self.node.create_subscription(TFMessage, "/tf_static", lambda m: self.buffer.add(m, True),
                                          TF_STATIC_QOS)
        for topic, msgtype in (topics or {}).items():
            self.node.create_subscription(message_class(msgtype), topic,
                                          lambda m, topic=topic: self._record(topic, m),
                                          qos_profile_sensor_data)
        self._background.start()

    def _record(self, topic: str, msg) -> None:
        with self._lock:
            self.frames[topic][msg.header.frame_id].append(_stamp_ns(msg.header))

    def _record_tf(self, msg) -> None:
        with self._lock:
            self._tf_stamps.update(_stamp_ns(t.header) for t in msg.transforms)

    def tf_stamps(self) -> list[int]:
        """The stamps (ns, sorted) of the /tf transforms received so far."""
        with self._lock:
            return sorted(self._tf_stamps)

    def frame_ids(self) -> dict[str, dict[str, list[int]]]:
        """{topic: {frame_id: stamps (ns)}} of what arrived so far."""
        with self._lock:
            return {t: {f: list(s) for f, s in fr.items()} for t, fr in self.frames.items()}

    def lookup(self, target: str, source: str, stamp_ns: int) -> np.ndarray:
        """Pose of ``source`` in ``target`` at ``stamp_ns`` (4x4); LookupError if tf2 cannot."""
        if not self.uses_tf2_ros:
            return self.buffer.lookup(target, source, stamp_ns)
        from rclpy.time import Time
        try:
            t = self.buffer.lookup_transform(target, source, Time(nanoseconds=int(stamp_ns)))
        except tf2_ros.TransformException as exc:
            raise LookupError(str(exc)) from None
        return _matrix(t.transform)

    def close(self) -> None:
        self._background.close()

    def __enter__(self) -> "TfRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
