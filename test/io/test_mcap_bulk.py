"""Bulk MCAP writing (BagWriter.write_rows -> McapBulk): the bag is byte for byte the one rosbags
writes message by message (chunks, indexes, statistics, metadata.yaml), reads back with
rosbags, the mcap library and McapSalvage, and a changed rosbags stops it loudly."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader
from rosbags.highlevel import AnyReader

from mbfg_ros.io import mcap_bulk
from mbfg_ros.io.bag_writer import BagWriter
from mbfg_ros.io.mcap_bulk import CHUNK_LIMIT, McapBulk, McapBulkError
from mbfg_ros.io.mcap_salvage import McapSalvage

STRING = "std_msgs/msg/String"
EPOCH_NS = 1_700_000_000_000_000_000
TOPICS = [("/a", STRING), ("b", STRING), ("/c", STRING)]
EXTRA = ("/diag", STRING)


def strings(rng, N: int, L: int) -> np.ndarray:
    """(N, 9 + L) uint8: N serialised std_msgs/String of L random letters."""
    r = np.zeros((N, 9 + L), np.uint8)
    r[:, 1] = 1                                            # CDR little endian
    r[:, 4:8] = np.frombuffer((L + 1).to_bytes(4, "little"), np.uint8)
    r[:, 8:8 + L] = rng.integers(97, 123, (N, L))
    return r


def batches(seed: int, sizes: list[int], lengths: list[tuple[int, ...]]):
    rng = np.random.default_rng(seed)
    t, out = EPOCH_NS, []
    for N, Ls in zip(sizes, lengths):
        st = t + np.arange(N, dtype=np.int64) * 1_000_000
        t = int(st[-1]) + 1_000_000
        out.append((st, [strings(rng, N, L) for L in Ls]))
    return out


EXTRA_DATA = bytes([0, 1, 0, 0, 3, 0, 0, 0, 111, 107, 0])


def write(path: Path, data, bulk: bool, storage: str = "mcap") -> dict:
    """The batches written with write_rows (bulk) or message by message, a message of an extra
    topic (written by rosbags' own write) before every second batch, the first one included:
    the bulk writer attaches to a chunk that already has messages; the summary."""
    with BagWriter(path, storage=storage) as w:
        for topic, msgtype in [*TOPICS, EXTRA]:
            w.add_topic(topic, msgtype)
        for b, (st, rows) in enumerate(data):
            if b % 2 == 0:
                w.write_raw(*EXTRA, int(st[0]), EXTRA_DATA)
            if bulk:
                w.write_rows(TOPICS, st, rows)
            else:
                for i in range(st.size):
                    for (topic, msgtype), r in zip(TOPICS, rows):
                        w.write_raw(topic, msgtype, int(st[i]), r[i].tobytes())
    return w.summary()


def expected_messages(data) -> list[tuple[str, int, bytes]]:
    out = []
    for b, (st, rows) in enumerate(data):
        if b % 2 == 0:
            out.append((EXTRA[0], int(st[0]), EXTRA_DATA))
        for i in range(st.size):
            out += [("/" + t.lstrip("/"), int(st[i]), r[i].tobytes()) for (t, _), r in zip(TOPICS, rows)]
    return out


CASES = {
    "small": ([5], [(3, 7, 1)]),
    "chunks": ([1, 2500, 3000, 17, 4000, 1], [(40, 200, 9), (1, 1, 1), (300, 5, 90), (8, 8, 8), (120, 60, 30), (2, 3, 4)]),
    "huge_records": ([3, 2], [(CHUNK_LIMIT, 10, CHUNK_LIMIT // 2), (5, CHUNK_LIMIT + 7, 1)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bulk_bag_is_the_per_message_bag_byte_for_byte(tmp_path, case):
    data = batches(3, *CASES[case])
    (tmp_path / "per").mkdir()
    (tmp_path / "bulk").mkdir()
    per = write(tmp_path / "per" / "bag", data, bulk=False)
    bulk = write(tmp_path / "bulk" / "bag", data, bulk=True)
    assert bulk == per
    a = (tmp_path / "per" / "bag" / "bag.mcap").read_bytes()
    b = (tmp_path / "bulk" / "bag" / "bag.mcap").read_bytes()
    assert a == b
    assert (tmp_path / "per" / "bag" / "metadata.yaml").read_text() == \
        (tmp_path / "bulk" / "bag" / "metadata.yaml").read_text()
    if case == "chunks":
        with open(tmp_path / "bulk" / "bag" / "bag.mcap", "rb") as fh:
            summary = make_reader(fh).get_summary()
        assert len(summary.chunk_indexes) >= 3
        assert all(ci.uncompressed_size <= CHUNK_LIMIT + 9 + 31 + 300 for ci in summary.chunk_indexes)


def test_bulk_bag_reads_back_with_every_reader(tmp_path):
    data = batches(5, *CASES["chunks"])
    path = tmp_path / "bag"
    summary = write(path, data, bulk=True)
    want = expected_messages(data)
    counts = {t: sum(1 for m in want if m[0] == t) for t in {m[0] for m in want}}
    assert {t: v["count"] for t, v in summary["topics"].items()} == counts

    with AnyReader([path]) as reader:
        assert {c.topic: c.msgcount for c in reader.connections} == counts
        got = [(c.topic, ns, bytes(raw)) for c, ns, raw in reader.messages()]
        assert reader.message_count == len(want)
    assert got == want                       # log-time order, ties in written order

    with open(path / "bag.mcap", "rb") as fh:
        reader = make_reader(fh)
        read = list(reader.iter_messages(log_time_order=False))
    assert [(ch.topic, m.log_time, bytes(m.data)) for _, ch, m in read] == want
    assert all(m.publish_time == m.log_time and m.sequence == 0 for _, _, m in read)
    with open(path / "bag.mcap", "rb") as fh:
        stats = make_reader(fh).get_summary().statistics
    assert stats.message_count == len(want)
    assert (stats.message_start_time, stats.message_end_time) == (want[0][1], want[-1][1])

    salvage = McapSalvage([path / "bag.mcap"])
    got = [(topic, ns, bytes(raw)) for topic, _, ns, raw in salvage.messages()]
    assert got == want                       # stored order: keyframe by keyframe
    assert not salvage.damage and salvage.expected() == counts


def test_sqlite3_write_rows_writes_message_by_message(tmp_path):
    data = batches(7, [4, 300], [(3, 5, 7), (20, 1, 2)])
    summary = write(tmp_path / "bag", data, bulk=True, storage="sqlite3")
    want = expected_messages(data)
    assert summary["messages"] == len(want)
    with AnyReader([tmp_path / "bag"]) as reader:
        got = [(c.topic, ns, bytes(raw)) for c, ns, raw in reader.messages()]
    assert got == want


def test_write_rows_checks_its_arrays(tmp_path):
    with BagWriter(tmp_path / "bag") as w:
        with pytest.raises(ValueError, match="uint8"):
            w.write_rows(TOPICS[:1], np.array([EPOCH_NS]), [np.zeros((2, 9), np.uint8)])
        with pytest.raises(ValueError, match="row arrays"):
            w.write_rows(TOPICS[:2], np.array([EPOCH_NS]), [np.zeros((1, 9), np.uint8)])


def test_a_changed_rosbags_stops_bulk_writing_loudly(tmp_path, monkeypatch):
    with BagWriter(tmp_path / "a") as w:
        mw = w._writer.storage
        del mw.channel_stats
        with pytest.raises(McapBulkError, match="McapWriter.channel_stats"):
            McapBulk(w._writer)
        mw.channel_stats = {}
    with BagWriter(tmp_path / "b") as w:
        w._writer.storage.chunk.msgs = [(0, 0)]
        with pytest.raises(McapBulkError, match="McapWriter.chunk"):
            McapBulk(w._writer)
        w._writer.storage.chunk.msgs = {}
    monkeypatch.setattr(mcap_bulk, "TESTED_ROSBAGS", ("0.0.",))
    with pytest.raises(McapBulkError, match="checked against rosbags 0.0.x"):
        with BagWriter(tmp_path / "c") as w:
            w.write_raw(*EXTRA, EPOCH_NS, EXTRA_DATA)      # per message: rosbags' own writer
            w.write_rows(TOPICS[:1], np.array([EPOCH_NS]), [np.zeros((1, 9), np.uint8)])
    assert not (tmp_path / "c").exists()                   # no half-written bag
