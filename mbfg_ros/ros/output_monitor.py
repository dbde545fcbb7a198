"""A subscriber that watches the estimator against the truth: what ``mbfg demo`` and the HIL
tests measure.

:class:`OutputMonitor` subscribes (in its own process, over DDS) to every output topic of the
estimator, the rig's ground truth and /diagnostics, and records per topic the message count,
stamps, frame ids and names. From that it computes:

- tracking errors: RMSE of each joint's position and velocity against the truth interpolated
  at the estimate's stamp, and of each closure force (vector, in frame_b);
- end-to-end latency: wall-clock receive time of ``~/joint_states`` (when DDS delivered it to
  this process, the middleware's ``received_timestamp``) minus its header stamp (= the newest
  sensor stamp in that keyframe); meaningful when the rig stamps with the wall clock (sim_rig
  in wall time) on the same machine;
- the newest /diagnostics status of every sensor, of the solver and of the node's queue.

Intake in bulk: the JointState and WrenchStamped topics (the estimates, the truth, the forces:
hundreds of messages a second) are subscribed as CDR bytes by a second node that no executor
spins, so no message wakes this process; a timer takes every message waiting on them
:data:`DRAIN_PERIOD` apart (DDS keeps them meanwhile: depth 1000, reliable) with the time DDS
received each, and decodes each topic's batch together with numpy through
:class:`~mbfg_ros.io.cdr_layout.CdrLayout` (a message of another layout is deserialized on its
own). /diagnostics, TF and
DynamicJointState arrive as message objects, one callback each.

:func:`start_monitor` runs one in a background thread on a given ROS domain (own rclpy
context), so a test or a CLI can read it while it records.
"""
from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from mbfg_ros.io import messages as msgs
from mbfg_ros.io.cdr_intake import split_by_layout
from mbfg_ros.io.cdr_layout import CdrLayout
from mbfg_ros.io.estimate_messages import OutputNames, output_topics
from mbfg_ros.io.simulation_messages import truth_topics
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.ros.background_node import BackgroundNode
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.rclpy_compat import take_all

RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL, history=HistoryPolicy.KEEP_LAST)


@dataclass
class TopicRecord:
    """What arrived on one topic: count, header stamps (ns; for TF the first transform's),
    wall receive times (s, monotonic), frame ids, names (JointState names / TF parent->child
    pairs)."""
    msgtype: str
    count: int = 0
    stamps: list[int] = field(default_factory=list)
    received: list[float] = field(default_factory=list)
    frame_ids: set[str] = field(default_factory=set)
    names: set[tuple[str, ...]] = field(default_factory=set)
    interfaces: set[tuple[str, tuple[str, ...]]] = field(default_factory=set)   # DynamicJointState

    def stamp_rate(self) -> float:
        """Mean rate over the header stamps (Hz)."""
        if len(self.stamps) < 2 or self.stamps[-1] <= self.stamps[0]:
            return 0.0
        return (len(self.stamps) - 1) / ((self.stamps[-1] - self.stamps[0]) * 1e-9)

    def stamp_period(self) -> float:
        """Median spacing of the distinct header stamps (s): the publishing period, robust to
        messages lost on the way."""
        st = np.unique(np.asarray(self.stamps, dtype=np.int64))
        return float(np.median(np.diff(st))) * 1e-9 if st.size >= 2 else float("nan")

    def receive_rate(self, window: float | None = None) -> float:
        """Messages per wall second (over the last ``window`` s if given)."""
        r = self.received
        if window is not None and r:
            r = [x for x in r if x >= r[-1] - window]
        if len(r) < 2 or r[-1] <= r[0]:
            return 0.0
        return (len(r) - 1) / (r[-1] - r[0])


@dataclass
class Status:
    level: int
    message: str
    values: dict[str, str]
    received: float


def _vec(v) -> np.ndarray:
    return np.array([v.x, v.y, v.z], float)


BULK_TYPES = (msgs.JOINT_STATE, msgs.WRENCH_STAMPED)
"""Message types taken as bytes and decoded in bulk."""

DRAIN_PERIOD = 0.05
"""s between two takes of the bulk topics' waiting messages (10 of a 200 Hz topic; its DDS
history holds 1000)."""


