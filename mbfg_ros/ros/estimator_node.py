"""The ``estimator`` node: the mechanism estimator live on ROS 2 topics.

Run: ``ros2 run mbfg_ros estimator --ros-args -p config:=/path/rig.yaml`` (pip environment:
``.venv/bin/estimator --ros-args ...`` or ``python -m mbfg_ros.ros.estimator_node ...``). The
parameters are :data:`ESTIMATOR_PARAMETERS` (README "The estimator node").

Inputs: the config's sensor topics with SensorDataQoS (or reliable, ``sensor_qos``), one
subscription per topic, decoded by :class:`mbfg_ros.io.sensor_inputs.InputRouter` (each sensor
kind's decoding, :mod:`mbfg_ros.sensors`): encoders and known inputs from sensor_msgs/JointState
by joint name (other joints ignored), gyros and accelerometers from sensor_msgs/Imu
(angular_velocity, linear_acceleration in the sensor frame; one Imu topic may feed both), load
cells from geometry_msgs/WrenchStamped (the config's component and axis) or std_msgs/Float64
when the rig publishes a plain number (a topic that accepts several types follows the
publisher's type). The config's topics are resolved in the node's namespace (relative by
default: a namespace moves them; absolute ones stay) and remappings. An Imu whose frame_id or
covariance disagrees with the config is used and warned about once.
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

One thread (README "The live node"): the executor's (rclpy's classic one,
:func:`~mbfg_ros.ros.rclpy_compat.node_executor`). While data
flows the executor does not wait on the sensor subscriptions (:mod:`~mbfg_ros.ros.paced_intake`):
the intake timer runs bursts of ticks, each aimed at the arrival of the readings that let the
next estimates out, at most ``intake_period`` apart (default the estimator's update period),
each taking every message waiting on each topic as CDR bytes and decoding them at once
(:class:`~mbfg_ros.io.cdr_intake.CdrIntake`: the replay's CDR layouts, message by message for
irregular ones) into the input queue (:class:`~mbfg_ros.ros.sample_queue.SampleQueue`), then
running the estimation step: everything queued through the intake that ``mbfg replay`` shares
(:mod:`mbfg_ros.intake`): the time rules, stamp order across topics (``reorder_window``; what it
holds is released by time at the next tick) and the estimator
(:class:`~mbfg_ros.intake.feeder.Feeder`), and publishes the estimates, filled into byte
templates of the messages (:class:`~mbfg_ros.io.output_templates.BatchMessages`). After a second
without a message the node waits on its subscriptions again and the next message wakes it. The diagnostics timer
runs on the steady clock, so /diagnostics keeps coming when every sensor (or /clock) is silent
(between the slices of a backlog the step publishes them when due), and judges over a rolling
window (``health_window``, :mod:`mbfg_ros.intake.sensor_health`) so its warnings clear when
their cause is gone. Time follows :mod:`mbfg_ros.intake.time_jumps`:
an isolated stamp out of line is held, then rejected and counted (``rejected_stamp``), never a
reset; a new time that persists going back (a bag loop) or beyond ``max_time_gap`` ahead resets
the estimator and is logged once; readings of a sensor lagging the others by more than the window
are counted (``too_old_lagging_sensor``), not fed.

The rig is loaded through :func:`mbfg_ros.model.validation.load_rig`, the validation of ``mbfg
check``: a rig that check refuses stops the node at start-up with the line check prints and exit
status 2.
"""
from __future__ import annotations

import math
import sys
import threading
import time
from pathlib import Path

import rclpy
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy,
                       qos_profile_sensor_data)

from mbfg_ros.errors import ConfigError
from mbfg_ros.estimation.estimator import Estimator
from mbfg_ros.estimation.status import EstimatorStatus
from mbfg_ros.io import estimate_messages as outputs
from mbfg_ros.io import messages as msgs
from mbfg_ros.intake.feeder import Feeder, TimeJumpEvent
from mbfg_ros.intake.sensor_health import SensorHealth
from mbfg_ros.intake.stamp_order import StampOrder, topic_periods_ns
from mbfg_ros.io.cdr_intake import CdrIntake
from mbfg_ros.io.output_templates import BatchMessages
from mbfg_ros.io.sensor_inputs import InputRouter, route_sensors
from mbfg_ros.model.channels import command_channel
from mbfg_ros.ros.free_memory import release_free_memory
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.node_diagnostics import NodeStatuses, SensorChangeLog
from mbfg_ros.ros.node_parameters import declare_node_parameters
from mbfg_ros.ros.parameter_tables import (ESTIMATOR_PARAMETERS, check_frame, estimator_config,
                                           load_node_mechanism)
