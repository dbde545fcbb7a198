"""A rig played from the test process over real DDS, with faults scripted per message: the live
attacks of the reliability audit (issue 14) on a real estimator process.

The messages are a simulated run's (the simulator is the ground truth, never the estimator):
the four-bar's sensor messages and its ground truth on /truth/*, stamped from the default epoch
and published at their log times relative to the start (wall clock). ``fault(m, t)`` maps each
message (t = its rig time, s) to the messages actually sent: none (lost), itself, a changed
copy (NaN, a wrong stamp), or more (a burst, an unusable extra).
"""
from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Callable

from support.simulations import config_mechanism, simulated
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.simulation_messages import BagMessage, sensor_messages, truth_messages
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.sensors import SensorOptions, synthesize

EPOCH_NS = msgs.seconds_to_ns(msgs.DEFAULT_EPOCH)
ENCODERS, CELL = "/encoders", "/rocker_pin/wrench"


def rig_time(m: BagMessage) -> float:
    return (msgs.time_to_ns(m.msg.header.stamp) - EPOCH_NS) * 1e-9


def with_stamp(m: BagMessage, stamp_ns: int) -> BagMessage:
    """The same reading with another header stamp."""
    msg = m.msg
    if m.msgtype == msgs.JOINT_STATE:
        msg = msgs.joint_state(stamp_ns, msg.name, position=msg.position)
    else:
        f, t = msg.wrench.force, msg.wrench.torque
        msg = msgs.wrench_stamped(stamp_ns, msg.header.frame_id, [f.x, f.y, f.z], [t.x, t.y, t.z])
    return dataclasses.replace(m, msg=msg)


def not_finite(m: BagMessage) -> BagMessage:
    """The reading replaced by NaN (same stamp)."""
    ns = msgs.time_to_ns(m.msg.header.stamp)
    if m.msgtype == msgs.JOINT_STATE:
        msg = msgs.joint_state(ns, m.msg.name, position=[float("nan")] * len(m.msg.name))
    else:
        nan = float("nan")
        msg = msgs.wrench_stamped(ns, m.msg.header.frame_id, [nan, nan, nan], [nan, nan, nan])
    return dataclasses.replace(m, msg=msg)


class ScriptedRig:
    """Publishes the four-bar's simulated run with ``fault`` applied (see the module docstring)."""

    def __init__(self, node, duration: float, initial_error: float = 0.1) -> None:
        self.node = node
        mech = config_mechanism("four_bar")
        tr = simulated("four_bar", duration=duration, initial_dof_offset=initial_error)
        messages = list(sensor_messages(synthesize(tr, SensorOptions()), mech, EPOCH_NS))
        messages += [m for m in truth_messages(ground_truth(tr), mech, EPOCH_NS)
                     if m.topic.endswith("/joint_states") or "/forces/" in m.topic]
        messages.sort(key=lambda m: m.log_time_ns)
        # the example config's topics are relative: published from this node at the root
        messages = [dataclasses.replace(m, topic=resolve_topic(m.topic)) for m in messages]
        self.messages = messages
        self.published: Counter = Counter()       # topic -> messages sent
        self.pubs = {}
        for m in messages:
            if m.topic not in self.pubs:
                self.pubs[m.topic] = node.create_publisher(message_class(m.msgtype), m.topic, 1000)

    def wait_for_subscribers(self, topics=(ENCODERS, CELL), timeout: float = 60.0,
                             alive: Callable[[], bool] = lambda: True) -> None:
        end = time.monotonic() + timeout
        while any(self.pubs[t].get_subscription_count() == 0 for t in topics):
            assert alive(), "the estimator exited"
            assert time.monotonic() < end, "the estimator did not subscribe"
            time.sleep(0.1)

    def play(self, fault: Callable[[BagMessage, float], list[BagMessage]]) -> None:
        """Publish every message at its log time (wall clock from now), after ``fault``."""
        start = time.monotonic()
        first = self.messages[0].log_time_ns
        i, n = 0, len(self.messages)
        while i < n:
            now = time.monotonic() - start
            while i < n and (self.messages[i].log_time_ns - first) * 1e-9 <= now:
                m = self.messages[i]
                sent = fault(m, rig_time(m)) if not m.topic.startswith("/truth") else [m]
                for x in sent:
                    self.pubs[x.topic].publish(bytes(msgs.serialize(x.msg)))
                    self.published[x.topic] += 1
                i += 1
            time.sleep(0.002)
