"""Reading bags: rosbag2 (mcap or sqlite3) and rosbag1, as far as they can be read.

:class:`BagSource` gives a bag's topics and its messages as stored (topic, type, log time, CDR
bytes) whatever the storage. MCAP files (a rosbag2's, or an .mcap file alone) are read with
:class:`~mbfg_ros.io.mcap_salvage.McapSalvage`, so a truncated recording (a killed recorder)
or a damaged one gives every message that can be read and counts the rest per topic
(``BagSource.damage``); sqlite3 rosbag2 and rosbag1 are read with rosbags' AnyReader, and a
reader that stops on damage is reported the same way. Nothing raises past this module for a
damaged bag once it is open; a path that is not a bag is one :class:`~mbfg_ros.errors.MbfgError`.

:func:`read_bag` yields deserialized :class:`BagRecord` (topic, msgtype, log_time_ns, msg) in
log-time order; types the bag defines but the ROS2_KILTED typestore lacks are registered from
the bag itself.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import yaml
from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.mcap_salvage import McapDamage, McapSalvage, MessageBatch, group_messages, mcap_files


@dataclass(frozen=True)
class BagRecord:
    """One message of a bag: topic, ROS type name, log (receive) time in ns, deserialized message."""
    topic: str
    msgtype: str
    log_time_ns: int
    msg: object


def _metadata(path: Path) -> dict | None:
    """The rosbag2_bagfile_information of a bag directory's metadata.yaml (None without one)."""
    meta = path / "metadata.yaml"
    if not meta.is_file():
        return None
    try:
        doc = yaml.load(meta.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        info = doc["rosbag2_bagfile_information"]
        if not isinstance(info, dict):
            raise TypeError("not a mapping")
        return info
    except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise MbfgError(f"cannot read the bag metadata of {str(path)!r}: {exc}") from None


class BagSource:
    """One bag, open for reading (see the module docstring). ``topics``: {topic: {"type",
    "count"}} (counts as the bag states them); ``start_ns``/``end_ns``: first and last log
    time; ``damage`` (complete once :meth:`messages` is exhausted): what could not be read."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        p = self.path
        if not p.exists():
            raise MbfgError(f"no such bag: {str(p)!r}")
        self._reader: AnyReader | None = None
        self._mcap: McapSalvage | None = None
        self.damage = McapDamage()
        self._typestore = None
        meta = _metadata(p) if p.is_dir() else None
        storage = (meta or {}).get("storage_identifier", "")
        if (meta is not None and storage == "mcap") or (meta is None and mcap_files(p)):
            files = ([p / f for f in meta.get("relative_file_paths") or []] if meta is not None
                     else mcap_files(p))
            files = [f for f in files if f.is_file()] or mcap_files(p)
            if not files:
                raise MbfgError(f"cannot read the bag {str(p)!r}: its metadata lists no MCAP file "
                                "that exists")
            expected, types = {}, {}
            for t in (meta or {}).get("topics_with_message_count") or []:
                try:
                    name, msgtype = t["topic_metadata"]["name"], t["topic_metadata"]["type"]
                    expected[name] = int(t["message_count"])
                    types[name] = msgtype
                except (KeyError, TypeError, ValueError):
                    continue
            self._mcap = McapSalvage(files, expected)
            if not self._mcap.intact and not expected:
                self._mcap.scan()               # no summary, no metadata: learn the topics
            self.topics = {t: dict(v) for t, v in self._mcap.topics.items()}
            for name, msgtype in types.items():
                entry = self.topics.setdefault(name, {"type": msgtype, "count": 0})
                entry["type"] = entry["type"] or msgtype
                entry["count"] = max(entry["count"], expected[name])
            self.start_ns, self.end_ns = self._mcap.start_ns, self._mcap.end_ns
            if (self.start_ns is None) and meta is not None:
                try:
                    self.start_ns = int(meta["starting_time"]["nanoseconds_since_epoch"])
                    self.end_ns = self.start_ns + int(meta["duration"]["nanoseconds"])
                except (KeyError, TypeError, ValueError):
                    pass
            return
        try:
            reader = AnyReader([p], default_typestore=msgs.typestore())
            reader.open()
        except (AnyReaderError, OSError, ValueError) as exc:
            raise MbfgError(f"cannot read the bag {str(p)!r}: {exc}") from None
        except Exception as exc:                 # noqa: BLE001 - a damaged file the reader trips on
            raise MbfgError(f"cannot read the bag {str(p)!r}: {type(exc).__name__}: {exc}") from None
        self._reader = reader
        self.topics = {}
        for conn in reader.connections:
            entry = self.topics.setdefault(conn.topic, {"type": conn.msgtype, "count": 0})
            entry["count"] += conn.msgcount
        self.start_ns, self.end_ns = reader.start_time, reader.end_time

    # ------------------------------------------------------------------------------------------
    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> "BagSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def messages(self, topics: Iterable[str] | None = None) -> Iterator[tuple[str, str, int, bytes]]:
        """(topic, type, log time ns, CDR bytes) of every readable message of ``topics`` (all
        if None), in the order stored (log-time order for rosbags' readers)."""
        wanted = set(topics) if topics is not None else None
        if self._mcap is not None:
            yield from self._mcap.messages(wanted)
            self.damage = self._mcap.damage
            return
        reader = self._reader
        if reader is None:
            raise MbfgError(f"the bag {str(self.path)!r} is closed")
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        read: Counter = Counter()
        self.damage = McapDamage()
        try:
            for conn, log_ns, raw in reader.messages(connections=conns):
                read[conn.topic] += 1
                yield conn.topic, conn.msgtype, int(log_ns), raw
        except Exception as exc:                 # noqa: BLE001 - damage: keep what was read
            self.damage.regions.append(f"the reader stopped after {sum(read.values())} messages: "
                                       f"{type(exc).__name__}: {exc}")
        for topic in {c.topic for c in conns}:
            missing = self.topics.get(topic, {}).get("count", 0) - read[topic]
            if missing > 0:
                self.damage.lost[topic] = missing

    def batches(self, topics: Iterable[str] | None = None, group: int = 4096) -> Iterator[list[MessageBatch]]:
        """The messages of :meth:`messages` in blocks of :class:`~mbfg_ros.io.mcap_salvage.MessageBatch`
        (one per topic and block, in read order): an MCAP's intact chunks are read at once
        (:meth:`McapSalvage.batches`); other storages ``group`` messages at a time, as bytes.
        ``damage`` is the same as after :meth:`messages`."""
        if self._mcap is not None:
            wanted = set(topics) if topics is not None else None
            yield from self._mcap.batches(wanted, group)
            self.damage = self._mcap.damage
            return
        loose: list[tuple[str, str, int, bytes]] = []
        n = 0
        for topic, msgtype, log_ns, raw in self.messages(topics):
            loose.append((topic, msgtype, log_ns, bytes(raw)))
            if len(loose) >= group:
                yield [_as_list(b) for b in group_messages(loose, n)]
                n += len(loose)
                loose = []
        if loose:
            yield [_as_list(b) for b in group_messages(loose, n)]

    @property
    def cdr(self) -> bool:
        """Whether the messages' bytes are CDR and :meth:`serialize` writes them (rosbag2
        MCAP; the other storages are decoded message by message)."""
        return self._mcap is not None

    def serialize(self, msg, msgtype: str) -> bytes:
        """CDR bytes of ``msg`` with the typestore :meth:`deserialize` uses (MCAP bags)."""
        store = self._typestore or msgs.typestore()
        return store.serialize_cdr(msg, msgtype)

    def deserialize(self, raw: bytes, msgtype: str) -> object:
        """A message from its CDR bytes (types the typestore lacks come from the bag)."""
        if self._reader is not None:
            return self._reader.deserialize(raw, msgtype)
        store = self._typestore or msgs.typestore()
        if msgtype not in store.types and self._mcap is not None and msgtype in self._mcap.definitions:
            store = self._typestore = get_typestore(Stores.EMPTY)
            store.register(msgs.typestore().fielddefs)
            for name, (encoding, text) in self._mcap.definitions.items():
                if encoding == "ros2msg" and name not in store.types:
                    try:
                        store.register(get_types_from_msg(text.decode("utf-8"), name))
                    except Exception:            # noqa: BLE001 - a broken definition: that type stays unknown
                        continue
        return store.deserialize_cdr(raw, msgtype)


def _as_list(batch: MessageBatch) -> MessageBatch:
    """The batch with its messages as a list of bytes (decoded one by one)."""
    if isinstance(batch.data, list):
        return batch
    return MessageBatch(batch.topic, batch.msgtype, batch.log_ns, batch.order, [r.tobytes() for r in batch.data])


def read_bag(path: str | Path, topics: Iterable[str] | None = None) -> Iterator[BagRecord]:
    """The messages of the bag at ``path`` (only ``topics`` if given), in stored order. Raises
    MbfgError at the end if the bag was damaged (after yielding every readable message)."""
    with BagSource(path) as source:
        for topic, msgtype, log_ns, raw in source.messages(topics):
            yield BagRecord(topic, msgtype, log_ns, source.deserialize(raw, msgtype))
        if source.damage:
            lost = ", ".join(f"{t}: {n}" for t, n in sorted(source.damage.lost.items())) or "unknown"
            raise MbfgError(f"the bag {str(path)!r} is damaged (messages lost per topic: {lost}; "
                            f"{'; '.join(source.damage.regions[:3])})")


def bag_topics(path: str | Path) -> dict[str, dict]:
    """{topic: {"type": msgtype, "count": message count}} of the bag at ``path``."""
    with BagSource(path) as source:
        return {t: dict(v) for t, v in source.topics.items()}


def bag_custom_data(path: str | Path) -> dict[str, str]:
    """The metadata custom_data of a rosbag2 (e.g. ``mbfg.epoch_ns``); {} for other bags."""
    path = Path(path)
    if not (path.is_dir() and (path / "metadata.yaml").is_file()):
        return {}
    info = _metadata(path) or {}
    return {str(k): str(v) for k, v in (info.get("custom_data") or {}).items()}


def bag_epoch(path: str | Path) -> float | None:
    """The run's t = 0 (s, absolute) written by ``mbfg simulate`` (custom_data
    ``mbfg.epoch_ns``), or None when the bag does not say."""
    value = bag_custom_data(path).get("mbfg.epoch_ns")
    return int(value) / 1e9 if value is not None else None