class OutputMonitor(Node):
    """Records the estimator's outputs, the truth and /diagnostics (see the module docstring)."""

    def __init__(self, mech: Mechanism, names: OutputNames | None = None, *, context=None,
                 node_name: str = "mbfg_monitor", covariance: bool = True,
                 outputs: tuple[str, ...] | None = None, truth_after_estimator: bool = False) -> None:
        """``outputs``: record only these of the estimator's topics (relative names such as
        "joint_states", "forces/<name>", "/tf", "/diagnostics"; default: all of them). The
        estimator skips outputs nobody subscribes to, so a lean monitor costs it less.

        ``truth_after_estimator``: subscribe to the truth only once the estimator's
        ~/joint_states publisher is matched. A rig that waits for a truth subscriber (sim_rig
        ``wait_for_truth``) then starts only when the estimates will reach this monitor too;
        otherwise, on a loaded machine, the first seconds of estimates can be published before
        DDS has matched this monitor and never arrive."""
        super().__init__(node_name, context=context, enable_rosout=False)
        # the bulk topics' subscriptions: on a node no executor spins (taken by _drain)
        self._bulk_node = Node(f"{node_name}_bulk", context=context, enable_rosout=False,
                               start_parameter_services=False)
        self.mech = mech
        self.names = names or OutputNames()
        self.truth_ns = (mech.config.truth_namespace or "/truth").rstrip("/")
        self.topics: dict[str, TopicRecord] = {}     # every recorded topic (KeyError: not recorded)
        # (stamp ns, DDS receive wall ns, position, velocity, effort) of every ~/joint_states
        self.estimates: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.truth: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.truth_received_ns: list[int] = []       # when DDS delivered each truth joint state here
        # {("estimate" | "truth", force name): [(stamp ns, force (3,), torque (3,))]}
        self.forces: dict[tuple[str, str], list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
        self._bulk: list[str] = []                   # the topics taken as bytes
        self._layouts: dict[tuple[str, int], list[CdrLayout | None]] = {}
        store = msgs.typestore()
        self._deserialize, self._serialize = store.deserialize_cdr, store.serialize_cdr
        self.status: dict[str, Status] = {}
        self.status_history: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
        self.lock = threading.RLock()
        wanted = dict(output_topics(mech, self.names, covariance))
        if outputs is not None:
            keep = {t if t.startswith("/") else self.names.topic(t) for t in outputs}
            wanted = {t: k for t, k in wanted.items() if t in keep}
        # the truth it compares with (not the accelerations: fewer callbacks in this process)
        truth = {t: k for t, k in truth_topics(mech).items() if not t.endswith("/dynamic_joint_states")}
        self._est_js = self.names.topic("joint_states")
        self._truth_js = f"{self.truth_ns}/joint_states"
        self._subscription_of: dict[str, object] = {}
        self._drain_timer = None
        self._subscribe(wanted if truth_after_estimator else {**wanted, **truth})
        self._truth_timer = None
        if truth_after_estimator:
            def subscribe_truth() -> None:
                est = self._subscription_of.get(self._est_js)
                if est is None or est.get_publisher_count() > 0:
                    self._truth_timer.cancel()
                    self._subscribe(truth)
            self._truth_timer = self.create_timer(0.05, subscribe_truth)

    def _subscribe(self, topics: dict[str, str]) -> None:
        with self.lock:
            for topic, msgtype in topics.items():
                self.topics[topic] = TopicRecord(msgtype)
                qos = LATCHED if topic == "/tf_static" else RELIABLE
                if msgtype in BULK_TYPES:
                    self._bulk.append(topic)
                    self._subscription_of[topic] = self._bulk_node.create_subscription(
                        message_class(msgtype), topic, lambda raw: None, qos, raw=True)
                    if self._drain_timer is None:
                        self._drain_timer = self.create_timer(DRAIN_PERIOD, self._drain)
                else:
                    self._subscription_of[topic] = self.create_subscription(
                        message_class(msgtype), topic, lambda m, topic=topic: self._on(topic, m), qos)

    # ------------------------------------------------------------------------------------------
    # intake
    def _drain(self) -> None:
        """Take every message waiting on the bulk topics (CDR bytes, with the time DDS received
        each) and record them."""
        for topic in list(self._bulk):
            sub = self._subscription_of[topic]
            raws, received = take_all(sub)
            if not raws:
                continue
            wall_ns = time.time_ns()
            with self.lock:
                self._decode(topic, raws, [r or wall_ns for r in received])

    def destroy_node(self) -> None:
        self._bulk_node.destroy_node()
        super().destroy_node()

    def _decode(self, topic: str, raws: list[bytes], received_ns: list[int]) -> None:
        """Record the messages ``raws`` of ``topic`` (in the order they came; DDS received them
        at ``received_ns``, CLOCK_REALTIME): those of a known layout decoded together, the
        others one by one (lock held)."""
        rec = self.topics[topic]
        msgtype = rec.msgtype
        rec.count += len(raws)
        to_monotonic = time.monotonic() - time.time_ns() * 1e-9
        rec.received.extend(r * 1e-9 + to_monotonic for r in received_ns)
        # per message: (stamp, values...) from a layout's arrays, or None (decoded on its own)
        rows: list[tuple | None] = [None] * len(raws)
        groups, _ = split_by_layout(raws, lambda size: self._layouts.setdefault((topic, size), []), msgtype,
                                    self._deserialize, self._serialize)
        for layout, data, where in groups:
            self._rows(layout, data, where, rows, rec)
        for i, raw in enumerate(raws):
            if rows[i] is None:
                rows[i] = self._one(raw, msgtype, rec)
        for i, row in enumerate(rows):
            if row is None:                      # does not deserialize: counted, not recorded
                continue
            stamp = row[0]
            rec.stamps.append(stamp)
            if topic == self._est_js:
                self.estimates.append((stamp, received_ns[i], row[1], row[2], row[3]))
            elif topic == self._truth_js:
                self.truth.append((stamp, row[1], row[2], row[3]))
                self.truth_received_ns.append(received_ns[i])
            elif "/forces/" in topic:
                source = "truth" if topic.startswith(self.truth_ns + "/") else "estimate"
                self.forces[(source, topic.rsplit("/forces/", 1)[1])].append((stamp, row[1], row[2]))

    def _rows(self, layout: CdrLayout, data: np.ndarray, where: list[int], rows: list, rec: TopicRecord) -> None:
        """Fill ``rows`` at ``where`` with the messages ``data`` (rows) of ``layout``."""
        fixed = layout.decode(data)
        stamps = fixed.stamps_ns().tolist()
        msg = fixed.template
        rec.frame_ids.add(msg.header.frame_id)
        if hasattr(msg, "name"):                                   # JointState
            rec.names.add(tuple(msg.name))
            columns = [fixed.values(f) if getattr(msg, f).size else np.zeros((len(fixed), 0))
                       for f in ("position", "velocity", "effort")]
        else:                                                      # WrenchStamped
            columns = [fixed.values("wrench.force"), fixed.values("wrench.torque")]
        for k, i in enumerate(where):
            rows[i] = (stamps[k], *(c[k] for c in columns))

    def _one(self, raw: bytes, msgtype: str, rec: TopicRecord) -> tuple | None:
        """(stamp, values...) of one message decoded on its own, or None if it does not deserialize."""
        try:
            msg = self._deserialize(bytes(raw), msgtype)
        except Exception:                                          # noqa: BLE001 - a corrupt message
            return None
        rec.frame_ids.add(msg.header.frame_id)
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        if hasattr(msg, "name"):
            rec.names.add(tuple(msg.name))
            return (stamp, np.array(msg.position, float), np.array(msg.velocity, float),
                    np.array(msg.effort, float))
        return stamp, _vec(msg.wrench.force), _vec(msg.wrench.torque)

    # ------------------------------------------------------------------------------------------
    def _on(self, topic: str, msg) -> None:
        """One message of a topic not taken in bulk (/diagnostics, TF, DynamicJointState)."""
        wall = time.monotonic()
        rec = self.topics[topic]
        with self.lock:
            rec.count += 1
            rec.received.append(wall)
            header = getattr(msg, "header", None)
            if header is not None:
                stamp = header.stamp.sec * 1_000_000_000 + header.stamp.nanosec
                rec.stamps.append(stamp)
                rec.frame_ids.add(header.frame_id)
            if topic == "/diagnostics":
                for s in msg.status:
                    values = {kv.key: kv.value for kv in s.values}
                    level = s.level if isinstance(s.level, int) else int.from_bytes(s.level, "little")
                    self.status[s.name] = Status(level, s.message, values, wall)
                    self.status_history[s.name].append((wall, level, s.message))
                return
            if topic in ("/tf", "/tf_static"):
                for t in msg.transforms:
                    rec.names.add((t.header.frame_id, t.child_frame_id))
                    rec.frame_ids.add(t.header.frame_id)
                if msg.transforms:               # one stamp per message (its first transform's)
                    st = msg.transforms[0].header.stamp
                    rec.stamps.append(st.sec * 1_000_000_000 + st.nanosec)
                return
            if hasattr(msg, "joint_names"):                # DynamicJointState
                rec.names.add(tuple(msg.joint_names))
                for joint, iv in zip(msg.joint_names, getattr(msg, "interface_values", ())):
                    rec.interfaces.add((joint, tuple(iv.interface_names)))

    # ------------------------------------------------------------------------------------------
    # analysis
    def wait_for(self, predicate, timeout: float, poll: float = 0.05) -> bool:
        """Poll ``predicate(self)`` until true or ``timeout`` s; returns the last result."""
        end = time.monotonic() + timeout
        while True:
            with self.lock:
                ok = bool(predicate(self))
            if ok or time.monotonic() >= end:
                return ok
            time.sleep(poll)

    def arrays(self) -> dict[str, np.ndarray]:
        """Estimates and truth as arrays: est_t, est_q, est_v, est_effort, est_wall (s from the
        first estimate's stamp; wall = receive wall time in ns), truth_t, truth_q, truth_v."""
        with self.lock:
            est = list(self.estimates)
            tru = list(self.truth)
        n = self.mech.n
        t0 = est[0][0] if est else (tru[0][0] if tru else 0)
        out = {"t0_ns": np.array(t0)}
        out["est_t"] = np.array([(e[0] - t0) * 1e-9 for e in est])
        out["est_wall_ns"] = np.array([e[1] for e in est], dtype=np.int64)
        out["est_stamp_ns"] = np.array([e[0] for e in est], dtype=np.int64)
        out["est_q"] = np.array([e[2] for e in est]).reshape(-1, n)
        out["est_v"] = np.array([e[3] for e in est]).reshape(-1, n)
        out["est_effort"] = np.array([e[4] for e in est]).reshape(-1, n)
        out["truth_t"] = np.array([(x[0] - t0) * 1e-9 for x in tru])
        out["truth_q"] = np.array([x[1] for x in tru]).reshape(-1, n)
        out["truth_v"] = np.array([x[2] for x in tru]).reshape(-1, n)
        return out

    def tracking(self, after: float = 0.0) -> dict[str, dict[str, float]]:
        """{joint: {q_rmse, v_rmse, q_max, samples}} over the estimates stamped at least
        ``after`` s after the first one, against the truth interpolated at their stamps
        (angles of revolute joints compared modulo 2 pi: the encoder factor is wrap-safe, so an
        estimator that starts mid-motion may settle one turn away from the unwrapped truth)."""
        a = self.arrays()
        if a["est_t"].size == 0 or a["truth_t"].size < 2:
            return {}
        sel = (a["est_t"] >= after) & (a["est_t"] >= a["truth_t"][0]) & (a["est_t"] <= a["truth_t"][-1])
        out = {}
        kinds = {j.name: j.type for j in self.mech.urdf.tree}
        for j, name in enumerate(self.mech.joint_names):
            tq = np.interp(a["est_t"][sel], a["truth_t"], a["truth_q"][:, j])
            tv = np.interp(a["est_t"][sel], a["truth_t"], a["truth_v"][:, j])
            eq = a["est_q"][sel, j] - tq
            if kinds.get(name) in ("revolute", "continuous"):
                eq = (eq + np.pi) % (2 * np.pi) - np.pi     # the same pose: angles modulo 2 pi
            ev = a["est_v"][sel, j] - tv
            out[name] = {"q_rmse": float(np.sqrt(np.mean(eq ** 2))) if eq.size else float("nan"),
                         "v_rmse": float(np.sqrt(np.mean(ev ** 2))) if ev.size else float("nan"),
                         "q_max": float(np.max(np.abs(eq))) if eq.size else float("nan"),
                         "samples": int(eq.size)}
        return out

    def coverage(self) -> str:
        """What the tracking figures rest on, for assertion messages: how many estimates and
        truth samples arrived and the stamps they span (s from the first estimate)."""
        a = self.arrays()
        def span(t):
            return f"{t.size} from {t[0]:.3f} to {t[-1]:.3f} s" if t.size else "none"
        return f"estimates {span(a['est_t'])}; truth {span(a['truth_t'])}"

    def force_series(self, name: str) -> tuple[np.ndarray, ...]:
        """(est_t, est_force (N, 3), truth_t, truth_force (N, 3)), times from the first estimate."""
        t0 = int(self.arrays()["t0_ns"])
        with self.lock:
            est = list(self.forces.get(("estimate", name), []))
            tru = list(self.forces.get(("truth", name), []))
        et = np.array([(x[0] - t0) * 1e-9 for x in est])
        tt = np.array([(x[0] - t0) * 1e-9 for x in tru])
        ef = np.array([x[1] for x in est]).reshape(-1, 3)
        tf = np.array([x[1] for x in tru]).reshape(-1, 3)
        return et, ef, tt, tf

    def force_rmse(self, name: str, after: float = 0.0) -> tuple[float, float]:
        """(RMSE of the force vector error, RMS of the true force) in N over estimates stamped
        at least ``after`` s after the first estimate."""
        et, ef, tt, tf = self.force_series(name)
        if et.size == 0 or tt.size < 2:
            return float("nan"), float("nan")
        sel = (et >= after) & (et >= tt[0]) & (et <= tt[-1])
        if not np.any(sel):
            return float("nan"), float("nan")
        truth = np.stack([np.interp(et[sel], tt, tf[:, i]) for i in range(3)], axis=1)
        err = ef[sel] - truth
        return (float(np.sqrt(np.mean(np.sum(err ** 2, axis=1)))),
                float(np.sqrt(np.mean(np.sum(truth ** 2, axis=1)))))

    def latency_ms(self, after: float = 0.0) -> np.ndarray:
        """End-to-end latencies (ms): wall receive time of ~/joint_states (when DDS delivered
        it here) minus its stamp."""
        a = self.arrays()
        sel = a["est_t"] >= after
        return (a["est_wall_ns"][sel] - a["est_stamp_ns"][sel]) * 1e-6

    def truth_latency_ms(self, after: float = 0.0) -> np.ndarray:
        """The rig's lateness (ms): when each truth joint state arrived here (DDS) minus its
        stamp; the rig publishes the truth at its stamp, so this is what the rig and DDS add to
        the end-to-end latency. ``after``: s after the first estimate's stamp."""
        with self.lock:
            truth = self.truth
            stamps = np.array([x[0] for x in truth], np.int64)
            received = np.asarray(self.truth_received_ns[:stamps.size], np.int64)
            t0 = self.estimates[0][0] if self.estimates else (stamps[0] if stamps.size else 0)
        sel = (stamps - t0) * 1e-9 >= after
        return (received[sel] - stamps[sel]) * 1e-6

    def sensor_status(self, node_name: str | None = None) -> dict[str, Status]:
        """{sensor: newest status} from /diagnostics (statuses are named after the estimator's
        fully qualified name, by default the one the monitor watches)."""
        prefix = f"{node_name or self.names.namespace}: sensor "
        with self.lock:
            return {k[len(prefix):]: v for k, v in self.status.items() if k.startswith(prefix)}

    def node_status(self, what: str, node_name: str | None = None) -> Status | None:
        """The newest /diagnostics status ``<node>: <what>`` (solver, input queue, outputs)."""
        with self.lock:
            return self.status.get(f"{node_name or self.names.namespace}: {what}")


class MonitorThread:
    """An OutputMonitor spinning in a background thread on its own rclpy context."""

    def __init__(self, mech: Mechanism, domain_id: int, names: OutputNames | None = None,
                 node_name: str = "mbfg_monitor", outputs: tuple[str, ...] | None = None,
                 truth_after_estimator: bool = False) -> None:
        os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        self._background = BackgroundNode(domain_id, make_node=lambda context: OutputMonitor(
            mech, names, context=context, node_name=node_name, outputs=outputs,
            truth_after_estimator=truth_after_estimator)).start()
        self.monitor: OutputMonitor = self._background.node

    def close(self) -> None:
        self._background.close()

    def __enter__(self) -> OutputMonitor:
        return self.monitor

    def __exit__(self, *exc) -> None:
        self.close()


def start_monitor(mech: Mechanism, domain_id: int, names: OutputNames | None = None) -> MonitorThread:
    """A recording OutputMonitor on ``domain_id`` (close it, or use it as a context manager)."""
    return MonitorThread(mech, domain_id, names)
