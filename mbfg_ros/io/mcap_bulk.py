"""Bulk appends to the MCAP file of a rosbags rosbag2 ``Writer``: N messages per topic at once.

rosbags writes one message per Python call chain (``Writer.write`` -> ``McapWriter.write``:
a BytesIO record, an index tuple, a chunk check); 60 000 messages cost about 0.5 s of CPU.
:class:`McapBulk` appends the message records of whole batches of keyframes built with numpy
from (N, L) uint8 rows (one row = one serialised message; every topic of a batch has one
message per keyframe, all of a keyframe's messages share its stamp), interleaved keyframe by
keyframe (stored order = log-time order, on which :mod:`mbfg_ros.io.mcap_salvage` relies).
The chunks close where rosbags would close them (after the record that takes the chunk past
1 MiB), with the same message indexes, chunk indexes, statistics and metadata.yaml counts: a
bag written in bulk is byte for byte the bag rosbags writes message by message.

It extends rosbags' writer objects rather than writing MCAP itself, and so relies on these
internals of rosbags 0.11 (checked when attached, :class:`McapBulkError` if they changed):

- ``Writer``: ``storage`` (the McapWriter), ``connections``, ``counts`` (per connection id,
  for metadata.yaml), ``min_timestamp``, ``max_timestamp``, ``compression_mode`` (bulk only
  without per-message compression);
- ``McapWriter``: ``chunk`` (a ``PendingChunk``: ``message_start_time``, ``message_end_time``,
  ``bio`` (BytesIO of the chunk's records), ``msgs`` ({channel id: [(log time, offset)]})),
  ``bio``, ``chunks`` (chunk index records), ``compressor``, ``compression``,
  ``message_start_time``, ``message_end_time``, ``channel_stats``, and its ``close_chunk``,
  which :class:`McapBulk` replaces on that one writer object by an equivalent that writes the
  message indexes from numpy arrays (per-message writes and ``close`` call it too);
- the 1 MiB chunk limit (``CHUNK_LIMIT``) and the record layouts of MCAP (message 0x05,
  chunk 0x06, message index 0x07, chunk index 0x08).

``test/io/test_mcap_bulk.py`` compares bulk-written bags byte for byte with rosbags' own.
"""
from __future__ import annotations

from collections import defaultdict
from importlib.metadata import version
from io import BytesIO
from typing import Sequence

import numpy as np

from mbfg_ros.errors import MbfgError

CHUNK_LIMIT = 2 ** 20
"""A chunk is closed after the record that takes its uncompressed size past this (bytes; rosbags)."""

TESTED_ROSBAGS = ("0.11.",)
"""rosbags versions (prefixes) whose McapWriter internals this module was checked against."""

BLOCK = 1024
"""Keyframes built at once (bounds the temporaries; larger blocks are slower, not faster)."""

MESSAGE_HEADER = 31
"""Bytes of a message record before its data: opcode 1, length 8, channel 2, sequence 4,
log time 8, publish time 8."""


class McapBulkError(MbfgError):
    """rosbags' writer is not what :class:`McapBulk` was written for (a changed rosbags)."""


def _internals(writer) -> None:
    """Raise McapBulkError naming what is missing if ``writer`` lacks an internal used here."""
    from rosbags.rosbag2 import storage_mcap
    have = version("rosbags")
    if not have.startswith(TESTED_ROSBAGS):
        raise McapBulkError(f"mbfg_ros.io.mcap_bulk was checked against rosbags {', '.join(TESTED_ROSBAGS)}x, "
                            f"not {have}: check its internals (see its docstring) and extend TESTED_ROSBAGS")
    missing = [f"Writer.{a}" for a in ("storage", "connections", "counts", "min_timestamp", "max_timestamp",
                                       "compression_mode") if not hasattr(writer, a)]
    mw = getattr(writer, "storage", None)
    missing += [f"McapWriter.{a}" for a in ("chunk", "bio", "chunks", "compressor", "compression",
                                            "message_start_time", "message_end_time", "channel_stats",
                                            "close_chunk") if not hasattr(mw, a)]
    chunk = getattr(mw, "chunk", None)
    missing += [f"PendingChunk.{a}" for a in ("message_start_time", "message_end_time", "bio", "msgs")
                if not hasattr(chunk, a)]
    missing += [f"storage_mcap.{a}" for a in ("PendingChunk", "write_record", "write_uint16", "write_uint32",
                                              "write_uint64", "write_string") if not hasattr(storage_mcap, a)]
    if missing:
        raise McapBulkError(f"rosbags {have} changed the writer internals mbfg_ros.io.mcap_bulk relies on: "
                            f"missing {', '.join(missing)}")
    if not isinstance(chunk.bio, BytesIO) or not isinstance(chunk.msgs, dict):
        raise McapBulkError(f"rosbags {have} changed McapWriter.chunk (bio {type(chunk.bio).__name__}, "
                            f"msgs {type(chunk.msgs).__name__}); mbfg_ros.io.mcap_bulk relies on BytesIO and dict")


