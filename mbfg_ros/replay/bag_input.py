"""A bag as estimator input: its sensor readings and ground-truth messages, checked and counted.

Reads rosbag2 (mcap or sqlite3) and rosbag1 through :class:`~mbfg_ros.io.bag_reader.BagSource`
(MCAP record by record, so a damaged or truncated recording is read as far as it can be; the
others with rosbags' AnyReader), deserializing with the typestore of :mod:`mbfg_ros.io.messages`
plus the types the bag defines. Sensor topics are the mechanism config's (after ``remap``: config
topic -> bag topic) and are decoded by the shared :class:`~mbfg_ros.io.sensor_inputs.InputRouter`,
exactly as the ROS node decodes them. Ground truth is the simulator's topics under the config's
``truth_namespace``. Other topics are not read.

Nothing fails silently and nothing raises past this module for a bad message: a message that
cannot be deserialized, has the wrong type or holds no usable reading is counted per topic
with the reason (``TopicStats.problems``), and so is every message the bag holds but that could
not be read (damage; the places are in ``BagInput.damage``). Only a bag that cannot be opened,
or that has none of the config's sensor topics, is an error (:class:`~mbfg_ros.errors.MbfgError`,
one line that lists what the bag holds and what the config expects).

Messages are deserialized one by one here so that one corrupt message is counted instead of
ending the run, and topics with a wrong type are never deserialized.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from mbfg_ros.errors import ConfigError, MbfgError
from mbfg_ros.io.bag_reader import BagSource
from mbfg_ros.io.mcap_salvage import McapDamage
from mbfg_ros.io.sensor_inputs import InputRouter, TopicRoute
from mbfg_ros.io.simulation_messages import truth_topics
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.model.mechanism import Mechanism

SENSOR, TRUTH = "sensor", "truth"

UNREADABLE = "could not be read: the bag is damaged or truncated"
"""The problem reason of messages a bag holds (by its own count) that could not be read."""


@dataclass
class TopicStats:
    """What happened to one topic of the bag (or one the config expects)."""
    topic: str
    role: str                       # sensor | truth
    msgtype: str | None             # the bag's type (None: missing from the bag)
    expected: tuple[str, ...]       # accepted types
    sensors: tuple[str, ...] = ()   # the sensors (and command:<joint> inputs) the topic feeds
    config_topic: str = ""          # the config's name for it (differs with --remap)
    in_bag: int = 0                 # messages the bag holds
    messages: int = 0               # messages read
    readings: int = 0               # readings decoded (one message may hold several)
    problems: Counter = field(default_factory=Counter)   # reason -> messages


def route_sensors(route: TopicRoute) -> tuple[str, ...]:
    """The sensor names (and ``command:<joint>``) a topic feeds."""
    out = list(route.encoders.values()) + list(route.commands.values())
    if route.gyro:
        out.append(route.gyro)
    if route.load_cell:
        out.append(route.load_cell)
    return tuple(out)


def parse_remap(items: list[str] | None, mech: Mechanism) -> dict[str, str]:
    """``from:=to`` items -> {config topic: bag topic}; the config topic must be a sensor topic
    of the config or one of its ground-truth topics (a recording from another simulator or an
    instrument scored against the estimate). Both are resolved at the bag's root (``encoders``
    is ``/encoders``)."""
    known = sorted(set(InputRouter(mech, namespace="/").topics) | set(truth_topics(mech)))
    out: dict[str, str] = {}
    for item in items or []:
        src, sep, dst = item.partition(":=")
        src, dst = src.strip(), dst.strip()
        if not sep or not src or not dst:
            raise MbfgError(f"--remap: expected FROM:=TO, e.g. /encoders:=/rig/encoders (value: {item!r})")
        src, dst = resolve_topic(src), resolve_topic(dst)
        if src not in known:
            raise MbfgError(f"--remap: {src} is not a sensor or truth topic of the config (its topics: "
                            f"{', '.join(known)}) (value: {item!r})")
        out[src] = dst
    return out


class BagInput:
    """The sensor and truth messages of one bag for one mechanism config."""

    def __init__(self, path: str | Path, mech: Mechanism, remap: dict[str, str] | None = None,
                 truth: bool = True) -> None:
        self.path = Path(path)
        self.mech = mech
        self.remap = dict(remap or {})
        with BagSource(self.path) as source:     # raises a clear MbfgError for a bad path
            self.bag = {t: dict(v) for t, v in source.topics.items()}
            self.start_ns, self.end_ns = source.start_ns, source.end_ns   # ns, first and last log time
        self.damage = McapDamage()               # what could not be read (after records())
        try:
            self.router = InputRouter(mech, self.remap, namespace="/")
        except ValueError as exc:
            raise ConfigError(str(exc), file=str(mech.config.source or "")) from None
        back = {v: k for k, v in self.remap.items()}
        self.stats: dict[str, TopicStats] = {}
        for topic, types in self.router.topics.items():
            info = self.bag.get(topic)
            self.stats[topic] = TopicStats(
                topic, SENSOR, info["type"] if info else None, types,
                route_sensors(self.router.routes[topic]), back.get(topic, topic),
                info["count"] if info else 0)
        self.truth_missing: list[tuple[str, str]] = []   # (config's truth topic, bag topic) remapped but absent
        if truth:
            for topic, msgtype in truth_topics(mech).items():
                source = self.remap.get(topic, topic)
                info = self.bag.get(source)
                if info is None:
                    if topic in self.remap:
                        self.truth_missing.append((topic, source))
                    continue
                if source not in self.stats:
                    self.stats[source] = TopicStats(source, TRUTH, info["type"], (msgtype,),
                                                    config_topic=topic, in_bag=info["count"])
        present = [s for s in self.stats.values() if s.role == SENSOR and s.msgtype is not None]
        if not present:
            raise MbfgError(self._nothing_to_read())
        self.time_sensors = 0.0         # s spent reading + deserializing + decoding sensor messages
        self.time_truth = 0.0           # s spent reading + deserializing ground truth

    def span_seconds(self) -> float:
        """Log-time span of the bag, s."""
        if self.start_ns is None or self.end_ns is None:
            return 0.0
        return max(0, self.end_ns - self.start_ns) / 1e9

    # ----------------------------------------------------------------------------------------
    @property
    def missing(self) -> list[TopicStats]:
        """Sensor topics of the config the bag does not have."""
        return [s for s in self.stats.values() if s.role == SENSOR and s.msgtype is None]

    @property
    def wrong_type(self) -> list[TopicStats]:
        """Sensor topics whose type the config's sensors cannot read."""
        return [s for s in self.stats.values()
                if s.role == SENSOR and s.msgtype is not None and s.msgtype not in s.expected]

    @property
    def has_truth(self) -> bool:
        ns = self.mech.config.truth_namespace or "/truth"
        return any(s.role == TRUTH and (s.config_topic or s.topic) == ns.rstrip("/") + "/joint_states"
                   for s in self.stats.values())

    def _nothing_to_read(self) -> str:
        want = "; ".join(f"{s.topic} ({' or '.join(s.expected)}: {', '.join(s.sensors)})"
                         for s in self.stats.values() if s.role == SENSOR)
        held = ", ".join(f"{t} ({v['type']}, {v['count']})" for t, v in sorted(self.bag.items())) or "no topics"
        remap = f" (after --remap {', '.join(f'{k}:={v}' for k, v in self.remap.items())})" if self.remap else ""
        return (f"the bag {str(self.path)!r} has none of the sensor topics of the config "
                f"{self.mech.config.name!r}{remap}: it expects {want}; the bag holds {held}. "
                "Map a config topic to a bag topic with --remap CONFIG_TOPIC:=BAG_TOPIC")

    # ----------------------------------------------------------------------------------------
    def records(self) -> Iterator[tuple[str, str, int, object]]:
        """(kind, topic, log time ns, payload) in the bag's log-time order: kind ``sensor`` with
        a list of :class:`~mbfg_ros.io.sensor_inputs.Reading` (possibly empty: the problem is counted), kind ``truth`` with
        the deserialized message."""
        with BagSource(self.path) as source:
            wanted = set(self.stats)
            decode = self.router.decode
            deserialize = source.deserialize
            t = time.perf_counter()
            for topic, msgtype, log_ns, raw in source.messages(wanted):
                st = self.stats[topic]
                st.messages += 1
                if st.role == SENSOR:
                    if msgtype not in st.expected:
                        payload = decode(topic, msgtype, None, log_ns)   # counted by type
                    else:
                        try:
                            msg = deserialize(raw, msgtype)
                        except Exception as exc:            # noqa: BLE001 - any corrupt message
                            st.problems[f"cannot deserialize {msgtype}: {type(exc).__name__}"] += 1
                            continue
                        payload = decode(topic, msgtype, msg, log_ns)
                    st.readings += len(payload)
                    now = time.perf_counter()
                    self.time_sensors += now - t
                    yield SENSOR, topic, log_ns, payload
                else:
                    if msgtype not in st.expected:
                        st.problems[f"message type {msgtype}, expected {st.expected[0]}"] += 1
                        continue
                    try:
                        msg = deserialize(raw, msgtype)
                    except Exception as exc:                # noqa: BLE001
                        st.problems[f"cannot deserialize {msgtype}: {type(exc).__name__}"] += 1
                        continue
                    now = time.perf_counter()
                    self.time_truth += now - t
                    yield TRUTH, st.config_topic or topic, log_ns, msg
                t = time.perf_counter()
            self.damage = source.damage
        for st in self.stats.values():              # held by the bag, never read: counted
            unread = st.in_bag - st.messages
            if unread > 0:
                st.problems[UNREADABLE] += unread

    def state(self) -> dict:
        """What reading changed (counts, problems, times): to hand over from another process."""
        return {"stats": self.stats, "router_problems": self.router.problems, "start_ns": self.start_ns,
                "end_ns": self.end_ns, "time_sensors": self.time_sensors, "time_truth": self.time_truth,
                "damage": self.damage}

    def restore(self, state: dict) -> None:
        """Take over :meth:`state` of the same bag read by another BagInput."""
        self.stats = state["stats"]
        self.router.problems = state["router_problems"]
        self.start_ns, self.end_ns = state["start_ns"], state["end_ns"]
        self.time_sensors, self.time_truth = state["time_sensors"], state["time_truth"]
        self.damage = state["damage"]

    def problems(self) -> dict[str, dict[str, int]]:
        """{topic: {reason: messages}} of every topic with problems (decoding included)."""
        out: dict[str, Counter] = {}
        for topic, st in self.stats.items():
            c = Counter(st.problems)
            c.update(self.router.problems.get(topic, Counter()))
            if c:
                out[topic] = c
        for topic, c in self.router.problems.items():
            if topic not in self.stats:
                out[topic] = Counter(c)
        return {t: dict(c) for t, c in out.items()}
