"""The ``estimator`` node: the mechanism estimator live on ROS 2 topics.

Run: ``ros2 run mbfg_ros estimator --ros-args -p config:=/path/rig.yaml`` (pip environment:
``.venv/bin/estimator --ros-args ...`` or ``python -m mbfg_ros.ros.estimator_node ...``). The
parameters are :data:`ESTIMATOR_PARAMETERS` (README "The estimator node").

Inputs: the config's sensor topics with SensorDataQoS (or reliable, ``sensor_qos``), decoded by
:class:`mbfg_ros.io.sensor_inputs.InputRouter`: encoders and known inputs from
sensor_msgs/JointState by joint name (other joints ignored), gyros from sensor_msgs/Imu
(angular_velocity in the sensor frame), load cells from geometry_msgs/WrenchStamped (the
config's component and axis) or std_msgs/Float64 when the rig publishes a plain number (the
subscription follows the publisher's type). Header stamps are the sample times; the node's
clock (``use_sim_time`` follows /clock) only stamps diagnostics and measures silence.

Outputs (``~`` = the node's name, ``/mbfg_estimator`` by default;
:mod:`mbfg_ros.io.estimate_messages` builds every message, as ``mbfg replay`` writes them):
``~/joint_states`` (JointState of every joint: position, velocity, effort = estimated actuator
effort), ``~/joint_accelerations``, ``~/forces/<closure or load cell>`` (WrenchStamped),
``~/dof_std`` and ``~/dof_covariance`` (``publish_covariance``), /tf and /tf_static,
/diagnostics, and ``~/robot_description`` (the URDF in use, std_msgs/String, latched: rviz2's
RobotModel shows it moved by the estimated TF). Service ``~/reset`` (std_srvs/Trigger). An
output nobody subscribes to is not computed (subscribers are counted once a second);
``~/joint_states`` always goes out.

Threads: DDS callbacks only decode and queue (:class:`~mbfg_ros.ros.sample_queue.SampleQueue`);
one worker takes everything queued, feeds it to the Estimator in stamp order and publishes the
estimates; the diagnostics timer runs on the steady clock, so /diagnostics keeps coming when every
sensor (or /clock) is silent. Time jumps follow :mod:`mbfg_ros.io.time_jumps` (as replay): a
sensor's stamp going back (a bag loop) resets the estimator and is logged once; one far ahead
(``max_time_gap``) does the same instead of integrating the gap; readings of a sensor lagging
the others by more than the window are counted (``too_old_lagging_sensor``), not fed.
"""
from __future__ import annotations

import heapq
import math
import sys
import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

import numpy as np
import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import SubscriptionEventCallbacks, UnsupportedEventTypeError
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

from mbfg_ros.errors import ConfigError, MbfgError
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.io import estimate_messages as outputs
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.sensor_inputs import FLOAT64, WRENCH_STAMPED, InputRouter
from mbfg_ros.io.time_jumps import TimeJumps, lagging_limit
from mbfg_ros.model.config import load_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.processes import follow_parent
from mbfg_ros.ros.node_parameters import ParameterError, ParameterSpec, declare, unknown_overrides
from mbfg_ros.ros.sample_queue import QueuedReading, SampleQueue
from mbfg_ros.ros.tf_publisher import TfPublisher

NODE_NAME = "mbfg_estimator"