def bulk_possible(writer) -> bool:
    """Whether ``writer`` (an open rosbags ``Writer``) writes MCAP without per-message compression."""
    from rosbags.rosbag2 import CompressionMode
    from rosbags.rosbag2.storage_mcap import McapWriter
    return isinstance(getattr(writer, "storage", None), McapWriter) and \
        getattr(writer, "compression_mode", None) != CompressionMode.MESSAGE


class McapBulk:
    """Bulk message writing on one open rosbags ``Writer`` with MCAP storage (see the module
    docstring for the internals used). Per-message ``Writer.write`` calls may be mixed in."""

    def __init__(self, writer) -> None:
        if not bulk_possible(writer):
            raise McapBulkError("bulk writing needs an open rosbags Writer with MCAP storage and "
                                "no per-message compression")
        _internals(writer)
        self.writer = writer
        self.mcap = writer.storage
        self.bulk_index: dict[int, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
        self.mcap.close_chunk = self._close_chunk        # this writer object only

    def write_rows(self, connections: Sequence, stamps_ns: np.ndarray, rows: Sequence[np.ndarray]) -> None:
        """Append, for each of the N keyframes of ``stamps_ns`` (N,) int ns (log and publish
        time), one message per connection: row i of ``rows[k]`` ((N, L_k) uint8, serialised)
        on ``connections[k]``; keyframe by keyframe, in the order of ``connections``."""
        w, mw = self.writer, self.mcap
        if w.storage is not mw:
            raise McapBulkError("the bag is not open (or was reopened) for bulk writing")
        stamps = np.ascontiguousarray(stamps_ns, dtype=np.int64).reshape(-1)
        N, K = stamps.size, len(connections)
        if K != len(rows):
            raise ValueError(f"{K} connections but {len(rows)} row arrays")
        if N == 0 or K == 0:
            return
        for c, r in zip(connections, rows):
            if c not in w.connections:
                raise McapBulkError(f"tried to write to unknown connection {c!r}")
            if r.dtype != np.uint8 or r.ndim != 2 or r.shape[0] != N:
                raise ValueError(f"rows of {c.topic} must be ({N}, L) uint8, not {r.shape} {r.dtype}")
        if np.any(stamps < 0):
            raise ValueError("negative log time")
        for s in range(0, N, BLOCK):
            self._write_block(connections, stamps[s:s + BLOCK], [r[s:s + BLOCK] for r in rows])

    def _write_block(self, connections: Sequence, stamps: np.ndarray, rows: Sequence[np.ndarray]) -> None:
        w, mw = self.writer, self.mcap
        N, K = stamps.size, len(connections)
        # the records of every keyframe side by side: (N, S) bytes, S = sum of record sizes
        sizes = np.array([MESSAGE_HEADER + r.shape[1] for r in rows], np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        S = int(starts[-1])
        rec = np.empty((N, S), np.uint8)
        st8 = stamps.astype("<u8").view(np.uint8).reshape(N, 8)
        for k, (c, r) in enumerate(zip(connections, rows)):
            o = int(starts[k])
            head = np.zeros(MESSAGE_HEADER, np.uint8)
            head[0] = 0x05
            head[1:9] = np.frombuffer(int(sizes[k] - 9).to_bytes(8, "little"), np.uint8)
            head[9:11] = np.frombuffer(int(c.id).to_bytes(2, "little"), np.uint8)
            rec[:, o:o + MESSAGE_HEADER] = head
            rec[:, o + 15:o + 23] = st8
            rec[:, o + 23:o + 31] = st8
            rec[:, o + MESSAGE_HEADER:o + int(sizes[k])] = r
        flat = rec.reshape(-1)
        # record j = (keyframe j // K, connection j % K) ends at ends[j] bytes into ``flat``
        ends = (np.arange(N, dtype=np.int64)[:, None] * S + starts[None, 1:]).reshape(-1)
        done = 0                            # records written
        while done < N * K:
            bio = mw.chunk.bio
            pos = bio.tell()
            base = 0 if done == 0 else int(ends[done - 1])          # bytes of flat written
            # rosbags closes the chunk after the first record whose end passes the limit
            last = max(done, int(np.searchsorted(ends, CHUNK_LIMIT - pos + base, side="right")))
            stop = min(last + 1, N * K)
            self._append(connections, stamps, flat[base:int(ends[stop - 1])], starts, S, done, stop, pos - base)
            done = stop
            if bio.tell() > CHUNK_LIMIT:
                mw.close_chunk()
        for c in connections:
            w.counts[c.id] += N
            mw.channel_stats[c.id] += N
        lo, hi = int(stamps.min()), int(stamps.max())
        w.min_timestamp = min(lo, w.min_timestamp)
        w.max_timestamp = max(hi, w.max_timestamp)
        mw.message_start_time = min(lo, mw.message_start_time)
        mw.message_end_time = max(hi, mw.message_end_time)

    def _append(self, connections, stamps, data, starts, S, j0, j1, shift) -> None:
        """Records j0..j1-1 (``data``, their bytes) into the pending chunk, indexed (record j of
        keyframe i = j // K starts at i * S + starts[j % K] + shift in the chunk)."""
        mw = self.mcap
        K = len(connections)
        mw.chunk.bio.write(memoryview(data))
        i0, i1 = j0 // K, (j1 - 1) // K                # keyframes touched
        ts = stamps[i0:i1 + 1]
        mw.chunk.message_start_time = min(int(ts.min()), mw.chunk.message_start_time)
        mw.chunk.message_end_time = max(int(ts.max()), mw.chunk.message_end_time)
        # per connection: its records of keyframes i0..i1 that lie in j0..j1-1
        for k, c in enumerate(connections):
            a, b = -(-(j0 - k) // K), (j1 - 1 - k) // K + 1
            if b <= a:
                continue
            offsets = shift + np.arange(a, b, dtype=np.int64) * S + int(starts[k])
            self.bulk_index[c.id].append((np.asarray(stamps[a:b], np.int64), offsets))
            mw.chunk.msgs.setdefault(c.id, [])       # the channel's place among the chunk's channels

    def _close_chunk(self) -> None:
        """rosbags' ``McapWriter.close_chunk``, the message indexes written from arrays."""
        from rosbags.rosbag2.storage_mcap import PendingChunk, write_record, write_string, write_uint16, \
            write_uint32, write_uint64
        mw = self.mcap
        chunk = mw.chunk
        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, chunk.bio.tell())
        write_uint32(rec, 0)
        compressed = mw.compressor(chunk.bio.getvalue())
        write_string(rec, mw.compression)
        write_uint64(rec, len(compressed))
        rec.write(compressed)
        chunk_start = mw.bio.tell()
        write_record(mw.bio, 0x06, rec)
        chunk_end = mw.bio.tell()

        # rosbags orders a chunk's channels by their first message in it (dict insertion)
        index = {}
        for cid, msgs in chunk.msgs.items():
            parts = self.bulk_index.pop(cid, [])
            if msgs:
                m = np.array(msgs, np.int64).reshape(-1, 2)
                parts.append((m[:, 0], m[:, 1]))
            ts = np.concatenate([p[0] for p in parts])
            off = np.concatenate([p[1] for p in parts])
            order = np.argsort(off, kind="stable")      # write order
            index[cid] = (ts[order], off[order])
        if self.bulk_index:
            raise McapBulkError(f"message index of channels {sorted(self.bulk_index)} outside the chunk")
        offsets: list[tuple[int, int]] = []
        for cid in sorted(index, key=lambda c: int(index[c][1][0])):
            ts, off = index[cid]
            offsets.append((cid, mw.bio.tell()))
            rec = BytesIO()
            write_uint16(rec, cid)
            write_uint32(rec, ts.size * 16)
            rec.write(np.stack([ts, off], axis=1).astype("<u8").tobytes())
            write_record(mw.bio, 0x07, rec)

        rec = BytesIO()
        write_uint64(rec, chunk.message_start_time)
        write_uint64(rec, chunk.message_end_time)
        write_uint64(rec, chunk_start)
        write_uint64(rec, chunk_end - chunk_start)
        write_uint32(rec, len(offsets) * 10)
        for cid, offset in offsets:
            write_uint16(rec, cid)
            write_uint64(rec, offset)
        write_uint64(rec, mw.bio.tell() - chunk_end)
        write_string(rec, mw.compression)
        write_uint64(rec, len(compressed))
        write_uint64(rec, chunk.bio.tell())
        mw.chunks.append(rec)

        mw.chunk = PendingChunk(2**63 - 1, 0, BytesIO(), defaultdict(list))
