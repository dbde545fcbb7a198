"""Reading bags with rosbags: rosbag2 (mcap or sqlite3) and rosbag1, messages deserialized.

Messages come in log-time order as :class:`BagRecord` (topic, msgtype, log_time_ns, msg); types
the bag defines but the ROS2_KILTED typestore lacks are registered from the bag itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import yaml
from rosbags.highlevel import AnyReader, AnyReaderError

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs


@dataclass(frozen=True)
class BagRecord:
    """One message of a bag: topic, ROS type name, log (receive) time in ns, deserialized message."""
    topic: str
    msgtype: str
    log_time_ns: int
    msg: object


def _open(path: Path) -> AnyReader:
    if not path.exists():
        raise MbfgError(f"no such bag: {str(path)!r}")
    try:
        reader = AnyReader([path], default_typestore=msgs.typestore())
        reader.open()
    except (AnyReaderError, OSError, ValueError) as exc:
        raise MbfgError(f"cannot read the bag {str(path)!r}: {exc}") from None
    return reader


def read_bag(path: str | Path, topics: Iterable[str] | None = None) -> Iterator[BagRecord]:
    """The messages of the bag at ``path`` (only ``topics`` if given), in log-time order."""
    reader = _open(Path(path))
    try:
        wanted = set(topics) if topics is not None else None
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        for conn, log_ns, raw in reader.messages(connections=conns):
            yield BagRecord(conn.topic, conn.msgtype, int(log_ns), reader.deserialize(raw, conn.msgtype))
    finally:
        reader.close()


def bag_topics(path: str | Path) -> dict[str, dict]:
    """{topic: {"type": msgtype, "count": message count}} of the bag at ``path``."""
    reader = _open(Path(path))
    try:
        out: dict[str, dict] = {}
        for conn in reader.connections:
            entry = out.setdefault(conn.topic, {"type": conn.msgtype, "count": 0})
            entry["count"] += conn.msgcount
        return out
    finally:
        reader.close()


def bag_custom_data(path: str | Path) -> dict[str, str]:
    """The metadata custom_data of a rosbag2 (e.g. ``mbfg.epoch_ns``); {} for other bags."""
    path = Path(path)
    if not (path.is_dir() and (path / "metadata.yaml").is_file()):
        return {}
    try:
        doc = yaml.safe_load((path / "metadata.yaml").read_text(encoding="utf-8"))
        info = doc["rosbag2_bagfile_information"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise MbfgError(f"cannot read the bag metadata of {str(path)!r}: {exc}") from None
    return {str(k): str(v) for k, v in (info.get("custom_data") or {}).items()}


def bag_epoch(path: str | Path) -> float | None:
    """The run's t = 0 (s, absolute) written by ``mbfg simulate`` (custom_data
    ``mbfg.epoch_ns``), or None when the bag does not say."""
    value = bag_custom_data(path).get("mbfg.epoch_ns")
    return int(value) / 1e9 if value is not None else None
