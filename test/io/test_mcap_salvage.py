"""McapSalvage.batches (intact chunks read at once) against McapSalvage.messages (record by
record): the same messages in the same order, the same counts and the same damage, on intact,
damaged and truncated files."""
from __future__ import annotations

import random

import numpy as np
import pytest
import yaml

from support.replay_bags import damaged_copy, simulated_bag
from mbfg_ros.io.mcap_salvage import McapSalvage


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return simulated_bag(tmp_path_factory.mktemp("salvage") / "rec", "four_bar", 8.0)   # 3 chunks


def _expected(bag) -> dict[str, int]:
    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    return {t["topic_metadata"]["name"]: t["message_count"] for t in info["topics_with_message_count"]}


def _flat(blocks) -> list[tuple[str, str, int, bytes]]:
    out = []
    for block in blocks:
        for b in block:
            assert len({len(b), b.order.size}) == 1
            out += [(int(b.order[i]), b.topic, b.msgtype, int(b.log_ns[i]), b.raw(i)) for i in range(len(b))]
    out.sort()
    assert [o for o, *_ in out] == list(range(len(out)))          # one read order, no gaps
    return [tuple(x[1:]) for x in out]


def _state(s: McapSalvage) -> tuple:
    d = s.damage
    return (dict(d.lost), list(d.regions), d.truncated, d.unknown_loss, dict(s.counts), s.expected(),
            s.start_ns, s.end_ns, {t: dict(v) for t, v in s.topics.items()})


def assert_same(bag, topics=None) -> McapSalvage:
    files = sorted(bag.glob("*.mcap"))
    a, b = McapSalvage(files, _expected(bag)), McapSalvage(files, _expected(bag))
    per_message = list(a.messages(topics))
    bulk = _flat(b.batches(topics))
    assert bulk == per_message
    assert _state(a) == _state(b)
    return b


def test_an_intact_bag_is_read_in_bulk_with_the_same_messages(recording):
    s = assert_same(recording)
    assert s.chunks_at_once >= 1 and not s.damage
    rows = [b for block in s.batches() for b in block]
    assert all(isinstance(b.data, np.ndarray) and b.data.ndim == 2 for b in rows)
    assert_same(recording, {"/encoders", "/truth/joint_states"})


@pytest.mark.parametrize("seed", range(6))
def test_a_damaged_bag_gives_the_same_messages_and_damage(tmp_path, recording, seed):
    def corrupt(b):
        rng = random.Random(seed)
        for _ in range(1 + seed * 5):
            i = rng.randrange(200, len(b) - 200)
            b[i:i + 4] = rng.randbytes(4)
        return bytes(b)
    s = assert_same(damaged_copy(recording, tmp_path / "damaged", corrupt))
    if seed == 5:                                 # damage in one chunk, the others in bulk
        assert s.damage.regions and s.chunks_at_once >= 1


@pytest.mark.parametrize("fraction", [0.3, 0.55, 0.8, 0.97, 0.9999])
def test_a_truncated_bag_gives_the_same_messages_and_damage(tmp_path, recording, fraction):
    s = assert_same(damaged_copy(recording, tmp_path / "cut", lambda b: bytes(b[:int(len(b) * fraction)])))
    assert s.damage.truncated


def test_a_damaged_message_index_sends_its_chunk_to_the_record_loop(tmp_path, recording):
    """A message index entry whose offset points elsewhere: that chunk is read record by record."""
    files = sorted(recording.glob("*.mcap"))
    s0 = McapSalvage(files)
    list(s0.batches())
    data = bytearray(files[0].read_bytes())
    first = 8                                         # the first chunk record (opcode 0x06)
    while data[first] != 0x06:
        first += 9 + int.from_bytes(data[first + 1:first + 9], "little")
    index = first + 9 + int.from_bytes(data[first + 1:first + 9], "little")
    assert data[index] == 0x07                        # a message index follows it
    data[index + 9 + 2 + 4 + 8] ^= 0x01               # its first entry's offset
    bag = damaged_copy(recording, tmp_path / "index", lambda _: bytes(data))
    s = assert_same(bag)
    assert s.chunks_at_once == s0.chunks_at_once - 1


def test_a_split_recording_without_metadata_is_read_in_the_recorders_order(tmp_path):
    """rosbag2 splits a recording into rec_0.mcap, rec_1.mcap, ... rec_11.mcap; without its
    metadata.yaml (a killed recorder) the files are read in that numeric order, not by name
    (rec_0, rec_1, rec_10, rec_11, rec_2, ...), so the messages come in log-time order."""
    from support.replay_bags import simulated_messages, write_bag
    from mbfg_ros.io.bag_reader import BagSource
    from mbfg_ros.io.mcap_salvage import mcap_files
    messages = simulated_messages("four_bar", duration=1.2)
    split = tmp_path / "rec"
    split.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(messages)), 12)):
        write_bag(tmp_path / f"part{i}", [messages[k] for k in part])
        next((tmp_path / f"part{i}").glob("*.mcap")).rename(split / f"rec_{i}.mcap")
    assert [f.name for f in mcap_files(split)] == [f"rec_{i}.mcap" for i in range(12)]
    with BagSource(split) as source:
        stamps = [log_ns for _, _, log_ns, _ in source.messages()]
    assert stamps == sorted(stamps) and len(stamps) == len(messages)
