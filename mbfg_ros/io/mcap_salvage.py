"""Reading rosbag2 MCAP files record by record, so that a damaged or truncated file gives every
message that can still be read and counts the ones that cannot, per topic.

A recorder that was killed leaves a file without its summary and footer ("File end magic is
invalid" for readers that start from the footer), and a damaged byte can make a reader stop with
an exception or skip messages without a word. :class:`McapSalvage` reads the data section from
the start with the `mcap` library's record classes (``mcap.records``) and its own loop that
never trusts a length it has not checked:

- a record whose length runs past the end of the file is the truncation point; the readable
  messages of a truncated uncompressed chunk are still read;
- a record that does not parse, or an unknown opcode, is damage: the reader searches forward for
  the next plausible record (a chunk whose header adds up, or, inside a chunk, a message on a
  known channel within the chunk's time range) and goes on from there;
- compressed chunks (zstd, lz4) are decompressed whole; one that does not decompress or fails its
  CRC is damage.

:meth:`McapSalvage.batches` reads the same records in bulk where a chunk is intact: its message
indexes (the records after it) give every message's offset, checked with numpy against the
chunk's bytes (opcode, channel, log time, lengths that tile the chunk with only schema and
channel records between them); such a chunk gives per topic one :class:`MessageBatch` (log times
as an array, the messages as one (N, L) byte array when all have length L), with no Python object
per message. A chunk that is damaged, cut short, without indexes or failing any check is read by
the record loop above, so damage is handled and counted exactly as by :meth:`McapSalvage.messages`.

Expected message counts per topic come from the summary's statistics when the footer is intact,
else from the bag's ``metadata.yaml`` (what the caller passes), else from the message indexes
after each chunk; messages expected but not read are ``lost`` (:class:`McapDamage`). Every
damaged place is described in ``McapDamage.regions`` (file, byte offset, what).
"""
from __future__ import annotations

import io
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from numpy.lib.stride_tricks import as_strided
from mcap.data_stream import ReadDataStream
from mcap.opcode import Opcode
from mcap.reader import SeekingReader
from mcap.records import Channel, Schema, Statistics

from mbfg_ros.errors import MbfgError

MAGIC = b"\x89MCAP0\r\n"
_KNOWN = {int(o) for o in Opcode}
_CHUNK_HEAD = struct.Struct("<QQQI")          # start, end, uncompressed size, crc
_MESSAGE_HEAD = struct.Struct("<HIQQ")        # channel, sequence, log time, publish time
_RECORD_HEAD = struct.Struct("<BQ")           # opcode, length
_MAX_RECORD = 1 << 32                         # longer records are damage (4 GiB, as mcap's limit)
_SCAN_BLOCK = 1 << 20


@dataclass
class McapDamage:
    """What could not be read: ``lost`` messages per topic (expected minus read; only known
    where a count was), ``regions`` where the damage is, and whether a file ends early
    (``truncated``) with no count of what followed (``unknown_loss``)."""
    lost: Counter = field(default_factory=Counter)
    regions: list[str] = field(default_factory=list)
    truncated: bool = False
    unknown_loss: bool = False

    def __bool__(self) -> bool:
        return bool(self.lost or self.regions or self.truncated)


@dataclass
class MessageBatch:
    """Messages of one topic read at once: their log times (ns), their positions in the read
    order (increasing; other topics' messages fill the gaps) and their CDR bytes, one (N, L)
    uint8 array when every message has L bytes, else a list of bytes."""
    topic: str
    msgtype: str
    log_ns: np.ndarray                    # (N,) int64
    order: np.ndarray                     # (N,) int64
    data: np.ndarray | list

    def __len__(self) -> int:
        return int(self.log_ns.size)

    def raw(self, i: int) -> bytes:
        """The CDR bytes of message ``i``."""
        return self.data[i].tobytes() if isinstance(self.data, np.ndarray) else self.data[i]


