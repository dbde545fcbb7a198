"""Writing rosbag2 bags with rosbags (mcap by default, sqlite3 on request).

:class:`BagWriter` writes :class:`~mbfg_ros.io.simulation_messages.BagMessage` objects (a
connection per topic, CDR through the ROS2_KILTED typestore) and counts them;
:func:`write_simulation_bag` writes a simulated run's sensor samples and ground truth.
"""
from __future__ import annotations

import heapq
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.errors import WriterError

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.mcap_bulk import McapBulk, bulk_possible
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.io.simulation_messages import BagMessage, sensor_messages, sensor_topics, truth_messages, truth_topics
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.sim.ground_truth import GroundTruth
from mbfg_ros.sim.sensors import Sample, SensorChannel

STORAGE_PLUGINS = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
"""Storage formats by name (the ``--storage`` choices)."""

BAG_FILE_SUFFIXES = (".mcap", ".db3", ".yaml", ".db3-shm", ".db3-wal", ".zstd")


def looks_like_bag(path: Path) -> bool:
    """True for a directory that holds only rosbag2 files (or nothing)."""
    if not path.is_dir():
        return False
    return all(p.is_file() and p.name.endswith(BAG_FILE_SUFFIXES) for p in path.iterdir())


def check_output_path(path: str | Path, overwrite: bool, option: str = "output") -> Path:
    """Raise MbfgError unless a bag can be written at ``path``: it must not exist (or, with
    ``overwrite``, be a rosbag2 directory, which is then removed by the writer) and its nearest
    existing parent must be a writable directory. Returns the path."""
    path = Path(path)
    if path.exists() or path.is_symlink():
        if not overwrite:
            raise MbfgError(f"{option} {str(path)!r} exists already (pass --overwrite to replace it)")
        if not looks_like_bag(path):
            raise MbfgError(f"{option} {str(path)!r} exists and is not a rosbag2 directory; "
                            "refusing to replace it")
    parent = path.resolve().parent
    while not parent.exists():
        parent = parent.parent
    try:
        if not parent.is_dir():
            raise OSError(f"{parent} is not a directory")
        os.rmdir(tempfile.mkdtemp(prefix=".mbfg-probe-", dir=parent))
    except OSError as exc:
        raise MbfgError(f"{option} {str(path)!r} is not writable ({exc})") from None
    return path


class BagWriter:
    """A rosbag2 being written; use as a context manager. Connections are added per topic on
    first use. On an exception (Ctrl-C and SIGTERM included, also while closing) the partial
    bag is removed: a bag is either complete with its metadata or not there."""

    def __init__(self, path: str | Path, storage: str = "mcap", overwrite: bool = False,
                 custom_data: dict[str, str] | None = None) -> None:
        if storage not in STORAGE_PLUGINS:
            raise MbfgError(f"unknown storage {storage!r} (known: {', '.join(STORAGE_PLUGINS)})")
        self.path = check_output_path(path, overwrite)
        self.storage = storage
        self.overwrite = overwrite
        self.custom_data = dict(custom_data or {})
        self._writer: Writer | None = None
        self._connections: dict[str, object] = {}
        self._bulk: McapBulk | None = None          # attached by the first write_rows (MCAP)
        self.types: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.first_ns: int | None = None
        self.last_ns: int | None = None

    def __enter__(self) -> "BagWriter":
        if self.path.exists() and self.overwrite:
            shutil.rmtree(self.path)
        self._writer = Writer(self.path, version=9, storage_plugin=STORAGE_PLUGINS[self.storage])
        for key, value in self.custom_data.items():
            self._writer.set_custom_data(key, value)
        try:
            self._writer.open()
        except (WriterError, OSError) as exc:
            raise MbfgError(f"cannot write the bag {str(self.path)!r}: {exc}") from None
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        writer, self._writer = self._writer, None
        self._bulk = None
        if writer is None:
            return False
        if exc_type is None:
            try:
                writer.close()              # writes the summary and metadata.yaml
            except BaseException:           # interrupted while closing: no half-closed bag
                shutil.rmtree(self.path, ignore_errors=True)
                raise
            return False
        try:
            writer.abort()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)
        return False

    def add_topic(self, topic: str, msgtype: str) -> None:
        """Declare a topic (so it exists in the bag even with no messages). Relative names are
        stored resolved at the root (``encoders`` as ``/encoders``), as a root-namespace node
        publishes them."""
        topic = resolve_topic(topic)
        if topic in self._connections:
            if self.types[topic] != msgtype:
                raise MbfgError(f"topic {topic} written with two types: {self.types[topic]} and {msgtype}")
            return
        assert self._writer is not None, "BagWriter used outside its with-block"
        self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=msgs.typestore())
        self.types[topic] = msgtype
        self.counts[topic] = 0

    def write(self, message: BagMessage) -> None:
        self.add_topic(message.topic, message.msgtype)
        topic = resolve_topic(message.topic)
        self._writer.write(self._connections[topic], message.log_time_ns, msgs.serialize(message.msg))
        self.counts[topic] += 1
        ns = message.log_time_ns
        self.first_ns = ns if self.first_ns is None else min(self.first_ns, ns)
        self.last_ns = ns if self.last_ns is None else max(self.last_ns, ns)

    def write_raw(self, topic: str, msgtype: str, log_time_ns: int, data: bytes) -> None:
        """Write an already serialised (CDR) message."""
        self.add_topic(topic, msgtype)
        topic = resolve_topic(topic)
        self._writer.write(self._connections[topic], log_time_ns, data)
        self.counts[topic] += 1
        self.first_ns = log_time_ns if self.first_ns is None else min(self.first_ns, log_time_ns)
        self.last_ns = log_time_ns if self.last_ns is None else max(self.last_ns, log_time_ns)

    def write_rows(self, topics: Sequence[tuple[str, str]], stamps_ns: np.ndarray,
                   rows: Sequence[np.ndarray]) -> None:
        """Write N keyframes' serialised messages at once: for each keyframe i (log time
        ``stamps_ns[i]``), row i of ``rows[k]`` ((N, L_k) uint8) on ``topics[k]`` (topic, type),
        keyframe by keyframe. MCAP in bulk (:mod:`mbfg_ros.io.mcap_bulk`), sqlite3 per message."""
        stamps = np.asarray(stamps_ns, np.int64).reshape(-1)
        if not stamps.size or not topics:
            return
        for topic, msgtype in topics:
            self.add_topic(topic, msgtype)
        names = [resolve_topic(topic) for topic, _ in topics]
        if self._bulk is None and bulk_possible(self._writer):
            self._bulk = McapBulk(self._writer)          # from here on; checks rosbags' internals
        if self._bulk is not None:
            self._bulk.write_rows([self._connections[t] for t in names], stamps, rows)
        else:
            conns = [self._connections[t] for t in names]
            for i, ns in enumerate(stamps.tolist()):
                for c, r in zip(conns, rows):
                    self._writer.write(c, ns, r[i].tobytes())
        for t in names:
            self.counts[t] += stamps.size
        lo, hi = int(stamps.min()), int(stamps.max())
        self.first_ns = lo if self.first_ns is None else min(self.first_ns, lo)
        self.last_ns = hi if self.last_ns is None else max(self.last_ns, hi)

    def summary(self) -> dict:
        """{"topics": {topic: {"type", "count"}}, "messages": total, "duration": s (log times)}."""
        total = sum(self.counts.values())
        span = 0.0 if self.first_ns is None else (self.last_ns - self.first_ns) / 1e9
        return {"topics": {t: {"type": self.types[t], "count": self.counts[t]} for t in sorted(self.types)},
                "messages": total, "duration": span}


