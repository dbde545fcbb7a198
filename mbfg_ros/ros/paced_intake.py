"""The estimator node's wake-ups, paced: while data flows the sensor subscriptions are taken on
a schedule, not one executor wake-up per message (README "The live node").

rclpy's classic executor rebuilds its wait set from every entity of the node on each wake-up
(in Python: the subscriptions, the timers, the node's services, two event handlers per
publisher and per subscription): at 1-3 kHz of sensor messages that cost more than the
estimator. So the node takes its sensor messages itself: :class:`PacedGroup`, the callback group
of the sensor subscriptions (rclpy's extension point for which entity the executor may wait on),
keeps them out of the executor's wait set while data flows; the node's intake timer then runs a
burst (:class:`IntakeSchedule`) of ticks, each taking every message waiting on each topic
(:func:`~mbfg_ros.ros.rclpy_compat.take_all`) and running the estimation step, sleeping in
between (the GIL released), for :data:`BURST` s. A tick is aimed at the moment the next
estimates can come out: when the readings the estimator waits for (every live sensor due a
reading in the newest keyframe of its next update: :mod:`mbfg_ros.estimation.schedule`) are
due, by each topic's stamps, nominal period and usual delivery delay (:class:`ArrivalClock`); at
most an intake period later (the estimator's update period by default). Ticking at an arbitrary
phase instead left a reading waiting half a period on average, and ticking every keyframe period
woke the node twice per update when the estimator solves two keyframes at a time (the panda).
Then it hands the thread back to the
executor, which answers services, timers and events (a message lost, an incompatible QoS), and
calls it again at once. After :data:`IDLE_AFTER` s without a message the group goes idle: the
executor waits on the subscriptions again and the first message wakes the node, which paces
again.

No message is taken or dropped here.
"""
from __future__ import annotations

import time
from collections import deque

from rclpy.callback_groups import CallbackGroup
from rclpy.subscription import Subscription

from mbfg_ros.estimation.schedule import due_lead
from mbfg_ros.model.channels import command_joint

BURST = 0.05
"""s: longest the intake keeps the executor's thread (services, parameters, the diagnostics
timer and DDS events wait at most this long)."""

IDLE_AFTER = 1.0
"""s: without a sensor message for this long the node waits on its subscriptions again."""


class PacedGroup(CallbackGroup):
    """The callback group of the node's sensor subscriptions (module docstring): the executor
    waits on them only while ``idle``; any other entity (their event handlers) always."""

    def __init__(self) -> None:
        super().__init__()
        self.idle = True

    def can_execute(self, entity) -> bool:
        return self.idle or not isinstance(entity, Subscription)

    def beginning_execution(self, entity) -> bool:
        return True

    def ending_execution(self, entity) -> None:
        pass