def group_messages(items: list[tuple[str, str, int, bytes]], first_order: int) -> list[MessageBatch]:
    """(topic, type, log time, bytes) messages in read order -> one MessageBatch per (topic,
    type), ordered from ``first_order``."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, (topic, msgtype, _, _) in enumerate(items):
        groups.setdefault((topic, msgtype), []).append(i)
    out = []
    for (topic, msgtype), idx in groups.items():
        raws = [items[i][3] for i in idx]
        size = len(raws[0])
        data: np.ndarray | list = raws
        if all(len(r) == size for r in raws):
            data = np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), size)
        out.append(MessageBatch(topic, msgtype, np.array([items[i][2] for i in idx], np.int64),
                                np.asarray(idx, np.int64) + first_order, data))
    return out


@dataclass
class _Channel:
    topic: str
    msgtype: str


class McapSalvage:
    """The messages of one or more MCAP files (a rosbag2's, in order) read as far as they can be.

    ``expected``: {topic: message count} the caller knows (a rosbag2's metadata.yaml); the
    summary's statistics replace it where a file has an intact summary.
    """

    def __init__(self, files: Iterable[str | Path], expected: dict[str, int] | None = None) -> None:
        self.files = [Path(f) for f in files]
        for f in self.files:
            if not f.is_file():
                raise MbfgError(f"cannot read the bag: no such file {str(f)!r}")
            with f.open("rb") as fh:
                if fh.read(len(MAGIC)) != MAGIC:
                    raise MbfgError(f"cannot read the bag: {str(f)!r} is not an MCAP file")
        self._summaries = [self._summary(f) for f in self.files]
        self.definitions: dict[str, tuple[str, bytes]] = {}   # type -> (schema encoding, text)
        for summary in self._summaries:
            for sc in (summary.schemas.values() if summary is not None else ()):
                self.definitions.setdefault(sc.name, (sc.encoding, bytes(sc.data)))
        self.damage = McapDamage()
        self.counts: Counter = Counter()            # topic -> messages read
        self.chunks_at_once = 0                     # chunks the last batches() read in bulk
        self._expected = dict(expected or {})
        self._index_counts: Counter = Counter()     # topic -> messages the chunk indexes list
        self.topics: dict[str, dict] = {}
        self.start_ns: int | None = None
        self.end_ns: int | None = None
        if all(s is not None for s in self._summaries):
            expected_summary: Counter = Counter()
            for s in self._summaries:
                for cid, ch in s.channels.items():
                    schema = s.schemas.get(ch.schema_id)
                    self.topics.setdefault(ch.topic, {"type": schema.name if schema else "", "count": 0})
                    if s.statistics is not None:
                        n = s.statistics.channel_message_counts.get(cid, 0)
                        self.topics[ch.topic]["count"] += n
                        expected_summary[ch.topic] += n
                st = s.statistics
                if st is not None and st.message_count:
                    self.start_ns = st.message_start_time if self.start_ns is None else min(self.start_ns, st.message_start_time)
                    self.end_ns = st.message_end_time if self.end_ns is None else max(self.end_ns, st.message_end_time)
            if all(s.statistics is not None for s in self._summaries):
                self._expected = dict(expected_summary)
            self.intact = True
        else:
            self.intact = False
        self._scanned = False

    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _summary(path: Path):
        """The file's summary (footer intact), or None."""
        try:
            with path.open("rb") as fh:
                return SeekingReader(fh).get_summary()
        except Exception:                     # noqa: BLE001 - any damage means "no summary"
            return None

    def scan(self) -> None:
        """Read every file once to learn its topics, types, counts and times (needed when a
        file has no summary and the caller knows nothing of it)."""
        if self._scanned or self.intact:
            return
        for _ in self.messages():
            pass

    def expected(self) -> dict[str, int]:
        """{topic: messages the bag should hold} (from the summary, metadata, or the indexes)."""
        out = dict(self._expected)
        for topic, n in self._index_counts.items():
            out[topic] = max(out.get(topic, 0), n)
        return out

    # ------------------------------------------------------------------------------------------
    def messages(self, topics: set[str] | None = None) -> Iterator[tuple[str, str, int, bytes]]:
        """(topic, type, log time ns, CDR bytes) of every readable message (of ``topics``), in
        file order; ``damage`` and ``counts`` are complete when the iterator is exhausted."""
        for item in self._read(topics, bulk=False):
            yield item
        self._finish(topics)

    def batches(self, topics: set[str] | None = None, group: int = 4096) -> Iterator[list[MessageBatch]]:
        """The messages of :meth:`messages`, in blocks: an intact chunk's at once, other
        messages ``group`` at a time; each block holds one :class:`MessageBatch` per topic and
        follows the previous one in the read order. ``damage`` and ``counts`` are those of
        :meth:`messages`."""
        loose: list[tuple[str, str, int, bytes]] = []
        n = 0
        for item in self._read(topics, bulk=True):
            if isinstance(item, tuple):
                loose.append(item)
                if len(loose) < group:
                    continue
                block, loose = group_messages(loose, n), []
            else:
                if loose:
                    block, loose = group_messages(loose, n), []
                    n += sum(len(b) for b in block)
                    yield block
                for b in item:
                    b.order += n
                block = item
            n += sum(len(b) for b in block)
            if block:
                yield block
        if loose:
            yield group_messages(loose, n)
        self._finish(topics)

    def _read(self, topics: set[str] | None, bulk: bool):
        self.chunks_at_once = 0
        self.damage = McapDamage()
        self.counts = Counter()
        self._index_counts = Counter()
        for path, summary in zip(self.files, self._summaries):
            channels: dict[int, _Channel] = {}
            schemas: dict[int, str] = {}
            if summary is not None:
                schemas = {sid: s.name for sid, s in summary.schemas.items()}
                channels = {cid: _Channel(c.topic, schemas.get(c.schema_id, "")) for cid, c in summary.channels.items()}
            yield from _File(self, path, channels, schemas, topics, bulk).read()

    def _finish(self, topics: set[str] | None) -> None:
        self._scanned = True
        if not self.intact:
            for topic, n in self.counts.items():
                entry = self.topics.setdefault(topic, {"type": "", "count": 0})
                entry["count"] = max(entry["count"], n, self.expected().get(topic, 0))
        expected = self.expected()
        for topic, n in expected.items():
            if topics is not None and topic not in topics:
                continue
            missing = n - self.counts.get(topic, 0)
            if missing > 0:
                self.damage.lost[topic] = missing
        if self.damage.truncated and not self._expected:
            self.damage.unknown_loss = True

    def _seen(self, topic: str, msgtype: str, log_ns: int, n: int = 1, last_ns: int | None = None) -> None:
        """``n`` messages of ``topic`` read, logged from ``log_ns`` to ``last_ns``."""
        self.counts[topic] += n
        entry = self.topics.setdefault(topic, {"type": msgtype, "count": 0})
        if not entry["type"]:
            entry["type"] = msgtype
        last_ns = log_ns if last_ns is None else last_ns
        self.start_ns = log_ns if self.start_ns is None else min(self.start_ns, log_ns)
        self.end_ns = last_ns if self.end_ns is None else max(self.end_ns, last_ns)


class _File:
    """One pass over one file (see the module docstring)."""

    def __init__(self, owner: McapSalvage, path: Path, channels: dict, schemas: dict,
                 topics: set[str] | None, bulk: bool = False) -> None:
        self.owner = owner
        self.bulk = bulk
        self.path = path
        self.channels = channels
        self.schemas = schemas
        self.topics = topics
        self.size = path.stat().st_size
        self.schema_of: dict[int, int] = {}                 # channel id -> schema id

    def _damage(self, offset: int, what: str) -> None:
        self.owner.damage.regions.append(f"{self.path.name} at byte {offset}: {what}")

    def read(self) -> Iterator[tuple[str, str, int, bytes]]:
        with self.path.open("rb") as fh:
            pos = len(MAGIC)
            while pos + _RECORD_HEAD.size <= self.size:
                fh.seek(pos)
                opcode, length = _RECORD_HEAD.unpack(fh.read(_RECORD_HEAD.size))
                end = pos + _RECORD_HEAD.size + length
                if opcode not in _KNOWN or length > _MAX_RECORD:
                    nxt = self._resync(fh, pos + 1)
                    self._damage(pos, f"unreadable record (opcode {opcode}, length {length}); "
                                      + (f"reading again from byte {nxt}" if nxt is not None else
                                         "nothing readable after it"))
                    if nxt is None:
                        return
                    pos = nxt
                    continue
                if end > self.size:
                    self.owner.damage.truncated = True
                    self._damage(pos, f"the file ends inside a {Opcode(opcode).name} record "
                                      f"({self.size - pos} of {length + 9} bytes): truncated")
                    if opcode == Opcode.CHUNK:
                        body = fh.read(self.size - pos - _RECORD_HEAD.size)
                        yield from self._chunk(body, pos, partial=True)
                    return
                body = fh.read(length)
                if opcode == Opcode.FOOTER:
                    return
                index = self._peek_indexes(fh, end) if self.bulk and opcode == Opcode.CHUNK else None
                try:
                    yield from self._record(opcode, body, pos, index)
                except _Damaged as exc:
                    self._damage(pos, str(exc))
                pos = end
            self.owner.damage.truncated = True
            self._damage(pos, "the file ends without its footer: truncated" if pos >= self.size
                         else "the file ends inside a record header: truncated")

    # ------------------------------------------------------------------------------------------
    def _peek_indexes(self, fh, pos: int) -> dict[int, np.ndarray] | None:
        """{channel: (k, 2) uint64 (log time, offset)} of the message index records from
        ``pos`` on (those after a chunk), or None without any or when one does not add up."""
        out: dict[int, np.ndarray] = {}
        while pos + _RECORD_HEAD.size <= self.size:
            fh.seek(pos)
            opcode, length = _RECORD_HEAD.unpack(fh.read(_RECORD_HEAD.size))
            if opcode != Opcode.MESSAGE_INDEX or pos + _RECORD_HEAD.size + length > self.size:
                break
            body = fh.read(length)
            if length < 6:
                return None
            channel, size = struct.unpack_from("<HI", body)
            if 6 + size != length or size % 16 or channel in out:
                return None
            out[channel] = np.frombuffer(body, "<u8", count=size // 8, offset=6).reshape(-1, 2)
            pos += _RECORD_HEAD.size + length
        return out or None

    def _record(self, opcode: int, body: bytes, pos: int, index=None) -> Iterator:
        if opcode == Opcode.CHUNK:
            yield from self._chunk(body, pos, index=index)
        elif opcode == Opcode.MESSAGE:
            msg = self._message(body, None)
            if msg is not None:
                yield msg
        elif opcode in (Opcode.SCHEMA, Opcode.CHANNEL):
            self._definition(opcode, body)
        elif opcode == Opcode.MESSAGE_INDEX:
            # (as mcap's MessageIndex.read parses it, without an object per entry)
            if len(body) < 6:
                raise _Damaged("unreadable message index")
            channel, size = struct.unpack_from("<HI", body)
            entries = -(-size // 16)
            if 6 + 16 * entries > len(body):
                raise _Damaged("unreadable message index")
            ch = self.channels.get(channel)
            if ch is not None:
                self.owner._index_counts[ch.topic] += entries
        elif opcode == Opcode.STATISTICS:
            try:
                Statistics.read(ReadDataStream(io.BytesIO(body)))
            except Exception:                     # noqa: BLE001
                raise _Damaged("unreadable statistics") from None

    def _definition(self, opcode: int, body: bytes) -> None:
        try:
            stream = ReadDataStream(io.BytesIO(body))
            if opcode == Opcode.SCHEMA:
                s = Schema.read(stream)
                self.schemas[s.id] = s.name
                self.owner.definitions.setdefault(s.name, (s.encoding, bytes(s.data)))
            else:
                c = Channel.read(stream)
                self.channels.setdefault(c.id, _Channel(c.topic, ""))
                self.schema_of[c.id] = c.schema_id
        except Exception:                         # noqa: BLE001
            raise _Damaged(f"unreadable {Opcode(opcode).name.lower()} record") from None
        for cid, sid in self.schema_of.items():   # a schema may come after its channel
            if not self.channels[cid].msgtype:
                self.channels[cid].msgtype = self.schemas.get(sid, "")

    def _message(self, body, window: tuple[int, int] | None):
        if len(body) < _MESSAGE_HEAD.size:
            raise _Damaged("a message record too short to hold its header")
        channel, _, log_ns, _ = _MESSAGE_HEAD.unpack_from(body)
        ch = self.channels.get(channel)
        if ch is None:
            raise _Damaged(f"a message on unknown channel {channel}")
        if window is not None and not (window[0] <= log_ns <= window[1]):
            raise _Damaged(f"a message whose log time {log_ns} is outside its chunk's time range")
        self.owner._seen(ch.topic, ch.msgtype, log_ns)
        if self.topics is not None and ch.topic not in self.topics:
            return None
        return ch.topic, ch.msgtype, log_ns, bytes(body[_MESSAGE_HEAD.size:])

    def _chunk(self, body: bytes, pos: int, partial: bool = False, index=None) -> Iterator:
        try:
            start, end, size, crc = _CHUNK_HEAD.unpack_from(body)
            off = _CHUNK_HEAD.size
            (clen,) = struct.unpack_from("<I", body, off)
            if clen > 16:
                raise ValueError("compression name too long")
            compression = bytes(body[off + 4:off + 4 + clen]).decode("ascii")
            off += 4 + clen
            (rlen,) = struct.unpack_from("<Q", body, off)
            off += 8
        except (struct.error, ValueError, UnicodeDecodeError):
            self._damage(pos, "a chunk whose header does not parse: its messages are lost")
            return
        data = body[off:off + rlen]
        if compression:
            if partial:
                self._damage(pos, f"a {compression} chunk cut short: its messages are lost")
                return
            try:
                data = _decompress(compression, bytes(data), size)
            except Exception as exc:              # noqa: BLE001
                self._damage(pos, f"a {compression} chunk that does not decompress ({exc}): its "
                                  "messages are lost")
                return
            if crc and zlib.crc32(data) != crc:
                self._damage(pos, "a chunk whose CRC does not match: read as far as it parses")
                index = None
        elif crc and not partial and zlib.crc32(data) != crc:
            self._damage(pos, "a chunk whose CRC does not match: read as far as it parses")
            index = None
        if index is not None and not partial:
            batches = self._chunk_bulk(data, (start, end), index)
            if batches is not None:
                self.owner.chunks_at_once += 1
                yield batches
                return
        yield from self._chunk_records(memoryview(data), pos, (start, end), partial)

    def _chunk_records(self, data: memoryview, pos: int, window: tuple[int, int], partial: bool):
        off, n = 0, len(data)
        while off + _RECORD_HEAD.size <= n:
            opcode, length = _RECORD_HEAD.unpack_from(data, off)
            end = off + _RECORD_HEAD.size + length
            if end > n and partial:
                return                            # the cut: counted by the caller as truncation
            ok = opcode in (Opcode.MESSAGE, Opcode.SCHEMA, Opcode.CHANNEL) and end <= n
            if ok:
                body = data[off + _RECORD_HEAD.size:end]
                try:
                    if opcode == Opcode.MESSAGE:
                        msg = self._message(body, window)
                        if msg is not None:
                            yield msg
                    else:
                        self._definition(opcode, bytes(body))
                    off = end
                    continue
                except _Damaged:
                    pass
            nxt = self._resync_message(data, off + 1, window)
            self._damage(pos, f"a chunk damaged at its byte {off}: "
                              + (f"read again from its byte {nxt}" if nxt is not None else
                                 "the rest of it is lost"))
            if nxt is None:
                return
            off = nxt

    def _chunk_bulk(self, data, window: tuple[int, int], index: dict[int, np.ndarray]) -> list[MessageBatch] | None:
        """An intact chunk's messages as one MessageBatch per topic (order relative to the
        chunk), if its message indexes describe it exactly (see the module docstring); else
        None, with nothing changed (the record loop reads it)."""
        buf = np.frombuffer(data, np.uint8)
        n = buf.size
        chans = [c for c in index if index[c].size]
        if not chans:
            return None
        rec = np.concatenate([index[c] for c in chans])
        cids = np.concatenate([np.full(len(index[c]), c, np.int64) for c in chans])
        offs = rec[:, 1].astype(np.int64)
        if offs.min() < 0 or offs.max() > n - _RECORD_HEAD.size - _MESSAGE_HEAD.size:
            return None
        s = np.argsort(offs, kind="stable")
        offs, logs, cids = offs[s], rec[s, 0], cids[s]

        def rows_at(at: np.ndarray, k: int) -> np.ndarray:
            """(len(at), k) uint8: the k bytes from each offset (one copy, no index per byte)."""
            return as_strided(buf, shape=(n - k + 1, k), strides=(1, 1))[at] if k else np.zeros((at.size, 0), np.uint8)

        def u(at: np.ndarray, dtype: str) -> np.ndarray:
            return rows_at(at, np.dtype(dtype).itemsize).view(dtype).reshape(-1)

        length = u(offs + 1, "<u8")
        if np.any(buf[offs] != Opcode.MESSAGE) or np.any(length < _MESSAGE_HEAD.size) or \
                np.any(length > n) or np.any(u(offs + 9, "<u2") != cids) or np.any(u(offs + 15, "<u8") != logs):
            return None
        ends = offs + _RECORD_HEAD.size + length.astype(np.int64)
        if np.any(ends[:-1] > offs[1:]) or ends[-1] > n:
            return None
        if np.any(logs < window[0]) or np.any(logs > window[1]):
            return None
        # the bytes between messages: schema and channel records only, tiling their gap
        between = np.flatnonzero(ends[:-1] < offs[1:])
        gaps = [(0, int(offs[0]))] + list(zip(ends[between].tolist(), offs[between + 1].tolist()))
        definitions = []
        for a, b in gaps + [(int(ends[-1]), n)]:
            while a + _RECORD_HEAD.size <= b:
                opcode, size = _RECORD_HEAD.unpack_from(data, a)
                e = a + _RECORD_HEAD.size + size
                if opcode not in (Opcode.SCHEMA, Opcode.CHANNEL) or e > b:
                    return None
                body = bytes(data[a + _RECORD_HEAD.size:e])
                try:
                    (Schema if opcode == Opcode.SCHEMA else Channel).read(ReadDataStream(io.BytesIO(body)))
                except Exception:                 # noqa: BLE001
                    return None
                definitions.append((a, opcode, body))
                a = e
            if a != b and b != n:
                return None
        first = {int(c): int(offs[np.argmax(cids == c)]) for c in chans}
        if definitions:
            last_def = definitions[-1][0]
            for c in chans:
                ch = self.channels.get(c)
                if (ch is None or not ch.msgtype) and last_def > first[c]:
                    return None                   # defined (or typed) after its first message
        elif any(c not in self.channels for c in chans):
            return None
        for _, opcode, body in definitions:
            self._definition(opcode, body)
        if any(c not in self.channels for c in chans):
            return None                           # a channel neither known nor defined in the chunk
        wanted = np.zeros(offs.size, bool)
        topics = {c: self.channels[c] for c in chans}
        for c, ch in topics.items():
            if self.topics is None or ch.topic in self.topics:
                wanted[cids == c] = True
        rank = np.cumsum(wanted) - 1
        out = []
        for c in sorted(topics, key=first.get):   # (counted in the order the record loop counts)
            ch = topics[c]
            sel = np.flatnonzero(cids == c)
            lt = logs[sel].astype(np.int64)
            self.owner._seen(ch.topic, ch.msgtype, int(lt.min()), int(sel.size), int(lt.max()))
            if not wanted[sel[0]]:
                continue
            size = length[sel] - _MESSAGE_HEAD.size
            start = offs[sel] + _RECORD_HEAD.size + _MESSAGE_HEAD.size
            if np.all(size == size[0]):
                rows = rows_at(start, int(size[0]))
            else:
                rows = [bytes(data[a:a + b]) for a, b in zip(start.tolist(), size.tolist())]
            out.append(MessageBatch(ch.topic, ch.msgtype, lt, rank[sel].astype(np.int64), rows))
        return out

    def _resync_message(self, data: memoryview, off: int, window: tuple[int, int]) -> int | None:
        """The offset of the next plausible message record in a chunk (a known channel, a log
        time within the chunk's range, a length that fits), or None."""
        raw = bytes(data)
        n = len(raw)
        while True:
            off = raw.find(b"\x05", off)
            if off < 0 or off + _RECORD_HEAD.size + _MESSAGE_HEAD.size > n:
                return None
            _, length = _RECORD_HEAD.unpack_from(raw, off)
            if _MESSAGE_HEAD.size <= length <= n - off - _RECORD_HEAD.size:
                channel, _, log_ns, _ = _MESSAGE_HEAD.unpack_from(raw, off + _RECORD_HEAD.size)
                if channel in self.channels and window[0] <= log_ns <= window[1]:
                    return off
            off += 1

    def _resync(self, fh, pos: int) -> int | None:
        """The offset of the next plausible top-level chunk record after a damaged one (its
        header's sizes add up to its length), or None."""
        while pos < self.size:
            fh.seek(pos)
            block = fh.read(_SCAN_BLOCK + 64)
            i = 0
            while True:
                i = block.find(b"\x06", i)
                if i < 0 or i >= _SCAN_BLOCK:
                    break
                head = block[i:i + 64]
                if len(head) >= 9 + _CHUNK_HEAD.size + 4:
                    _, length = _RECORD_HEAD.unpack_from(head)
                    off = 9 + _CHUNK_HEAD.size
                    (clen,) = struct.unpack_from("<I", head, off)
                    if clen in (0, 3, 4) and pos + i + 9 + length <= self.size and \
                            len(head) >= off + 4 + clen + 8:
                        name = head[off + 4:off + 4 + clen]
                        (rlen,) = struct.unpack_from("<Q", head, off + 4 + clen)
                        if name in (b"", b"lz4", b"zstd") and \
                                length == _CHUNK_HEAD.size + 4 + clen + 8 + rlen:
                            return pos + i
                i += 1
            pos += _SCAN_BLOCK
        return None


class _Damaged(Exception):
    """A record that cannot be read (the message says what)."""


def _decompress(compression: str, data: bytes, size: int) -> bytes:
    if compression == "zstd":
        import zstandard
        return zstandard.decompress(data, size)
    if compression == "lz4":
        import lz4.frame
        return lz4.frame.decompress(data)
    raise ValueError(f"unknown compression {compression!r}")


def mcap_files(path: str | Path) -> list[Path]:
    """The MCAP files of a rosbag2 directory in the order the recorder wrote them, or [path] for
    an .mcap file; [] when there are none. For a bag whose metadata.yaml is missing (a killed
    recorder): a split recording's files ``<name>_0.mcap``, ``<name>_1.mcap``, ... ``<name>_10.mcap``
    in the order of their numeric suffix, not by name (which puts ``_10`` before ``_2``); the
    order a bag's metadata lists is the caller's (:class:`~mbfg_ros.io.bag_reader.BagSource`)."""
    p = Path(path)
    if p.is_file():
        return [p] if p.suffix == ".mcap" else []
    if not p.is_dir():
        return []
    return sorted((f for f in p.iterdir() if f.suffix == ".mcap" and f.is_file()), key=_split_order)


def _split_order(f: Path) -> tuple[str, int, str]:
    """Sort key of a split file ``<name>_<index>.mcap``: the name, then the index as a number."""
    head, _, index = f.stem.rpartition("_")
    return (head, int(index), f.name) if head and index.isdigit() else (f.stem, -1, f.name)
