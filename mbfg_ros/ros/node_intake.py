"""The estimator node's sensor intake: its subscriptions, taken paced (:mod:`.paced_intake`),
decoded in bulk and queued.

:class:`NodeIntake` is a part of :class:`~mbfg_ros.ros.estimator_node.EstimatorNode` (and so of
the managed node, which takes messages only while active); it reads the node's router, CDR
intake, input queue, stamp order and estimator, and runs its estimation step.
"""
from __future__ import annotations

import time

import rclpy

from mbfg_ros.io.sensor_inputs import FLOAT64
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.paced_intake import IDLE_AFTER, receive_times
from mbfg_ros.ros.rclpy_compat import SubscriptionEventCallbacks, UnsupportedEventTypeError, take_all
from mbfg_ros.ros.sample_queue import QueuedReading


class NodeIntake:
    """How the estimator node takes its sensor messages (module docstring)."""

    def _subscribe(self, topic: str, msgtype: str) -> None:
        events = SubscriptionEventCallbacks(
            message_lost=lambda info, topic=topic: self._on_lost(topic, info))

        def callback(raw: bytes, topic=topic, msgtype=msgtype) -> None:
            self._woken(topic, msgtype, raw)

        kwargs = dict(raw=True, callback_group=self._paced)
        try:
            sub = self.create_subscription(message_class(msgtype), topic, callback,
                                           self._sensor_qos, event_callbacks=events, **kwargs)
        except UnsupportedEventTypeError:           # an rmw without the message-lost event
            sub = self.create_subscription(message_class(msgtype), topic, callback, self._sensor_qos, **kwargs)
        self._subs[topic] = (msgtype, sub)

    SPARE_MARGIN = 0.0005
    """s before the next intake tick at which background work (:meth:`Estimator.spare_time`) stops."""

    DRAIN = 5000
    """Most messages taken from one subscription per wake-up."""

    def _woken(self, topic: str, msgtype: str, raw: bytes) -> None:
        """The first message after a silence (the executor took it: the node was idle, waiting
        on its subscriptions): pace again (:mod:`~mbfg_ros.ros.paced_intake`) and take it with
        everything waiting."""
        self._paced.idle = False
        self._intake_timer.reset()
        self._intake([(topic, msgtype, [raw], [0])])

    def _intake_burst(self) -> None:
        """The intake timer: a burst of intake ticks (:class:`~mbfg_ros.ros.paced_intake.IntakeSchedule`),
        each taking every message waiting on each sensor topic, then running the estimation
        step; idle (waiting on the subscriptions again) after a silence with nothing held."""
        for now in self._schedule.ticks():
            if not self._taking() or not rclpy.ok(context=self.context):
                self._go_idle()
                return
            taken = []
            for topic, (msgtype, sub) in list(self._subs.items()):
                raws, received = take_all(sub, self.DRAIN)
                if raws:
                    taken.append((topic, msgtype, raws, received))
            if taken:
                self._taken_at = now
            elif (now - self._taken_at > IDLE_AFTER and not self._ready and not len(self.queue)
                  and not len(self.order)):
                self._go_idle()
                return
            self._intake(taken)
            if not self._ready:                     # no backlog: time spare until the next tick
                # (nothing came: the rig paused or stopped; no early retry, a period's tick)
                self._schedule.aim(self._next_estimate_due() if taken else None, now)
                with self._lock:
                    self.estimator.spare_time(self._schedule.next - self.SPARE_MARGIN)
                self._note_search(now)

    def _note_search(self, now: float) -> None:
        """Log when the model uncertainty's search (run in the spare time) holds its scale, and
        how long it took (steady ``now``, s)."""
        u = self.estimator.uncertainty
        if u is None or u.state == self._search_seen[0]:
            return
        if u.state == "held" and self._search_seen[0] == "searching":
            self.get_logger().info(
                f"model uncertainty: scale {u.scale:.3g} held; its search took {now - self._search_seen[1]:.1f} s "
                f"in the spare time (at most {u.cfg.background_share:g} of a core: "
                "estimator.model_uncertainty.background_share)")
        self._search_seen = (u.state, now)

    ARRIVAL_MARGIN = 0.0002
    """s after the readings of the next estimate are due (:meth:`_next_estimate_due`) at which
    the intake ticks."""

    def _next_estimate_due(self) -> float | None:
        """Monotonic s at which the readings that let the next estimates out are due to have
        arrived (every live sensor past :meth:`Estimator.next_estimate_stamp`, at each topic's
        usual delay: :class:`~mbfg_ros.ros.paced_intake.ArrivalClock`), plus :data:`ARRIVAL_MARGIN`; None
        before the estimator started or a message was seen."""
        t, epoch = self.estimator.next_estimate_stamp(), self.feeder.epoch_ns
        if t is None or epoch is None:
            return None
        due = self._arrivals.arrival(epoch + int(round(t * 1e9)), time.monotonic())
        return None if due is None else due + self.ARRIVAL_MARGIN

    def _go_idle(self) -> None:
        """Wait on the sensor subscriptions (and everything else) again: the next message wakes
        the node (:meth:`_woken`)."""
        self._paced.idle = True
        self._intake_timer.cancel()

    def _taking(self) -> bool:
        """Whether sensor messages are taken (the managed node: only while active)."""
        return True

    def _intake(self, taken: list[tuple[str, str, list[bytes], list[int]]]) -> None:
        """Decode and queue ``taken`` ((topic, type, CDR bytes, system-clock receive ns) of each
        topic with messages) and run the estimation step."""
        now_ns = self.get_clock().now().nanoseconds
        now = time.monotonic()
        for topic, msgtype, raws, received in taken:
            if msgtype == FLOAT64:                  # a Float64's stamp is its receive time
                self._on_messages(topic, msgtype, raws, receive_times(received, now_ns))
                continue
            newest = self._on_messages(topic, msgtype, raws, [now_ns] * len(raws))
            if newest is not None and received[-1]:  # when stamps arrive (the intake's tick)
                self._arrivals.note(topic, newest, received[-1], now)
        self._step()

    def _on_messages(self, topic: str, msgtype: str, raws: list[bytes], receive_ns: list[int]) -> int | None:
        """Decode and queue the messages ``raws`` of ``topic``; the newest header stamp (ns) of
        their readings (None: none)."""
        problems = self.router.problems.get(topic)
        before = sum(problems.values()) if problems else 0
        readings = self.intake.decode(topic, msgtype, raws, receive_ns)
        problems = self.router.problems.get(topic)
        last = receive_ns[-1]
        items = [QueuedReading(topic, sensor, stamp, value, last) for sensor, stamp, value in readings]
        if items:
            self._last_receive_ns = last
        dropped = self.queue.put(topic, items, len(raws))
        if dropped:
            self.get_logger().error(f"input queue full ({self.queue.max_size} readings): dropped "
                                    f"{dropped} reading(s) of {topic}", throttle_duration_sec=5.0)
        for what in self.router.disagreements.get(topic, ()):
            if (topic, what) not in self._problems_logged:
                self._problems_logged.add((topic, what))
                self.get_logger().warning(f"{topic}: {what} (counted on /diagnostics; logged once)")
        if problems and sum(problems.values()) > before:     # an unusable message among them
            for reason in problems:
                if (topic, reason) not in self._problems_logged:
                    self._problems_logged.add((topic, reason))
                    self.get_logger().warning(f"unusable message on {topic}: {reason} (counted on "
                                           "/diagnostics; logged once per reason)")
        return max(r[2] for r in items) if items else None

    def _on_lost(self, topic: str, info) -> None:
        """DDS dropped messages before the node took them (best effort, history full)."""
        change = int(getattr(info, "total_count_change", 0))
        self.lost[topic] = self.lost.get(topic, 0) + change
        self.get_logger().error(f"{change} message(s) of {topic} lost in DDS before the node took "
                                f"them ({self.lost[topic]} in all): raise qos_depth or give the "
                                "node more CPU", throttle_duration_sec=5.0)
