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

Messages are read in blocks (:meth:`BagInput.batches`): an MCAP chunk's messages of one topic
that share one fixed layout (:mod:`~mbfg_ros.io.cdr_layout`) are decoded at once as arrays
(:meth:`~mbfg_ros.io.sensor_inputs.InputRouter.decode_rows`); every other message is
deserialized one by one, so that one corrupt message is counted instead of ending the run;
topics with a wrong type are never deserialized. Both paths give the same readings, counts and
problems; :meth:`BagInput.records` gives them message by message, as the node receives them.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from mbfg_ros.errors import ConfigError, MbfgError
from mbfg_ros.io.bag_reader import BagSource
from mbfg_ros.io.cdr_layout import CdrLayout
from mbfg_ros.io.mcap_salvage import McapDamage, MessageBatch
from mbfg_ros.io.sensor_inputs import InputRouter, Reading, ReadingRows, route_sensors
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


@dataclass
class InputBatch:
    """One block of a bag, decoded: ``sensors``: (topic, readings, message order (N,)) per
    sensor and layout; ``messages``: (topic, order (n,), log time ns (n,)) of the sensor
    messages decoded (also those without a reading); ``truth``: (truth topic, log time ns of the
    first message, FixedRows or one deserialized message), in read order per topic."""
    sensors: list[tuple[str, ReadingRows, np.ndarray]] = field(default_factory=list)
    messages: list[tuple[str, np.ndarray, np.ndarray]] = field(default_factory=list)
    truth: list[tuple[str, int, object]] = field(default_factory=list)

    def message_arrays(self) -> tuple[np.ndarray, list[str], list[int]]:
        """Every sensor message decoded, in read order: orders (n,), topics, log times ns."""
        if not self.messages:
            return np.zeros(0, np.int64), [], []
        orders = np.concatenate([o for _, o, _ in self.messages])
        logs = np.concatenate([t for _, _, t in self.messages])
        which = np.concatenate([np.full(len(o), i) for i, (_, o, _) in enumerate(self.messages)])
        perm = np.argsort(orders, kind="stable")
        names = [topic for topic, _, _ in self.messages]
        return orders[perm], [names[i] for i in which[perm].tolist()], logs[perm].tolist()

    def reading_stamps(self, entry: np.ndarray, row: np.ndarray) -> np.ndarray:
        """(M,) int64 ns: the stamp of each reading (``entry``, ``row`` as :meth:`merged` gives)."""
        if not self.sensors:
            return np.zeros(0, np.int64)
        starts = np.cumsum([0] + [len(rr.stamp_ns) for _, rr, _ in self.sensors])[:-1]   # each entry's first
        return np.concatenate([rr.stamp_ns for _, rr, _ in self.sensors])[starts[entry] + row]

    def merged(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The readings in arrival order (message order, then place in the message):
        (entry (M,) index into ``sensors``, row (M,) within it, message order (M,))."""
        if not self.sensors:
            z = np.zeros(0, np.int64)
            return z, z, z
        entry = np.concatenate([np.full(len(o), e, np.int64) for e, (_, _, o) in enumerate(self.sensors)])
        row = np.concatenate([np.arange(len(o), dtype=np.int64) for _, _, o in self.sensors])
        order = np.concatenate([o for _, _, o in self.sensors])
        rank = np.concatenate([np.full(len(o), r.rank, np.int64) for _, r, o in self.sensors])
        perm = np.lexsort((rank, order))
        return entry[perm], row[perm], order[perm]


LEARN_MIN = 8
"""Messages of one length on one topic (not matching a known layout) worth learning a layout from."""

MAX_LAYOUTS = 4
"""Layouts learned (or tried) per topic, type and length; the rest is decoded message by message."""


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
            self.bulk = source.cdr               # whether fixed layouts are decoded at once (MCAP)
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
        self._layouts: dict[tuple[str, str, int], list[CdrLayout | None]] = {}

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
    def records(self, bulk: bool = True) -> Iterator[tuple[str, str, int, object]]:
        """(kind, topic, log time ns, payload) in the bag's order: kind ``sensor`` with a list of
        :class:`~mbfg_ros.io.sensor_inputs.Reading` (possibly empty: the problem is counted) per
        message, kind ``truth`` with a deserialized message or a
        :class:`~mbfg_ros.io.cdr_layout.FixedRows` of several (what
        :meth:`~mbfg_ros.replay.truth.TruthCollector.add` takes). ``bulk``: decoded from
        :meth:`batches` (the truth of a block after its sensor messages); False: message by
        message (the reference the bulk path is tested against)."""
        if bulk:
            yield from self._records_from_batches()
            return
        with BagSource(self.path) as source:
            wanted = set(self.stats)
            decode = self.router.decode
            t = time.perf_counter()
            for topic, msgtype, log_ns, raw in source.messages(wanted):
                st = self.stats[topic]
                st.messages += 1
                if st.role == SENSOR:
                    if msgtype not in st.expected:
                        payload = decode(topic, msgtype, None, log_ns)   # counted by type
                    else:
                        msg = _deserialize(source, st, raw, msgtype)
                        if msg is None:
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
                    msg = _deserialize(source, st, raw, msgtype)
                    if msg is None:
                        continue
                    now = time.perf_counter()
                    self.time_truth += now - t
                    yield TRUTH, st.config_topic or topic, log_ns, msg
                t = time.perf_counter()
            self.damage = source.damage
        self._count_unread()

    def _count_unread(self) -> None:
        """Messages the bag holds on a read topic but that were never read: counted per topic."""
        for st in self.stats.values():
            unread = st.in_bag - st.messages
            if unread > 0:
                st.problems[UNREADABLE] += unread

    def _records_from_batches(self) -> Iterator[tuple[str, str, int, object]]:
        for block in self.batches():
            t = time.perf_counter()
            entry, row, order = block.merged()
            sensors = block.sensors
            msg_orders, msg_topics, msg_logs = block.message_arrays()
            starts = np.searchsorted(order, msg_orders, "left").tolist()
            ends = np.searchsorted(order, msg_orders, "right").tolist()
            # the Reading objects in arrival order (built with C loops: map, list of row views)
            stamps = block.reading_stamps(entry, row).tolist()
            rows = [list(rr.value) for _, rr, _ in sensors]
            names = [rr.sensor for _, rr, _ in sensors]
            readings = list(map(Reading, [names[e] for e in entry.tolist()], stamps,
                                [rows[e][r] for e, r in zip(entry.tolist(), row.tolist())]))
            records = [(SENSOR, topic, log_ns, readings[a:b])
                       for topic, log_ns, a, b in zip(msg_topics, msg_logs, starts, ends)]
            records += [(TRUTH, topic, log_ns, payload) for topic, log_ns, payload in block.truth]
            self.time_sensors += time.perf_counter() - t
            yield from records

    def batches(self) -> Iterator[InputBatch]:
        """The bag in decoded blocks (see :class:`InputBatch`), with the counts and problems
        :meth:`records` gives (complete when exhausted)."""
        perf = time.perf_counter
        with BagSource(self.path) as source:
            blocks = source.batches(set(self.stats))
            while True:
                t0 = perf()
                block = next(blocks, None)
                read = perf() - t0
                if block is None:
                    break
                out = InputBatch()
                n_sensor = n_truth = 0
                for b in block:
                    st = self.stats[b.topic]
                    st.messages += len(b)
                    t1 = perf()
                    if st.role == SENSOR:
                        self._sensor_batch(source, st, b, out)
                        self.time_sensors += perf() - t1
                        n_sensor += len(b)
                    else:
                        self._truth_batch(source, st, b, out)
                        self.time_truth += perf() - t1
                        n_truth += len(b)
                share = n_sensor / max(n_sensor + n_truth, 1)
                self.time_sensors += read * share
                self.time_truth += read * (1.0 - share)
                yield out
            self.damage = source.damage
        self._count_unread()

    def _fixed(self, source: BagSource, b: MessageBatch) -> tuple[list[tuple[np.ndarray, CdrLayout]], np.ndarray]:
        """([(message indexes, layout)], the other indexes) of a batch: which messages are
        decoded at once with which layout (learned from the first message of each kind)."""
        N = len(b)
        rest = np.arange(N)
        if not source.cdr or not isinstance(b.data, np.ndarray) or N == 0:
            return [], rest
        layouts = self._layouts.setdefault((b.topic, b.msgtype, b.data.shape[1]), [])
        out = []
        for layout in layouts:
            if layout is None or not rest.size:
                continue
            ok = layout.matches(b.data[rest])
            if ok.any():
                out.append((rest[ok], layout))
                rest = rest[~ok]
        while rest.size >= LEARN_MIN and len(layouts) < MAX_LAYOUTS:
            layout = CdrLayout.learn(b.raw(int(rest[0])), b.msgtype, source.deserialize, source.serialize)
            layouts.append(layout)
            if layout is None:
                break
            ok = layout.matches(b.data[rest])
            out.append((rest[ok], layout))
            rest = rest[~ok]
        return out, rest

    def _sensor_batch(self, source: BagSource, st: TopicStats, b: MessageBatch, out: InputBatch) -> None:
        topic, msgtype = b.topic, b.msgtype
        decode = self.router.decode
        if msgtype not in st.expected:
            for log_ns in b.log_ns.tolist():
                decode(topic, msgtype, None, log_ns)            # counted by type
            out.messages.append((topic, b.order, b.log_ns))
            return
        fixed, rest = self._fixed(source, b)
        for idx, layout in fixed:
            rows = layout.decode(b.data[idx])
            orders = b.order[idx]
            for rr in self.router.decode_rows(topic, msgtype, rows, b.log_ns[idx]):
                out.sensors.append((topic, rr, orders))
                st.readings += len(orders)
            out.messages.append((topic, orders, b.log_ns[idx]))
        for i in rest.tolist():
            o, log_ns = int(b.order[i]), int(b.log_ns[i])
            msg = _deserialize(source, st, b.raw(i), msgtype)
            if msg is None:
                continue
            payload = decode(topic, msgtype, msg, log_ns)
            st.readings += len(payload)
            for rank, r in enumerate(payload):
                value = np.asarray(r.value, float).reshape(1, -1)
                out.sensors.append((topic, ReadingRows(r.sensor, np.array([r.stamp_ns], np.int64), value, rank),
                                    np.array([o], np.int64)))
            out.messages.append((topic, np.array([o], np.int64), np.array([log_ns], np.int64)))

    def _truth_batch(self, source: BagSource, st: TopicStats, b: MessageBatch, out: InputBatch) -> None:
        msgtype = b.msgtype
        if msgtype not in st.expected:
            st.problems[f"message type {msgtype}, expected {st.expected[0]}"] += len(b)
            return
        topic = st.config_topic or b.topic
        fixed, _ = self._fixed(source, b)
        layout_of = np.full(len(b), -1)
        for k, (idx, _) in enumerate(fixed):
            layout_of[idx] = k
        # runs of one layout (or of single messages) in read order, so the truth keeps its order
        cuts = np.flatnonzero((np.diff(layout_of) != 0) | (layout_of[1:] < 0)) + 1
        for a, e in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(b)].tolist()):
            k = int(layout_of[a])
            if k >= 0:
                out.truth.append((topic, int(b.log_ns[a]), fixed[k][1].decode(b.data[a:e])))
                continue
            msg = _deserialize(source, st, b.raw(a), msgtype)
            if msg is None:
                continue
            out.truth.append((topic, int(b.log_ns[a]), msg))

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


def _deserialize(source: BagSource, st: TopicStats, raw: bytes, msgtype: str):
    """The message, or None with the problem counted on its topic (any corrupt message)."""
    try:
        return source.deserialize(raw, msgtype)
    except Exception as exc:            # noqa: BLE001 - any corrupt message
        st.problems[f"cannot deserialize {msgtype}: {type(exc).__name__}"] += 1
        return None