ESTIMATOR_PARAMETERS: tuple[ParameterSpec, ...] = (
    ParameterSpec("config", str, "", "the rig's mechanism config (YAML file); required"),
    ParameterSpec("robot_description", str, "",
                  "URDF text replacing the config's urdf (e.g. the robot_description of "
                  "robot_state_publisher)"),
    ParameterSpec("urdf", str, "", "URDF file replacing the config's urdf (when no robot_description)"),
    ParameterSpec("keyframe_rate", float, 0.0, "rate of the smoother's keyframes (and of the "
                  "published estimates)", "Hz", 1.0, 2000.0, zero_means="the config's estimator.keyframe_rate"),
    ParameterSpec("lag", float, 0.0, "length of the fixed-lag window", "s", 0.01, 60.0,
                  zero_means="the config's estimator.lag"),
    ParameterSpec("world_frame", str, "", "a frame attached to the URDF's root link by a static "
                  "identity transform (e.g. map); empty: none"),
    ParameterSpec("frame_prefix", str, "", "prefix of every published link and closure frame id "
                  "(e.g. mbfg/ when robot_state_publisher already publishes the rig's links)"),
    ParameterSpec("publish_tf", bool, True, "publish the estimated link poses on /tf (fixed "
                  "joints on /tf_static)"),
    ParameterSpec("publish_robot_description", bool, True, "publish the URDF the node uses on "
                  "~/robot_description (std_msgs/String, latched) for rviz2's RobotModel"),
    ParameterSpec("publish_forces", bool, True, "publish ~/forces/<closure> and ~/forces/<load cell>"),
    ParameterSpec("publish_accelerations", bool, True, "publish ~/joint_accelerations"),
    ParameterSpec("publish_covariance", bool, False, "publish ~/dof_std and ~/dof_covariance "
                  "(marginal covariance of [q_dof, v_dof]; costs time per keyframe)"),
    ParameterSpec("lagged", bool, False, "publish the smoothed estimate of each keyframe as it "
                  "leaves the window (delayed by lag) instead of the newest filtered one"),
    ParameterSpec("sensor_qos", str, "sensor_data", "QoS of the sensor subscriptions: sensor_data "
                  "(best effort, like rclpy's qos_profile_sensor_data) or reliable",
                  choices=("sensor_data", "reliable")),
    ParameterSpec("qos_depth", int, 1000, "history depth of each sensor subscription (DDS keeps "
                  "this many messages while the node is busy; 1000 = 1 s of a 1 kHz encoder)",
                  "messages", 1, 100000),
    ParameterSpec("max_queue", int, 100000, "readings that may wait for the estimator; beyond it "
                  "readings are dropped and counted (ERROR on /diagnostics)", "readings", 1, 10000000),
    ParameterSpec("reorder_window", float, 1.0, "longest a reading may wait for the other "
                  "topics to catch up (bursts are fed in stamp order)", "s", 0.0, 10.0),
    ParameterSpec("diagnostics_period", float, 1.0, "period of /diagnostics (steady clock)", "s",
                  0.05, 60.0),
    ParameterSpec("silence_timeout", float, 0.5, "a sensor silent for longer than this (or 5 of "
                  "its periods) is reported WARN", "s", 0.01, 3600.0),
    ParameterSpec("max_time_gap", float, 2.0, "a sample stamped this much after the newest one "
                  "restarts the estimator instead of integrating the gap", "s", 0.1, 3600.0),
)


def _check_frame(name: str, value: str, allow_empty: bool = True) -> None:
    if not value and allow_empty:
        return
    if value != value.strip() or any(c.isspace() for c in value) or value.startswith("/"):
        raise ParameterError(f"parameter '{name}' is not a valid frame id (value: {value!r}): "
                             "tf2 frame ids have no spaces and no leading '/'")


def load_node_mechanism(settings: dict) -> Mechanism:
    """The Mechanism of the node's ``config`` with ``robot_description`` or ``urdf`` replacing
    the config's URDF. Raises ParameterError / ConfigError naming the parameter or file."""
    config = settings["config"]
    if not config:
        raise ParameterError("parameter 'config' is required: the rig's mechanism config (YAML), "
                             "e.g. --ros-args -p config:=/path/to/four_bar.yaml")
    path = Path(config).expanduser()
    if not path.is_file():
        raise ParameterError(f"parameter 'config': no such file (value: {config!r}, looked for "
                             f"{path.resolve()})")
    description = settings["robot_description"]
    urdf = settings["urdf"]
    try:
        if description:
            cfg = load_rig_config(path, urdf_override=Path("<robot_description>"))
            return Mechanism(cfg, urdf_xml=description)
        if urdf:
            if not Path(urdf).expanduser().is_file():
                raise ParameterError(f"parameter 'urdf': no such file (value: {urdf!r})")
            cfg = load_rig_config(path, urdf_override=Path(urdf).expanduser().resolve())
            return Mechanism(cfg)
        cfg = load_rig_config(path)
        return Mechanism(cfg)
    except ConfigError as exc:
        raise exc.with_file(str(path)) from None


