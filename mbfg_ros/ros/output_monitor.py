"""A subscriber that watches the estimator against the truth: what ``mbfg demo`` and the HIL
tests measure.

:class:`OutputMonitor` subscribes (in its own process, over DDS) to every output topic of the
estimator, the rig's ground truth and /diagnostics, and records per topic the message count,
stamps, frame ids and names. From that it computes:

- tracking errors: RMSE of each joint's position and velocity against the truth interpolated
  at the estimate's stamp, and of each closure force (vector, in frame_b);
- end-to-end latency: wall-clock receive time of ``~/joint_states`` minus its header stamp
  (= the newest sensor stamp in that keyframe); meaningful when the rig stamps with the wall
  clock (sim_rig in wall time) on the same machine;
- the newest /diagnostics status of every sensor, of the solver and of the node's queue.

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

from mbfg_ros.io.estimate_messages import OutputNames, output_topics
from mbfg_ros.io.simulation_messages import truth_topics
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.ros.background_node import BackgroundNode
from mbfg_ros.ros.message_classes import message_class

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
        self.mech = mech
        self.names = names or OutputNames()
        self.truth_ns = (mech.config.truth_namespace or "/truth").rstrip("/")
        self.topics: dict[str, TopicRecord] = {}     # every recorded topic (KeyError: not recorded)
        self.estimates: list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.truth: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.forces: dict[tuple[str, str], list[tuple[int, np.ndarray, np.ndarray]]] = defaultdict(list)
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
                self._subscription_of[topic] = self.create_subscription(
                    message_class(msgtype), topic, lambda m, topic=topic: self._on(topic, m),
                    LATCHED if topic == "/tf_static" else RELIABLE)

    # ------------------------------------------------------------------------------------------
    def _on(self, topic: str, msg) -> None:
        wall = time.monotonic()
        wall_ns = time.time_ns()
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
            if hasattr(msg, "name"):                       # JointState
                rec.names.add(tuple(msg.name))
            elif hasattr(msg, "joint_names"):
                rec.names.add(tuple(msg.joint_names))
                for joint, iv in zip(msg.joint_names, getattr(msg, "interface_values", ())):
                    rec.interfaces.add((joint, tuple(iv.interface_names)))
            if topic == self._est_js:
                self.estimates.append((stamp, wall_ns, np.array(msg.position), np.array(msg.velocity),
                                       np.array(msg.effort)))
            elif topic == self._truth_js:
                self.truth.append((stamp, np.array(msg.position), np.array(msg.velocity),
                                   np.array(msg.effort)))
            elif "/forces/" in topic:
                source = "truth" if topic.startswith(self.truth_ns + "/") else "estimate"
                name = topic.rsplit("/forces/", 1)[1]
                self.forces[(source, name)].append((stamp, _vec(msg.wrench.force), _vec(msg.wrench.torque)))

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
        """End-to-end latencies (ms): wall receive time of ~/joint_states minus its stamp."""
        a = self.arrays()
        sel = a["est_t"] >= after
        return (a["est_wall_ns"][sel] - a["est_stamp_ns"][sel]) * 1e-6

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
