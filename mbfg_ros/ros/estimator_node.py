"""The ``estimator`` node: the mechanism estimator live on ROS 2 topics.

Run: ``ros2 run mbfg_ros estimator --ros-args -p config:=/path/rig.yaml`` (pip environment:
``.venv/bin/estimator --ros-args ...`` or ``python -m mbfg_ros.ros.estimator_node ...``). The
parameters are :data:`ESTIMATOR_PARAMETERS` (README "The estimator node").

Inputs: the config's sensor topics with SensorDataQoS (or reliable, ``sensor_qos``), decoded by
:class:`mbfg_ros.io.sensor_inputs.InputRouter`: encoders and known inputs from
sensor_msgs/JointState by joint name (other joints ignored), gyros from sensor_msgs/Imu
(angular_velocity in the sensor frame), load cells from geometry_msgs/WrenchStamped (the
config's component and axis) or std_msgs/Float64 when the rig publishes a plain number (the
subscription follows the publisher's type). The config's topics are resolved in the node's
namespace (relative by default: a namespace moves them; absolute ones stay) and remappings. An
Imu whose frame_id or covariance disagrees with the config is used and warned about once.
Header stamps are the sample times; the node's clock (``use_sim_time`` follows /clock) only
stamps diagnostics and measures silence.

Outputs (``~`` = the node's name, ``/mbfg_estimator`` by default;
:mod:`mbfg_ros.io.estimate_messages` builds every message, as ``mbfg replay`` writes them):
``~/joint_states`` (JointState of every joint: position, velocity, effort = estimated actuator
effort), ``~/dynamic_joint_states`` (control_msgs/DynamicJointState: position, velocity,
acceleration, effort of every joint; with ``publish_covariance`` the DOF variances too),
``~/forces/<closure or load cell>`` (WrenchStamped), ``~/dof_covariance``
(``publish_covariance``), /tf and /tf_static,
/diagnostics, and ``~/robot_description`` (the URDF in use, std_msgs/String, latched: rviz2's
RobotModel shows it moved by the estimated TF). Service ``~/reset`` (std_srvs/Trigger). An
output nobody subscribes to is not computed (subscribers are counted once a second);
``~/joint_states`` always goes out.

Threads: DDS callbacks only decode and queue (:class:`~mbfg_ros.ros.sample_queue.SampleQueue`);
one worker takes everything queued, feeds it to the Estimator in stamp order and publishes the
estimates; the diagnostics timer runs on the steady clock, so /diagnostics keeps coming when every
sensor (or /clock) is silent, and judges over a rolling window (``health_window``,
:mod:`mbfg_ros.io.sensor_health`) so its warnings clear when their cause is gone. Time follows
:mod:`mbfg_ros.io.time_jumps` (as replay): an isolated stamp out of line is held, then rejected
and counted (``rejected_stamp``), never a reset; a new time that persists going back (a bag loop)
or beyond ``max_time_gap`` ahead resets the estimator and is logged once; readings of a sensor
lagging the others by more than the window are counted (``too_old_lagging_sensor``), not fed.

The rig is loaded through :func:`mbfg_ros.model.validation.load_rig`, the validation of ``mbfg
check``: a rig that check refuses stops the node at start-up with the line check prints and exit
status 2.
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
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

from mbfg_ros.errors import ConfigError, MbfgError
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.io import estimate_messages as outputs
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.sensor_health import RollingCounts, SensorFigures, SensorHealth
from mbfg_ros.io.sensor_inputs import FLOAT64, WRENCH_STAMPED, InputRouter
from mbfg_ros.io.time_jumps import TimeJumps, lagging_limit
from mbfg_ros.model.channels import command_channel
from mbfg_ros.model.config import KEYFRAME_RATE_RANGE, LAG_RANGE, window_problem
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.validation import load_rig
from mbfg_ros.ros.free_memory import fix_heap_thresholds, release_free_memory
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.processes import follow_parent
from mbfg_ros.ros.node_parameters import (ParameterError, ParameterSpec, declare, init_rclpy,
                                          unknown_overrides)
from mbfg_ros.ros.rclpy_compat import SubscriptionEventCallbacks, UnsupportedEventTypeError
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
                  "published estimates)", "Hz", *KEYFRAME_RATE_RANGE,
                  zero_means="the config's estimator.keyframe_rate"),
    ParameterSpec("lag", float, 0.0, "length of the fixed-lag window", "s", *LAG_RANGE,
                  zero_means="the config's estimator.lag"),
    ParameterSpec("world_frame", str, "", "a frame attached to the URDF's root link by a static "
                  "identity transform (e.g. map); empty: none"),
    ParameterSpec("frame_prefix", str, "", "prefix of every published link and closure frame id "
                  "(e.g. mbfg/ when robot_state_publisher already publishes the rig's links)"),
    ParameterSpec("publish_tf", bool, True, "publish the estimated link poses on /tf (fixed "
                  "joints, config frames and sensor frames on /tf_static)"),
    ParameterSpec("publish_robot_description", bool, True, "publish the URDF the node uses on "
                  "~/robot_description (std_msgs/String, latched) for rviz2's RobotModel"),
    ParameterSpec("publish_forces", bool, True, "publish ~/forces/<closure> and ~/forces/<load cell>"),
    ParameterSpec("publish_accelerations", bool, True, "publish ~/dynamic_joint_states (every "
                  "joint's position, velocity, acceleration and effort)"),
    ParameterSpec("publish_covariance", bool, False, "publish ~/dof_covariance and the DOF "
                  "variances in ~/dynamic_joint_states "
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
    ParameterSpec("health_window", float, 5.0, "/diagnostics judges the inputs, the queue and "
                  "the latency over this rolling window (a warning clears once its cause has been "
                  "gone this long)", "s", 1.0, 3600.0),
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
    if urdf and not description and not Path(urdf).expanduser().is_file():
        raise ParameterError(f"parameter 'urdf': no such file (value: {urdf!r})")
    # the one validation of `mbfg check`, `replay` and `simulate`: the same line, exit 2
    return load_rig(path, urdf=urdf or None, robot_description=description or None).mech


class EstimatorNode(Node):
    """The estimator on ROS 2 topics (see the module docstring)."""

    def __init__(self, node_name: str = NODE_NAME, ros_argv: list[str] | None = None, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        p = declare(self, ESTIMATOR_PARAMETERS)
        extra, ignored = unknown_overrides(self, ESTIMATOR_PARAMETERS, ros_argv)
        if ignored:
            self.get_logger().warning(f"ignoring parameter(s) {', '.join(repr(e) for e in ignored)} "
                                      "given by a wildcard section of a params file: this node has "
                                      "no such parameter")
        if extra:
            raise ParameterError(f"unknown parameter(s) {', '.join(repr(e) for e in extra)} "
                                 f"(this node has: {', '.join(s.name for s in ESTIMATOR_PARAMETERS)}, "
                                 "use_sim_time)")
        self.settings = p
        _check_frame("world_frame", p["world_frame"])
        _check_frame("frame_prefix", p["frame_prefix"])
        self.mech = mech = load_node_mechanism(p)
        try:
            topics = InputRouter(mech).topics
        except ValueError as exc:                  # sensors that cannot share a topic: one line
            raise ConfigError(str(exc), file=str(mech.config.source or p["config"])) from None
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
        problem = window_problem(cfg.keyframe_rate, cfg.lag)
        if problem:
            raise ParameterError(f"parameters 'lag' and 'keyframe_rate': {problem} (lag {cfg.lag:g} s "
                                 f"x {cfg.keyframe_rate:g} Hz)")
        if cfg.sensor_wait >= cfg.lag:
            raise ParameterError(f"parameter 'lag' must be longer than the config's "
                                 f"estimator.sensor_wait ({cfg.sensor_wait:g} s) (value: {cfg.lag:g} s)")
        self.estimator = Estimator(mech, cfg, lagged=p["lagged"], covariance=p["publish_covariance"])
        # the config's topics resolved here (namespace, remappings): logs and /diagnostics name
        # the topics the node really reads
        self.resolved_topics = {t: self.resolve_topic_name(t) for t in topics}
        self.router = InputRouter(mech, self.resolved_topics)
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
        self._latency: deque = deque()            # (steady s, node clock at publish - stamp, ms)
        self._warned: set[str] = set()            # sensors logged as WARN
        self._diverged: set[str] = set()          # sensors logged as ERROR (diverged)
        sensors = mech.config.sensors.all()
        self.health = SensorHealth({x.name: x.rate for x in sensors}, {x.name: x.topic for x in sensors},
                                   window=p["health_window"])
        self._queue_window = RollingCounts(p["health_window"])
        self._in_feed = 0                          # readings taken from the reorder heap, not yet fed
        self._fed_stamp: dict[str, int] = {}       # sensor -> newest stamp fed (ns), any value
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
            if topic.endswith("/dynamic_joint_states") and not p["publish_accelerations"]:
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
        """/tf_static: fixed joints, config frames, gyro frames and the world_frame attachment
        (:func:`~mbfg_ros.io.estimate_messages.static_tf_message`; None if there are none)."""
        msg = outputs.static_tf_message(self.mech, self.get_clock().now().nanoseconds, self.names,
                                        self.settings["world_frame"])
        return bytes(msgs.serialize(msg)) if msg.transforms else None

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
            sensors.append(f"{s.name} on {self.resolve_topic_name(s.topic)} ({s.rate:g} Hz)")
        for j in mech.known_input_joints:
            sensors.append(f"{command_channel(j)} on {self.resolve_topic_name(mech.config.joint(j).topic)}")
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
        for what in self.router.disagreements.get(topic, ()):
            if (topic, what) not in self._problems_logged:
                self._problems_logged.add((topic, what))
                self.get_logger().warning(f"{topic}: {what} (counted on /diagnostics; logged once)")
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
            self._in_feed = len(ready)
            # a backlog is fed in slices so that estimates and diagnostics keep going out
            for i in range(0, len(ready), self.SLICE):
                part = ready[i:i + self.SLICE]
                with self._lock:
                    out = self._feed(part)
                    self._in_feed -= len(part)
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
            names = [*route.encoders.values(), *route.load_cells, *([route.gyro] if route.gyro else [])]
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

    TIME_RULE_COUNTS = {"stale": "discarded_at_time_jump", "too_old": "too_old_lagging_sensor",
                        "rejected": "rejected_stamp"}
    """/diagnostics name (``samples <name>``) of the readings :class:`TimeJumps` drops."""

    def _feed(self, batch: list[QueuedReading]) -> list[tuple[str, bytes]]:
        """Feed readings to the estimator after the time-jump rules (:mod:`mbfg_ros.io.time_jumps`,
        shared with replay): an out-of-line stamp is held until its new time persists (then the
        estimator restarts on a jump) and rejected if it does not; readings left over from before
        a jump or from a sensor lagging the others by more than the window are counted, not fed."""
        est = self.estimator
        jumps = self.time_jumps
        for r in batch:
            if self.epoch_ns is None:
                self.epoch_ns = (r.stamp_ns // 1_000_000_000) * 1_000_000_000
            verdict = jumps.check(r.topic, r.sensor, r.stamp_ns, r)
            if verdict not in ("ok", "jump"):
                continue                     # held, or dropped and counted by TimeJumps
            if verdict == "jump":
                jump = jumps.jumps[-1]
                est.reset(jump.reason)
                self._resets_seen = est.health.resets
                self._time_jump(r, jump.direction, jump.reason)
                self._fed_stamp.clear()
                self.health.restart()
            for x in (*jumps.released(), r):
                if x.stamp_ns > self._fed_stamp.get(x.sensor, -1):
                    self._fed_stamp[x.sensor] = x.stamp_ns
                status = est.add_sample(x.sensor, (x.stamp_ns - self.epoch_ns) * 1e-9, x.value)
                self.status_counts[status] = self.status_counts.get(status, 0) + 1
                if est.health.resets != self._resets_seen:      # the estimator's own jump check
                    self._resets_seen = est.health.resets
                    self._time_jump(x, "backwards", est.health.last_reset)
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
                self._latency.append((time.monotonic(),
                                      (self.get_clock().now().nanoseconds - stamp_ns) * 1e-6))

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

    def _sensor_figures(self) -> dict[str, SensorFigures]:
        """Each sensor's cumulative figures for the rolling window (estimator counts plus the
        readings the time rules dropped before it)."""
        out = {}
        dropped = self.time_jumps.by_sensor
        for name, c in self.estimator.counts().items():
            d = dropped.get(name, {})
            reasons = {"not finite": c.rejected_nonfinite, "duplicate stamps": c.rejected_duplicate,
                       "too old for the window": c.too_old, "discarded at a restart": c.discarded,
                       "stamps out of line": d.get("rejected", 0),
                       "stale after a time jump": d.get("stale", 0),
                       "lagging the other sensors": d.get("too_old", 0)}
            fed = self._fed_stamp.get(name)
            out[name] = SensorFigures(arrived=c.received + sum(d.values()),
                                      usable=c.used + c.late + c.pending, reasons=reasons,
                                      duplicates=c.rejected_duplicate,
                                      last_stamp=None if fed is None else (fed - self.epoch_ns) * 1e-9)
        return out

    def _extra_statuses(self) -> list:
        """The input queue and outputs statuses; their levels judge the last ``health_window``
        seconds (a warning clears once its cause is gone), their values are run totals."""
        q = self.queue.figures()
        lost = sum(self.lost.values())
        unusable = sum(sum(c.values()) for c in self.router.problems.values())
        win = self._queue_window
        win.update(time.monotonic(), {"worker_errors": self.worker_errors, "dropped": q["dropped"],
                                      "lost": lost, "unusable": unusable})
        recent = {k: int(win.delta(k)) for k in ("worker_errors", "dropped", "lost", "unusable")}
        w = f"in the last {max(win.span, 0.0):.0f} s"
        level, message = outputs.OK, "ok"
        if recent["worker_errors"]:
            level, message = outputs.ERROR, f"{recent['worker_errors']} estimation worker errors {w} (see the log)"
        elif recent["dropped"]:
            level, message = outputs.ERROR, f"{recent['dropped']} readings dropped {w}: the queue was full"
        elif recent["lost"]:
            level, message = outputs.ERROR, (f"{recent['lost']} messages lost in DDS {w} before the node "
                                             "took them (qos_depth too small, or the node starved of CPU)")
        elif recent["unusable"]:
            level, message = outputs.WARN, f"{recent['unusable']} unusable messages {w}"
        values = dict(q)
        values["reordering"] = self.held
        values["worker_errors"] = self.worker_errors
        values["lost_in_dds"] = lost
        for topic, count in sorted(self.lost.items()):
            values[f"lost {topic}"] = count
        for topic, counter in self.router.problems.items():
            for reason, count in counter.items():
                values[f"unusable {topic}"] = f"{count} x {reason}"
        for topic, counter in self.router.disagreements.items():
            for what, count in counter.items():
                values[f"disagrees {topic}"] = f"{count} x {what}"
        for topic in sorted(self.router.topics):
            values[f"messages {topic}"] = self.queue.messages.get(topic, 0)
        for status, count in sorted(self.status_counts.items()):
            values[f"samples {status}"] = count
        for what, name in self.TIME_RULE_COUNTS.items():
            values[f"samples {name}"] = sum(getattr(self.time_jumps, what).values())
        values["samples held_out_of_line"] = self.time_jumps.held
        # every reading queued is in exactly one place: waiting, reordering, held by the time
        # rules, dropped by them, or received by the estimator (0 = nothing went missing)
        received = sum(c.received for c in self.estimator.counts().values())
        time_dropped = sum(sum(getattr(self.time_jumps, w).values()) for w in self.TIME_RULE_COUNTS)
        values["unaccounted_readings"] = (q["queued"] - q["waiting"] - self.held - self._in_feed
                                          - self.time_jumps.held - time_dropped - received)
        horizon = time.monotonic() - self.health.counts.window
        while self._latency and self._latency[0][0] < horizon:
            self._latency.popleft()
        lat = np.fromiter((x[1] for x in self._latency), float) if self._latency else np.zeros(0)
        out_values = {"stamp_to_publish_mean_ms": float(lat.mean()) if lat.size else 0.0,
                      "stamp_to_publish_p99_ms": float(np.percentile(lat, 99)) if lat.size else 0.0,
                      "stamp_to_publish_window_s": self.health.counts.window,
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
            self.health.update(time.monotonic(), self._sensor_figures(),
                               {t: dict(c) for t, c in self.router.problems.items()})
            msg = outputs.diagnostics_message(
                self.mech, self.estimator, self._now_estimator_time(clock_ns), clock_ns,
                node_name=self.get_fully_qualified_name(), silence=self.settings["silence_timeout"],
                extra=self._extra_statuses(), topic_names=self.resolved_topics,
                verdicts=self.health.verdicts(),
                sensor_values={name: self.health.window_values(name) for name in self.estimator.counts()})
        self._pub["/diagnostics"].publish(bytes(msgs.serialize(msg)))
        self._log_sensor_changes(msg)
        release_free_memory()

    def _log_sensor_changes(self, msg) -> None:
        """Log once when a sensor turns WARN (silent, unusable, losing readings) and when it is
        back to ok; an ERROR (the divergence test) once per period."""
        prefix = f"{self.get_fully_qualified_name()}: sensor "
        for status in msg.status:
            if not status.name.startswith(prefix):
                continue
            name = status.name[len(prefix):]
            if status.level == outputs.ERROR and name not in self._diverged:
                self._diverged.add(name)         # the divergence test: logged once per period
                self.get_logger().error(f"sensor {name} ({status.hardware_id}): {status.message}")
            elif status.level != outputs.ERROR:
                self._diverged.discard(name)
            bad = status.level == outputs.WARN and status.message != "no data yet"
            if bad and name not in self._warned:
                self._warned.add(name)
                if status.message.startswith("fitted worse"):     # the divergence test: strained
                    self.get_logger().warning(f"sensor {name} ({status.hardware_id}): {status.message}")
                else:
                    what = status.message if status.message.startswith("silent") else f"WARN: {status.message}"
                    self.get_logger().warning(f"sensor {name} ({status.hardware_id}) is {what}; "
                                              "estimating from the others")
            elif not bad and name in self._warned and status.message == "ok":
                self._warned.discard(name)
                self.get_logger().info(f"sensor {name} ({status.hardware_id}) is back")

    # ------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop the worker (after the executor stopped)."""
        self.queue.close()
        self._worker.join(timeout=5.0)


def main(args: list[str] | None = None) -> int:
    """Console script ``estimator``: exit 0 on Ctrl-C / shutdown, 2 on bad parameters."""
    follow_parent()                    # no orphan when a runner dies
    fix_heap_thresholds()              # memory flat over days, backlogs included
    sys.setswitchinterval(0.001)       # the DDS thread gets the GIL back quickly from the worker
    argv = list(args if args is not None else sys.argv)
    if not init_rclpy(argv, NODE_NAME):
        return 2
    node = None
    try:
        try:
            node = EstimatorNode(ros_argv=argv)
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