class IntakeSchedule:
    """When the intake takes messages: every ``period`` s (monotonic clock), or when the node
    aims the next tick at the arrival of the readings that let the next estimate out
    (:meth:`aim`), in bursts lasting at most :data:`BURST` s."""

    RETRY = 0.25
    """Of a period: the next tick after one aimed at readings that had not come yet."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.next = 0.0

    def aim(self, due: float | None, now: float) -> None:
        """The next tick at ``due`` (monotonic s), at most a period from ``now``; ``due`` passed
        (the readings it waited for are late): :data:`RETRY` of a period from now. None: a
        period after the last tick, as without."""
        if due is None:
            return
        self.next = min(due, now + self.period) if due > now else now + self.RETRY * self.period

    def ticks(self):
        """The ticks of one burst (yields the monotonic time of each, after sleeping until it is
        due); a tick that comes late is taken at once and the schedule starts again from it."""
        end = time.monotonic() + BURST
        while True:
            now = time.monotonic()
            if now < self.next:
                if self.next >= end:
                    return
                time.sleep(self.next - now)
                now = time.monotonic()
            # on time (or late by less than a period): the next one a period after this one's due
            # time; later than that: a period from now (no burst of missed ticks)
            self.next = (self.next if now - self.next < self.period else now) + self.period
            yield now
            if time.monotonic() >= end:
                return


def topic_leads_ns(periods_ns: dict[str, int], topic_channels: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """ns per topic: how close before a keyframe its newest stamp may be for the estimator to wait
    for no more of its messages there (:func:`~mbfg_ros.estimation.schedule.due_lead` of its
    nominal period; 0 for a topic that carries a known-input command, which is waited for until
    it reports past the keyframe)."""
    return {t: 0 if any(command_joint(n) is not None for n in topic_channels.get(t, ()))
            else int(due_lead(period * 1e-9) * 1e9) for t, period in periods_ns.items()}


class ArrivalClock:
    """When the messages that carry a given header stamp arrive, on the monotonic clock: per
    topic, the next message the estimator waits for (the topic's newest stamp plus whole nominal
    periods, the first at or past the stamp less the topic's lead, ``leads_ns``:
    :func:`topic_leads_ns`) plus its usual delay (receive time - header stamp; the rig's clock
    offset included): the :data:`QUANTILE` of the delays of its newest message at the last :data:`DELAYS` ticks that
    took one; the latest of the topics heard within :data:`LIVE`."""

    DELAYS = 64
    """Ticks per topic whose delays are kept."""

    QUANTILE = 0.75
    """Of those delays, the one taken: a tick aimed at the fastest delivery comes too early for
    the next message as often as not (the rig's publisher is late by a varying fraction of a
    millisecond), and one too early costs a second wake-up."""

    LIVE = 0.5
    """s: a topic not heard for this long is not waited for (as the estimator's live streams)."""

    def __init__(self, periods_ns: dict[str, int], leads_ns: dict[str, int] | None = None) -> None:
        self.periods_ns = periods_ns
        self.leads_ns = leads_ns or {}
        self.restart()

    def restart(self) -> None:
        """Forget the topics (a time jump: stamps in a new time base)."""
        self._topics: dict[str, list] = {}      # topic -> [newest stamp, delays, heard (s)]

    def note(self, topic: str, stamp_ns: int, received_ns: int, now: float) -> None:
        """The newest message of ``topic`` a tick took: stamped ``stamp_ns``, received at
        ``received_ns`` (system clock ns), taken at ``now`` (monotonic s)."""
        t = self._topics.get(topic)
        if t is None:
            t = self._topics[topic] = [stamp_ns, deque(maxlen=self.DELAYS), now]
        t[0] = max(t[0], stamp_ns)
        t[1].append(received_ns - stamp_ns)
        t[2] = now

    def arrival(self, stamp_ns: int, now: float) -> float | None:
        """Monotonic s at which every live topic has delivered a message stamped ``stamp_ns`` less
        its lead or later (in the past if they have; None: no topic heard)."""
        due = None
        for topic, (newest, delays, heard) in self._topics.items():
            if now - heard > self.LIVE:
                continue
            period = self.periods_ns.get(topic, 0)
            ahead = stamp_ns - self.leads_ns.get(topic, 0) - newest
            if ahead > 0 and period > 0:
                ahead = -(-ahead // period) * period
            delay = sorted(delays)[int(self.QUANTILE * (len(delays) - 1))]
            sys_ns = newest + max(ahead, 0) + delay
            due = sys_ns if due is None else max(due, sys_ns)
        if due is None:
            return None
        return now + (due - time.time_ns()) * 1e-9


def receive_times(received: list[int], now_ns: int) -> list[int]:
    """Receive times on the node's clock (``now_ns``: its time now) of messages received at
    ``received`` (system clock ns; 0: unknown, taken as now): the node's clock may be a
    simulated one, so each message's age is subtracted from it."""
    sys_ns = time.time_ns()
    return [now_ns - max(0, sys_ns - r) if r else now_ns for r in received]