class EstimatorNode(Node):
    """The estimator on ROS 2 topics (see the module docstring)."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        p = declare(self, ESTIMATOR_PARAMETERS)
        extra = unknown_overrides(self, ESTIMATOR_PARAMETERS)
        if extra:
            raise ParameterError(f"unknown parameter(s) {', '.join(repr(e) for e in extra)} "
                                 f"(this node has: {', '.join(s.name for s in ESTIMATOR_PARAMETERS)}, "
                                 "use_sim_time)")
        self.settings = p
        _check_frame("world_frame", p["world_frame"])
        _check_frame("frame_prefix", p["frame_prefix"])
        self.mech = mech = load_node_mechanism(p)
        root = mech.urdf.root_link
        links = set(mech.link_names) | {j.child for j in mech.urdf.tree} | {j.parent for j in mech.urdf.tree}
        if p["world_frame"] and p["world_frame"] != root and p["world_frame"] in links and not p["frame_prefix"]:
            raise ParameterError(f"parameter 'world_frame' names a link of the URDF (value: "
                                 f"{p['world_frame']!r}); it must be a frame outside the mechanism "
                                 f"(the root link is {root!r}), or set frame_prefix")
        cfg = mech.config.estimator
        if p["keyframe_rate"]:
            cfg = replace(cfg, keyframe_rate=p["keyframe_rate"])
        if p["lag"]:
            cfg = replace(cfg, lag=p["lag"])
        if cfg.lag * cfg.keyframe_rate < 2:
            raise ParameterError(f"parameters 'lag' and 'keyframe_rate': the window must hold at "
                                 f"least 2 keyframes (lag {cfg.lag:g} s x {cfg.keyframe_rate:g} Hz)")
        self.estimator = Estimator(mech, cfg, lagged=p["lagged"], covariance=p["publish_covariance"])
        self.router = InputRouter(mech)
        self.names = outputs.OutputNames(self.get_fully_qualified_name(), p["frame_prefix"])
        self.queue = SampleQueue(p["max_queue"])
        self._lock = threading.Lock()             # the estimator and the time bookkeeping
        self._tf_data = mech.create_data()
        self.epoch_ns: int | None = None          # whole second of the first stamp
        self._last_receive_ns = 0                 # node clock at the last reading received
        self._resets_seen = 0
        self.status_counts: dict[str, int] = {}
        self.jumps = {"backwards": 0, "forwards": 0}
        self.time_jumps = TimeJumps(max_time_gap=p["max_time_gap"], max_lag=lagging_limit(cfg.lag))
        self.published: dict[str, int] = {}
        self._latency = deque(maxlen=2000)        # node clock at publish - estimate stamp, ms
        self._silent: set[str] = set()
        self._problems_logged: set[tuple[str, str]] = set()
        self._diag_due = threading.Event()
        self.held = 0                             # readings waiting for other topics (worker)
        self._wanted_at = -math.inf               # when the outputs' subscribers were counted
        self._wanted_topics: set[str] = set()
        self.lost: dict[str, int] = {}            # messages DDS reported lost, per topic
        self.worker_errors = 0

        # outputs
        self._pub = {}
        # reliable, 5 s of keyframes kept for a slow subscriber (rviz, a Python tool)
        out_qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                             durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
        for topic, msgtype in outputs.output_topics(mech, self.names, p["publish_covariance"]).items():
            if topic in ("/tf", "/tf_static"):
                continue
            if "/forces/" in topic and not p["publish_forces"]:
                continue
            if topic.endswith("/joint_accelerations") and not p["publish_accelerations"]:
                continue
            self._pub[topic] = self.create_publisher(message_class(msgtype), topic,
                                                     10 if topic == "/diagnostics" else out_qos)
        if p["publish_robot_description"]:
            latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 history=HistoryPolicy.KEEP_LAST)
            string = message_class("std_msgs/msg/String")
            self._description_pub = self.create_publisher(string, "~/robot_description", latched)
            text = p["robot_description"] or Path(mech.config.urdf).read_text(encoding="utf-8")
            self._description_pub.publish(string(data=text))
        self.tf = TfPublisher(self) if p["publish_tf"] else None
        if self.tf is not None:
            static = self._static_transforms()
            if static is not None:
                self.tf.send_static(static)

        # inputs
        base = qos_profile_sensor_data if p["sensor_qos"] == "sensor_data" else QoSProfile(
            depth=p["qos_depth"], reliability=ReliabilityPolicy.RELIABLE)
        self._sensor_qos = QoSProfile(depth=p["qos_depth"], reliability=base.reliability,
                                      durability=DurabilityPolicy.VOLATILE,
                                      history=HistoryPolicy.KEEP_LAST)
        self._subs: dict[str, tuple[str, object]] = {}
        for topic, types in self.router.topics.items():
            self._subscribe(topic, types[0])

        self.create_service(message_class("std_srvs/srv/Trigger"), "~/reset", self._on_reset)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._diag_timer = self.create_timer(p["diagnostics_period"], self._diag_due.set, clock=steady)
        self._switching: dict[str, str] = {}      # load-cell topics changing message type
        if any(FLOAT64 in types for types in self.router.topics.values()):
            self._type_timer = self.create_timer(1.0, self._follow_publisher_types, clock=steady)
        self._worker = threading.Thread(target=self._work, name="mbfg_estimation", daemon=True)
        self._worker.start()
        self._log_start()

    # ------------------------------------------------------------------------------------------
    # set-up
    def _static_transforms(self) -> bytes | None:
        """Fixed joints of the URDF and the world_frame attachment (None if there are none)."""
        mech, p = self.mech, self.settings
        msg = outputs.tf_message(mech, mech.create_data(), np.zeros(mech.n),
                                 self.get_clock().now().nanoseconds, self.names, fixed=True)
        world = p["world_frame"]
        root = self.names.frame(mech.urdf.root_link)
        if world and world != root:
            T = msgs.typestore().types
            msg.transforms.append(T["geometry_msgs/msg/TransformStamped"](
                header=msgs.header(self.get_clock().now().nanoseconds, world), child_frame_id=root,
                transform=T["geometry_msgs/msg/Transform"](
                    translation=T["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
                    rotation=T["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0))))
        if not msg.transforms:
            return None
        return bytes(msgs.serialize(msg))

    def _subscribe(self, topic: str, msgtype: str) -> None:
        events = SubscriptionEventCallbacks(
            message_lost=lambda info, topic=topic: self._on_lost(topic, info))
        holder: list = []

        def callback(m, topic=topic, msgtype=msgtype) -> None:
            self._on_message(m, topic, msgtype)
            self._drain(holder[0], topic, msgtype)

        try:
            sub = self.create_subscription(message_class(msgtype), topic, callback,
                                           self._sensor_qos, event_callbacks=events)
        except UnsupportedEventTypeError:           # an rmw without the message-lost event
            sub = self.create_subscription(message_class(msgtype), topic, callback, self._sensor_qos)
        holder.append(sub)
        self._subs[topic] = (msgtype, sub)

    DRAIN = 500
    """Most messages taken from one subscription per executor wake-up."""

    def _drain(self, sub, topic: str, msgtype: str) -> None:
        """Take the messages already waiting on ``sub`` in this callback. The executor takes
        one message per subscription per wake-up, each wake-up costing more than the message:
        a 1 kHz topic fell behind a 200 Hz one (seconds in a 20 s run) once the worker thread
        was busy, and its readings reached the estimator late. Same call as the executor's
        (``sub.handle.take_message``)."""
        for _ in range(self.DRAIN):
            try:
                with sub.handle:
                    info = sub.handle.take_message(sub.msg_type, sub.raw)
            except Exception:                            # noqa: BLE001 (destroyed: a type switch)
                return
            if info is None:
                return
            self._on_message(info[0], topic, msgtype)

    def _follow_publisher_types(self) -> None:
        """Load-cell topics accept WrenchStamped or Float64: subscribe with the type a publisher
        actually uses (DDS matches only equal types). Runs on a 1 Hz timer; a switch takes two
        ticks, because rclpy destroys the old subscription only once the executor let go of it
        and DDS refuses a second type on the same topic before that."""
        for topic, t in list(self._switching.items()):
            try:
                self._subscribe(topic, t)
                del self._switching[topic]
                self.get_logger().info(f"{topic} is published as {t}: subscribed with that type")
            except Exception as exc:                     # noqa: BLE001 (retried next tick)
                self.get_logger().debug(f"subscribing {topic} as {t} failed, retrying: {exc}")
        flexible = [t for t, types in self.router.topics.items() if FLOAT64 in types]
        for topic in flexible:
            if topic in self._switching:
                continue
            types = {i.topic_type for i in self.get_publishers_info_by_topic(topic)}
            current = self._subs.get(topic, (None,))[0]
            if not types or current in types:
                continue
            for t in sorted(types):
                if t in (FLOAT64, WRENCH_STAMPED):
                    old = self._subs.pop(topic, None)
                    if old is not None:
                        self.destroy_subscription(old[1])
                    self._switching[topic] = t
                    break

    def _log_start(self) -> None:
        mech, est = self.mech, self.estimator
        sensors = []
        for s in mech.config.sensors.all():
            sensors.append(f"{s.name} on {s.topic} ({s.rate:g} Hz)")
        for j in mech.known_input_joints:
            sensors.append(f"command:{j} on {mech.config.joint(j).topic}")
        self.get_logger().info(
            f"{mech.config.name}: {mech.n} joints, {len(mech.dof)} DOF "
            f"({', '.join(mech.dof_names)}); keyframes {est.cfg.keyframe_rate:g} Hz, lag "
            f"{est.cfg.lag:g} s{', lagged output' if self.settings['lagged'] else ''}; inputs: "
            f"{'; '.join(sensors) or 'none'}; outputs under {self.names.namespace}/ "
            f"(TF {'via tf2_ros' if self.tf and self.tf.uses_tf2_ros else 'on /tf' if self.tf else 'off'})")

    # ------------------------------------------------------------------------------------------
    # DDS callbacks: decode and queue, nothing else
    def _on_message(self, msg, topic: str, msgtype: str) -> None:
        receive_ns = self.get_clock().now().nanoseconds
        readings = self.router.decode(topic, msgtype, msg, receive_ns)
        items = [QueuedReading(topic, r.sensor, r.stamp_ns, r.value, receive_ns) for r in readings]
        if items:
            self._last_receive_ns = receive_ns
        dropped = self.queue.put(topic, items)
        if dropped:
            self.get_logger().error(f"input queue full ({self.queue.max_size} readings): dropped "
                                    f"{dropped} reading(s) of {topic}", throttle_duration_sec=5.0)
        if not items:
            for reason in self.router.problems.get(topic, {}):
                if (topic, reason) not in self._problems_logged:
                    self._problems_logged.add((topic, reason))
                    self.get_logger().warning(f"unusable message on {topic}: {reason} (counted on "
                                           "/diagnostics; logged once per reason)")

    def _on_lost(self, topic: str, info) -> None:
        """DDS dropped messages before the node took them (best effort, history full)."""
        change = int(getattr(info, "total_count_change", 0))
        self.lost[topic] = self.lost.get(topic, 0) + change
        self.get_logger().error(f"{change} message(s) of {topic} lost in DDS before the node took "
                                f"them ({self.lost[topic]} in all): raise qos_depth or give the "
                                "node more CPU", throttle_duration_sec=5.0)

    def _on_reset(self, request, response):
        with self._lock:
            self.estimator.reset("reset service")
            self._resets_seen = self.estimator.health.resets
        self.get_logger().info("estimator reset (~/reset): it restarts from the config's initial "
                               "state at the next sample")
        response.success = True
        response.message = "estimator reset; it restarts at the next sample"
        return response

    # ------------------------------------------------------------------------------------------
    # the estimation worker
    def _work(self) -> None:
        """Run the worker; an unexpected error is logged with its traceback, counted on
        /diagnostics (ERROR) and the worker goes on (a dead worker would stop the estimates
        silently)."""
        while not self.queue.closed:
            try:
                self._work_loop()
            except Exception:                          # noqa: BLE001
                if not rclpy.ok(context=self.context) or self.queue.closed:
                    return          # shutting down: the context went away under a publish
                self.worker_errors += 1
                import traceback
                self.get_logger().error("estimation worker error (it goes on):\n"
                                        + traceback.format_exc(), throttle_duration_sec=5.0)

    def _work_loop(self) -> None:
        """Take what the callbacks queued and feed it in stamp order across topics.

        DDS delivers topics independently and the executor takes one message per topic in
        turn, so in a backlog a 200 Hz topic runs ahead of a 1 kHz one in stamp time. A reading
        stamped s therefore waits while an active topic (one that delivered within
        ``silence_timeout`` or ``reorder_window``, the longer) may still send something stamped
        before s, i.e. while that topic's newest stamp plus its nominal period is not past s;
        at most ``reorder_window`` s."""
        held: list = []                     # heap of (stamp_ns, seq, arrival, reading)
        newest: dict[str, int] = {}         # newest stamp per topic
        seen: dict[str, float] = {}         # wall time of the topic's last reading
        seq = 0
        window = self.settings["reorder_window"]
        active = max(self.settings["silence_timeout"], window)   # s without data: not waited for
        period = self._topic_periods_ns()
        while not self.queue.closed:
            batch = self.queue.take_all(timeout=0.002 if held else 0.05)
            now = time.monotonic()
            for r in batch:
                seq += 1
                heapq.heappush(held, (r.stamp_ns, seq, now, r))
                if r.stamp_ns > newest.get(r.topic, -1):
                    newest[r.topic] = r.stamp_ns
                seen[r.topic] = now
            nexts = [newest[t] + period.get(t, 1_000_000) for t, w in seen.items() if now - w < active]
            watermark = min(nexts) if nexts else None
            ready = []
            while held and (watermark is None or held[0][0] < watermark or now - held[0][2] >= window):
                ready.append(heapq.heappop(held)[3])
            self.held = len(held)
            # a backlog is fed in slices so that estimates and diagnostics keep going out
            for i in range(0, len(ready), self.SLICE):
                part = ready[i:i + self.SLICE]
                with self._lock:
                    out = self._feed(part)
                self.queue.mark_processed(part)
                self._publish(out)
                self._diagnostics_if_due()
            self._diagnostics_if_due()

    def _topic_periods_ns(self) -> dict[str, int]:
        """Nominal message period of each input topic (its fastest sensor's configured rate;
        1 ms for known-input command topics, whose rate the config does not give)."""
        rates = {s.name: s.rate for s in self.mech.config.sensors.all()}
        out = {}
        for topic, route in self.router.routes.items():
            names = list(route.encoders.values()) + [n for n in (route.gyro, route.load_cell) if n]
            rate = max((rates.get(n, 0.0) for n in names), default=0.0)
            if route.commands:
                rate = max(rate, 1000.0)
            out[topic] = int(1e9 / rate) if rate > 0 else 1_000_000
        return out

    SLICE = 50
    """Readings fed per slice (the lock is released and outputs published between slices)."""

    def _diagnostics_if_due(self) -> None:
        if self._diag_due.is_set():
            self._diag_due.clear()
            self._publish_diagnostics()

    VERDICT_COUNTS = {"stale": "discarded_at_time_jump", "too_old": "too_old_lagging_sensor"}
    """status_counts key of the readings :class:`TimeJumps` drops."""

    def _feed(self, batch: list[QueuedReading]) -> list[tuple[str, bytes]]:
        """Feed readings to the estimator after the time-jump rules (:mod:`mbfg_ros.io.time_jumps`,
        shared with replay): on a jump the estimator restarts; readings left over from before a
        jump or from a sensor lagging the others by more than the window are counted, not fed."""
        est = self.estimator
        for r in batch:
            if self.epoch_ns is None:
                self.epoch_ns = (r.stamp_ns // 1_000_000_000) * 1_000_000_000
            t = (r.stamp_ns - self.epoch_ns) * 1e-9
            verdict = self.time_jumps.check(r.topic, r.sensor, r.stamp_ns)
            if verdict in self.VERDICT_COUNTS:
                key = self.VERDICT_COUNTS[verdict]
                self.status_counts[key] = self.status_counts.get(key, 0) + 1
                continue
            if verdict == "jump":
                jump = self.time_jumps.jumps[-1]
                est.reset(jump.reason)
                self._resets_seen = est.health.resets
                self._time_jump(r, jump.direction, jump.reason)
            status = est.add_sample(r.sensor, t, r.value)
            self.status_counts[status] = self.status_counts.get(status, 0) + 1
            if est.health.resets != self._resets_seen:      # the estimator's own jump check
                self._resets_seen = est.health.resets
                self._time_jump(r, "backwards", est.health.last_reset)
        estimates = est.pop_lagged() if self.settings["lagged"] else est.pop_estimates()
        return self._messages(estimates)

    def _time_jump(self, r: QueuedReading, direction: str, reason: str) -> None:
        """Count and log (once per jump) a time jump that restarted the estimator."""
        self.jumps[direction] += 1
        self.get_logger().warning(f"{reason} (stamp {r.stamp_ns * 1e-9:.3f} s on {r.topic}; a bag "
                                  "loop or a clock reset?): estimator reset")

    def _wanted(self) -> set[str]:
        """Output topics with a subscriber (checked once a second): the others are not built,
        so an unwatched output costs nothing. ~/joint_states always goes out."""
        now = time.monotonic()
        if now - self._wanted_at >= 1.0:
            self._wanted_at = now
            wanted = {t for t, pub in self._pub.items() if pub.get_subscription_count() > 0}
            wanted.add(self.names.topic("joint_states"))
            if self.tf is not None and self.count_subscribers("/tf") > 0:
                wanted.add("/tf")
            self._wanted_topics = wanted
        return self._wanted_topics

    def _messages(self, estimates) -> list[tuple[str, bytes, int]]:
        out = []
        if not estimates:
            return out
        wanted = self._wanted()
        want_forces = self.settings["publish_forces"] and any("/forces/" in t for t in wanted)
        for e in estimates:
            stamp_ns = self.epoch_ns + int(round(e.stamp * 1e9))
            forces = self.estimator.forces(e) if want_forces else None
            for topic, _, msg in outputs.estimate_messages(self.mech, e, forces, stamp_ns, self.names):
                if topic in wanted and topic in self._pub:
                    out.append((topic, bytes(msgs.serialize(msg)), stamp_ns))
            if "/tf" in wanted:
                tf = outputs.tf_message(self.mech, self._tf_data, e.q, stamp_ns, self.names)
                out.append(("/tf", bytes(msgs.serialize(tf)), stamp_ns))
        return out

    def _publish(self, out: list[tuple[str, bytes, int]]) -> None:
        joint_states = self.names.topic("joint_states")
        for topic, cdr, stamp_ns in out:
            if topic == "/tf":
                self.tf.send(cdr)
            else:
                self._pub[topic].publish(cdr)
            self.published[topic] = self.published.get(topic, 0) + 1
            if topic == joint_states:
                self._latency.append((self.get_clock().now().nanoseconds - stamp_ns) * 1e-6)

    # ------------------------------------------------------------------------------------------
    # diagnostics
    def _now_estimator_time(self, clock_ns: int) -> float:
        """"Now" for the silence check, in the estimator's time base: the newest stamp fed plus
        the node-clock time since the node last received any reading. A sensor is then silent
        when it lags the others (even while the worker runs behind real time), and every
        sensor is once nothing arrives; a clock offset between rig and node does not matter."""
        newest_ns = self.time_jumps.newest_ns        # newest stamp fed
        if newest_ns is None or self.epoch_ns is None:
            return 0.0
        return (newest_ns - self.epoch_ns) * 1e-9 + max(0.0, (clock_ns - self._last_receive_ns) * 1e-9)

    def _extra_statuses(self) -> list:
        q = self.queue.figures()
        level, message = outputs.OK, "ok"
        lost = sum(self.lost.values())
        if self.worker_errors:
            level, message = outputs.ERROR, f"{self.worker_errors} estimation worker errors (see the log)"
        elif q["dropped"]:
            level, message = outputs.ERROR, f"{q['dropped']} readings dropped: the queue was full"
        elif lost:
            level, message = outputs.ERROR, (f"{lost} messages lost in DDS before the node took "
                                             "them (qos_depth too small, or the node starved of CPU)")
        problems = {}
        for topic, counter in self.router.problems.items():
            for reason, count in counter.items():
                problems[f"unusable {topic}"] = f"{count} x {reason}"
        if problems and level == outputs.OK:
            level, message = outputs.WARN, f"{sum(sum(c.values()) for c in self.router.problems.values())} unusable messages"
        values = dict(q)
        values["reordering"] = self.held
        values["worker_errors"] = self.worker_errors
        values["lost_in_dds"] = lost
        for topic, count in sorted(self.lost.items()):
            values[f"lost {topic}"] = count
        values.update(problems)
        for topic in sorted(self.router.topics):
            values[f"messages {topic}"] = self.queue.messages.get(topic, 0)
        for status, count in sorted(self.status_counts.items()):
            values[f"samples {status}"] = count
        # samples that never arrived (lost before the node: a best-effort transport in a burst,
        # a rig that skips): expected from each sensor's nominal rate over its stamps
        rates = {s.name: s.rate for s in self.mech.config.sensors.all()}
        worst = 0.0
        for name, c in self.estimator.counts().items():
            if name in rates and c.first_stamp is not None and c.last_stamp > c.first_stamp:
                expected = (c.last_stamp - c.first_stamp) * rates[name] + 1
                missing = max(0.0, 1.0 - c.received / expected)
                values[f"missing {name}"] = f"{100 * missing:.1f} %"
                worst = max(worst, missing)
        if worst > 0.05 and level == outputs.OK:
            level, message = outputs.WARN, (f"a sensor delivered {100 * worst:.0f} % fewer samples "
                                            "than its configured rate (lost in transport, or the "
                                            "rig publishes slower; see missing ...)")
        lat = np.fromiter(self._latency, float) if self._latency else np.zeros(0)
        out_values = {"stamp_to_publish_mean_ms": float(lat.mean()) if lat.size else 0.0,
                      "stamp_to_publish_p99_ms": float(np.percentile(lat, 99)) if lat.size else 0.0,
                      "jumps_backwards": self.jumps["backwards"], "jumps_forwards": self.jumps["forwards"],
                      "epoch_s": "none" if self.epoch_ns is None else f"{self.epoch_ns * 1e-9:.0f}",
                      "lagged": self.settings["lagged"]}
        for topic, count in sorted(self.published.items()):
            out_values[f"published {topic}"] = count
        return [("input queue", level, message, values),
                ("outputs", outputs.OK, f"{sum(self.published.values())} messages published", out_values)]

    def _publish_diagnostics(self) -> None:
        clock_ns = self.get_clock().now().nanoseconds
        with self._lock:
            msg = outputs.diagnostics_message(
                self.mech, self.estimator, self._now_estimator_time(clock_ns), clock_ns,
                node_name=self.get_name(), silence=self.settings["silence_timeout"],
                extra=self._extra_statuses())
        self._pub["/diagnostics"].publish(bytes(msgs.serialize(msg)))
        self._log_silence(msg)

    def _log_silence(self, msg) -> None:
        prefix = f"{self.get_name()}: sensor "
        for status in msg.status:
            if not status.name.startswith(prefix):
                continue
            name = status.name[len(prefix):]
            silent = status.level == outputs.WARN and status.message.startswith("silent")
            if silent and name not in self._silent:
                self._silent.add(name)
                self.get_logger().warning(f"sensor {name} ({status.hardware_id}) is {status.message}; "
                                       "estimating from the others")
            elif not silent and name in self._silent and status.message == "ok":
                self._silent.discard(name)
                self.get_logger().info(f"sensor {name} ({status.hardware_id}) is back")

    # ------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the worker (after the executor stopped)."""
        self.queue.close()
        self._worker.join(timeout=5.0)


def main(args: list[str] | None = None) -> int:
    """Console script ``estimator``: exit 0 on Ctrl-C / shutdown, 2 on bad parameters."""
    follow_parent()                    # no orphan when a runner dies
    sys.setswitchinterval(0.001)       # the DDS thread gets the GIL back quickly from the worker
    rclpy.init(args=args if args is not None else sys.argv)
    node = None
    try:
        try:
            node = EstimatorNode()
        except (MbfgError, LookupError) as exc:
            rclpy.logging.get_logger(NODE_NAME).error(f"cannot start: {exc}")
            return 2
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        try:
            executor.spin()
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        except Exception:                    # noqa: BLE001
            if rclpy.ok():
                raise
            # Ctrl-C shut the context down while rclpy was taking a message: a clean exit
        return 0
    finally:
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