def write_simulation_bag(path: str | Path, mech: Mechanism, samples: Iterable[Sample],
                         truth: GroundTruth | None, *, storage: str = "mcap",
                         epoch: float = msgs.DEFAULT_EPOCH, overwrite: bool = False,
                         channels: list[SensorChannel] | None = None,
                         custom_data: dict[str, str] | None = None,
                         progress: bool = False, duration: float | None = None) -> dict:
    """Write a simulated run: the sensor messages of ``samples`` (for ``mech``'s sensors) and,
    with ``truth``, the ground-truth messages, in log-time order. Header stamps are
    epoch + Sample.stamp, log times epoch + Sample.receive (s -> ns). The epoch is stored in the
    bag's metadata custom_data as ``mbfg.epoch_ns``. ``progress`` shows a tqdm bar on stderr
(over ``duration`` s of log time). Returns :meth:`BagWriter.summary`."""
    epoch_ns = msgs.seconds_to_ns(epoch)
    data = {"mbfg.epoch_ns": str(epoch_ns), "mbfg.rig": mech.config.name}
    data.update(custom_data or {})
    streams = [sensor_messages(samples, mech, epoch_ns, channels)]
    if truth is not None:
        streams.append(truth_messages(truth, mech, epoch_ns))
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=round(duration, 6) if duration else None, unit="s", desc="writing",
                   leave=False, mininterval=0.2,
                   bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.2f}/{total:.2f} s [{elapsed}<{remaining}]")
    done = 0.0
    try:
        with BagWriter(path, storage=storage, overwrite=overwrite, custom_data=data) as bag:
            for topic, msgtype in {**sensor_topics(mech), **(truth_topics(mech) if truth is not None else {})}.items():
                bag.add_topic(topic, msgtype)
            for message in heapq.merge(*streams, key=lambda m: m.log_time_ns):
                bag.write(message)
                if bar is not None:
                    now = (message.log_time_ns - epoch_ns) / 1e9
                    if now - done >= 0.05:
                        bar.update(min(now, bar.total or now) - done)
                        done = min(now, bar.total or now)
    finally:
        if bar is not None:
            bar.close()
    return bag.summary()


def scenario_custom_data(scenario_facts: dict, options_facts: dict) -> dict[str, str]:
    """custom_data entries describing a run (JSON strings)."""
    return {"mbfg.scenario": json.dumps(scenario_facts, sort_keys=True),
            "mbfg.sensor_options": json.dumps(options_facts, sort_keys=True)}