from mbfg_ros.ros.node_intake import NodeIntake
from mbfg_ros.ros.paced_intake import ArrivalClock, IntakeSchedule, PacedGroup, topic_leads_ns
from mbfg_ros.ros.runtime_parameters import RuntimeParameters
from mbfg_ros.ros.sample_queue import SampleQueue
from mbfg_ros.ros.estimate_outputs import EstimateOutputs
from mbfg_ros.ros.node_runner import run_node
from mbfg_ros.ros.tf_publisher import TfPublisher

NODE_NAME = "mbfg_estimator"

class EstimatorNode(NodeIntake, EstimateOutputs, Node):
    """The estimator on ROS 2 topics (see the module docstring)."""

    def __init__(self, node_name: str = NODE_NAME, ros_argv: list[str] | None = None, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.settings = declare_node_parameters(self, ESTIMATOR_PARAMETERS, ros_argv)
        self._set_up(self.settings)
        self.runtime = RuntimeParameters(self)

    def _set_up(self, p: dict) -> None:
        """Load and check the rig, build the estimator, its intake and outputs, start the worker
        (the managed node does this at configure, :mod:`mbfg_ros.ros.lifecycle_node`)."""
        check_frame("world_frame", p["world_frame"])
        check_frame("frame_prefix", p["frame_prefix"])
        self.mech = mech = load_node_mechanism(p)
        try:
            topics = InputRouter(mech).topics
        except ValueError as exc:                  # sensors that cannot share a topic: one line
            raise ConfigError(str(exc), file=str(mech.config.source or p["config"])) from None
        cfg = estimator_config(p, mech)
        self.estimator = Estimator(mech, cfg, lagged=p["lagged"], covariance=p["publish_covariance"])
        if self.estimator.uncertainty is not None:     # its search in the time spare between ticks
            self.estimator.uncertainty.background = True
        # the config's topics resolved here (namespace, remappings): logs and /diagnostics name
        # the topics the node really reads
        self.resolved_topics = {t: self.resolve_topic_name(t) for t in topics}
        self.router = InputRouter(mech, self.resolved_topics)
        self.names = outputs.OutputNames(self.get_fully_qualified_name(), p["frame_prefix"])
        self.queue = SampleQueue(p["max_queue"])
        self.intake = CdrIntake(self.router)      # serialized messages -> readings, in bulk
        self._lock = threading.Lock()             # the estimator and the time bookkeeping
        self._tf_data = mech.create_data()
        self._last_receive_ns = 0                 # node clock at the last reading received
        # the intake (shared with replay): the time rules, stamp order across topics, the estimator
        self.order = StampOrder(topic_periods_ns(mech, {t: route_sensors(r) for t, r in self.router.routes.items()}),
                                p["reorder_window"], p["silence_timeout"])
        self.feeder = Feeder(self.estimator, self.order, p["max_time_gap"], after_reset=self._time_jump)
        self.published: dict[str, int] = {}
        self._statuses = NodeStatuses(p["health_window"])      # the input queue's and outputs' statuses
        self._sensor_changes = SensorChangeLog(f"{self.get_fully_qualified_name()}: sensor ")
        sensors = mech.config.sensors.all()
        self.health = SensorHealth({x.name: x.rate for x in sensors}, {x.name: x.topic for x in sensors},
                                   window=p["health_window"])
        self._in_feed = 0                          # readings taken from the stamp order, not yet fed
        self._problems_logged: set[tuple[str, str]] = set()
        self._diag_next = math.inf                # steady s: the next /diagnostics is due
        self._wanted_at = -math.inf               # when the outputs' subscribers were counted
        self._wanted_topics: set[str] = set()
        self.lost: dict[str, int] = {}            # messages DDS reported lost, per topic
        self.worker_errors = 0
        self.muted: set[str] = set()              # outputs switched off at run time (runtime_parameters)
        # the outputs' byte templates (built here: ~0.1 s), checked at the first keyframe
        self._batch_messages = None if p["publish_covariance"] else self._output_templates_of(mech)
        self._templates: BatchMessages | bool | None = None   # decided at the first keyframe

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
        self._paced = PacedGroup()
        for topic, types in self.router.topics.items():
            self._subscribe(topic, types[0])

        self.create_service(message_class("std_srvs/srv/Trigger"), "~/reset", self._on_reset)
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._diag_timer = self.create_timer(p["diagnostics_period"], self._diagnostics_tick, clock=steady)
        self._diag_next = time.monotonic() + p["diagnostics_period"]
        self._ready: list = []                   # readings released, not fed yet (a backlog)
        # while data flows, bursts of ticks (each aimed at the readings of the next estimates,
        # at most an intake period apart) take every topic's messages, feed a backlog on and
        # release what the stamp order holds by time (paced_intake.py); the timer starts a burst
        self._schedule = IntakeSchedule(p["intake_period"] or self.estimator.keyframes_per_update
                                        / self.estimator.cfg.keyframe_rate)
        self._arrivals = ArrivalClock(self.order.periods_ns, topic_leads_ns(     # when a header stamp's
            self.order.periods_ns, {t: route_sensors(r) for t, r in self.router.routes.items()}))   # messages arrive
        self._intake_timer = self.create_timer(self._schedule.period, self._intake_burst, clock=steady)
        self._intake_timer.cancel()
        self._taken_at = -math.inf               # steady s: the last tick that took a message
        self._search_seen = ("watching", 0.0)     # the model uncertainty's state, since (steady s)
        self._switching: dict[str, str] = {}      # load-cell topics changing message type
        if any(len(types) > 1 for types in self.router.topics.values()):
            self._type_timer = self.create_timer(1.0, self._follow_publisher_types, clock=steady)
        self._log_start()

    # ------------------------------------------------------------------------------------------
    # set-up
    def _static_transforms(self) -> bytes | None:
        """/tf_static: fixed joints, config frames, gyro frames and the world_frame attachment
        (:func:`~mbfg_ros.io.estimate_messages.static_tf_message`; None if there are none)."""
        msg = outputs.static_tf_message(self.mech, self.get_clock().now().nanoseconds, self.names,
                                        self.settings["world_frame"])
        return bytes(msgs.serialize(msg)) if msg.transforms else None

    def _follow_publisher_types(self) -> None:
        """Topics that accept several types (a load cell's WrenchStamped or Float64): subscribe
        with the type a publisher actually uses (DDS matches only equal types). Runs on a 1 Hz timer; a switch takes two
        ticks, because rclpy destroys the old subscription only once the executor let go of it
        and DDS refuses a second type on the same topic before that."""
        for topic, t in list(self._switching.items()):
            try:
                self._subscribe(topic, t)
                del self._switching[topic]
                self.get_logger().info(f"{topic} is published as {t}: subscribed with that type")
            except Exception as exc:                     # noqa: BLE001 (retried next tick)
                self.get_logger().debug(f"subscribing {topic} as {t} failed, retrying: {exc}")
        flexible = [t for t, types in self.router.topics.items() if len(types) > 1]
        for topic in flexible:
            if topic in self._switching:
                continue
            types = {i.topic_type for i in self.get_publishers_info_by_topic(topic)}
            current = self._subs.get(topic, (None,))[0]
            if not types or current in types:
                continue
            for t in sorted(types):
                if t in self.router.topics[topic]:
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

    def _on_reset(self, request, response):
        with self._lock:
            self.feeder.reset("reset service")
        self.get_logger().info("estimator reset (~/reset): it restarts from the config's initial "
                               "state at the next sample")
        response.success = True
        response.message = "estimator reset; it restarts at the next sample"
        return response

    # ------------------------------------------------------------------------------------------
    # the estimation step (in the executor's thread)
    def _step(self) -> None:
        """Run the estimation step; an unexpected error is logged with its traceback, counted
        on /diagnostics (ERROR, ``worker_errors``) and the node goes on (a node whose step
        raised would stop the estimates silently)."""
        try:
            self._estimate()
        except Exception:                              # noqa: BLE001
            if not rclpy.ok(context=self.context) or self.queue.closed:
                return          # shutting down: the context went away under a publish
            self.worker_errors += 1
            import traceback
            self.get_logger().error("estimation error (the node goes on):\n"
                                    + traceback.format_exc(), throttle_duration_sec=5.0)

    def _estimate(self) -> None:
        """Take what is queued through the intake: the time rules, then stamp order across
        topics (:class:`~mbfg_ros.intake.stamp_order.StampOrder` on the steady clock: a reading
        waits while an active topic may still send one stamped before it, at most
        ``reorder_window``), feed what is due and publish the estimates. A backlog is fed in
        slices for at most :data:`STEP_BUDGET` s per step (/diagnostics between slices when
        due); the rest waits for the next step (:attr:`_backlog_timer`), so the executor takes
        the messages that came meanwhile (DDS keeps only ``qos_depth`` of them), which wait in
        the input queue until the backlog is fed."""
        feeder = self.feeder
        now = time.monotonic_ns()
        ready = self._ready
        if not ready and len(self.queue):
            batch = self.queue.take_all(timeout=0.0)
            with self._lock:                    # (a time jump feeds and resets the estimator)
                for r in batch:
                    feeder.push(r[0], r[1], r[2], r[3], now)
                out = self._messages_of_estimates()
            self.queue.mark_processed(batch)
            self._publish(out)
        ready.extend(feeder.release(now))
        deadline = time.monotonic() + self.STEP_BUDGET
        done = 0
        while done < len(ready):
            part = ready[done:done + self.SLICE]
            with self._lock:
                feeder.feed(part)
                out = self._messages_of_estimates()
                done += len(part)
                self._in_feed = len(ready) - done
            self._publish(out)
            if done < len(ready):
                if time.monotonic() >= deadline:
                    break
                self._diagnostics_if_due()
        del ready[:done]
        self._in_feed = len(ready)

    STEP_BUDGET = 0.02
    """s: longest one step feeds a backlog before the executor takes messages again."""

    SLICE = 50
    """Readings fed per slice (the lock is released and outputs published between slices)."""

    def _diagnostics_tick(self) -> None:
        """The diagnostics timer (steady clock): /diagnostics now."""
        self._diag_next = time.monotonic() + self.settings["diagnostics_period"]
        self._publish_diagnostics()

    def _diagnostics_if_due(self) -> None:
        """/diagnostics between the slices of a backlog, when one is due (the timer waits for
        the step)."""
        if time.monotonic() >= self._diag_next:
            self._diagnostics_tick()

    def _messages_of_estimates(self) -> list[tuple[str, bytes, int]]:
        """The messages of the estimates the estimator closed since the last call."""
        est = self.estimator
        estimates = est.pop_lagged() if self.settings["lagged"] else est.pop_estimates()
        return self._messages(estimates)

    def _time_jump(self, jump: TimeJumpEvent) -> None:
        """Log (once per jump) a time jump that restarted the estimator; after one the time rules
        found, the health window starts again (stamps across it do not compare)."""
        if jump.by_rules:
            self.health.restart()
        self._arrivals.restart()
        self.get_logger().warning(f"{jump.reason} (stamp {jump.stamp_ns * 1e-9:.3f} s on {jump.topic}; a bag "
                                  "loop or a clock reset?): estimator reset")

    # ------------------------------------------------------------------------------------------
    # diagnostics
    def _now_estimator_time(self, clock_ns: int) -> float:
        """"Now" for the silence check, in the estimator's time base: the newest stamp fed plus
        the node-clock time since the node last received any reading. A sensor is then silent
        when it lags the others (even while the worker runs behind real time), and every
        sensor is once nothing arrives; a clock offset between rig and node does not matter."""
        newest = self.feeder.newest_seconds()
        if newest is None:
            return 0.0
        return newest + max(0.0, (clock_ns - self._last_receive_ns) * 1e-9)

    def _publish_diagnostics(self) -> None:
        clock_ns = self.get_clock().now().nanoseconds
        with self._lock:
            self.health.update(time.monotonic(), self.feeder.sensor_figures(),
                               {t: dict(c) for t, c in self.router.problems.items()})
            msg = outputs.diagnostics_message(
                self.mech, EstimatorStatus.of(self.estimator), self._now_estimator_time(clock_ns), clock_ns,
                node_name=self.get_fully_qualified_name(), silence=self.settings["silence_timeout"],
                extra=self._node_statuses(), topic_names=self.resolved_topics,
                verdicts=self.health.verdicts(),
                sensor_values={name: self.health.window_values(name) for name in self.estimator.counts()})
        self._pub["/diagnostics"].publish(bytes(msgs.serialize(msg)))
        log = self.get_logger()
        for level, text in self._sensor_changes.lines(msg.status):
            # (one call site per severity: rclpy refuses a call site that changes its severity)
            if level == "error":
                log.error(text)
            elif level == "warning":
                log.warning(text)
            else:
                log.info(text)
        release_free_memory()

    def _node_statuses(self) -> list[tuple]:
        """The input queue and outputs statuses (:class:`~mbfg_ros.ros.node_diagnostics.NodeStatuses`)."""
        now = time.monotonic()
        st = self._statuses
        return [st.input_queue(now, self.queue.figures(), self.queue.messages, self.lost, self.router,
                               self.feeder, self.worker_errors, self._in_feed),
                st.outputs(now, self.health.counts.window, self.published, self.feeder, self.settings["lagged"])]

    # ------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop estimating (after the executor stopped)."""
        self.queue.close()


def main(args: list[str] | None = None) -> int:
    """Console script ``estimator``: exit 0 on Ctrl-C / shutdown, 2 on bad parameters (under
    cProfile with :data:`~mbfg_ros.ros.node_runner.PROFILE_ENV` set)."""
    return run_node(EstimatorNode, NODE_NAME, args)


if __name__ == "__main__":
    sys.exit(main())
