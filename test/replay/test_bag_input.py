"""BagInput's bulk path (blocks of a bag decoded at once, fixed layouts as arrays) against its
per-message reference (``records(bulk=False)``): the same readings, truth, counts, problems,
disagreements and damage on simulated rigs and on broken bags."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from support.replay_bags import damaged_copy, simulated_bag, simulated_messages
from support.simulations import config_mechanism
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.replay.bag_input import SENSOR, BagInput
from mbfg_ros.replay.truth import TruthCollector


def read(bag, mech, bulk: bool, **kw) -> tuple[dict, BagInput]:
    inp = BagInput(bag, mech, **kw)
    truth = TruthCollector(mech)
    sensor = []
    for kind, topic, log_ns, payload in inp.records(bulk):
        if kind == SENSOR:
            sensor.append((topic, log_ns, [(r.sensor, r.stamp_ns, np.asarray(r.value, float).shape,
                                            np.asarray(r.value, float).tobytes()) for r in payload]))
        else:
            truth.add(topic, payload)
    stats = {t: (s.messages, s.readings, dict(s.problems)) for t, s in inp.stats.items()}
    return dict(sensor=sensor, stats=stats, problems=inp.problems(), disagreements=inp.router.disagreements,
                damage=(dict(inp.damage.lost), inp.damage.regions, inp.damage.truncated),
                truth={t: (bytes(a), bytes(b)) for t, (a, b) in truth._data.items()},
                unmatched=truth.unmatched), inp


def assert_same(bag, mech, **kw) -> BagInput:
    want, _ = read(bag, mech, False, **kw)
    got, inp = read(bag, mech, True, **kw)
    for key in want:
        assert got[key] == want[key], key
    return inp


def layouts_used(inp: BagInput) -> bool:
    return any(x is not None for v in inp._layouts.values() for x in v)


@pytest.mark.parametrize("rig", ["four_bar", "four_bar_gyro", "arm6", "slider_crank"])
def test_bulk_equals_per_message_on_simulated_rigs_with_sensor_faults(tmp_path, rig):
    bag = simulated_bag(tmp_path / rig, rig, 2.0, dropout=0.05, jitter=0.0005, outlier_rate=0.01)
    inp = assert_same(bag, config_mechanism(rig))
    assert layouts_used(inp)


def test_bulk_equals_per_message_on_a_sqlite3_bag(tmp_path):
    bag = simulated_bag(tmp_path / "sq", "four_bar", 1.0, storage="sqlite3")
    inp = assert_same(bag, config_mechanism("four_bar"))
    assert not layouts_used(inp)                  # (decoded message by message)


ENCODERS, CELL = "/encoders", "/rocker_pin/wrench"


def messy_bag(path, rig: str):
    """NaN, duplicated, corrupt, wrong-type and foreign messages; joint names that change in
    the middle (same length and longer); Imu messages whose frame and covariance disagree with
    the config; a load cell sent as Float64 too; truth without the config's joints."""
    messages = simulated_messages(rig, duration=1.0, truth=True)
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    ts = msgs.typestore()
    conns = {}

    def conn(topic, msgtype):
        if (topic, msgtype) not in conns:
            conns[topic, msgtype] = writer.add_connection(topic, msgtype, typestore=ts)
        return conns[topic, msgtype]

    F64 = ts.types["std_msgs/msg/Float64"]
    for i, m in enumerate(messages):
        topic, msg = resolve_topic(m.topic), m.msg
        if topic == ENCODERS and i % 50 == 7:
            msg = msgs.joint_state(msgs.time_to_ns(msg.header.stamp), msg.name, position=[float("nan")])
        if topic == ENCODERS and i % 97 == 3:
            writer.write(conn(topic, m.msgtype), m.log_time_ns, msgs.serialize(msg))      # twice
        if topic == ENCODERS and i % 301 == 5:
            writer.write(conn(topic, m.msgtype), m.log_time_ns, b"\x00\x01garbage")
        if topic == ENCODERS and 400 < i < 450:                                 # same length
            msg = dataclasses.replace(msg, name=[n[:-1] + "X" for n in msg.name])
        if topic == ENCODERS and 450 <= i < 470:                                # longer
            msg = msgs.joint_state(msgs.time_to_ns(msg.header.stamp), list(msg.name) + ["extra_joint"],
                                   position=list(msg.position) + [1.0], effort=[0.5] * (len(msg.name) + 1))
        if m.msgtype == msgs.IMU and i % 3 == 0:
            msg = msgs.imu(msgs.time_to_ns(msg.header.stamp), "other_frame" if i % 2 else msg.header.frame_id,
                           [msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z],
                           [0.5, 0.0172, 0.03][(i // 3) % 3] if i % 5 else 0.0)
        if m.msgtype == msgs.IMU and i % 7 == 0:
            cov = np.array(msg.angular_velocity_covariance)
            cov[0] = -1.0
            msg = dataclasses.replace(msg, angular_velocity_covariance=cov)
        if m.msgtype == msgs.IMU and i % 11 == 0:
            writer.write(conn(topic, m.msgtype), m.log_time_ns, msgs.serialize(msg)[:-8])      # cut short
        if topic.endswith("/truth/joint_states") and i % 13 == 0:
            msg = msgs.joint_state(msgs.time_to_ns(msg.header.stamp), ["nobody"], [0.0], [0.0], [0.0])
        writer.write(conn(topic, m.msgtype), m.log_time_ns, msgs.serialize(msg))
        if topic == CELL and i % 4 == 0:
            writer.write(conn(CELL, msgs.IMU), m.log_time_ns, msgs.serialize(msgs.imu(0, "x", [0, 0, 0], 0.1)))
        if topic == CELL and i % 4 == 1:
            writer.write(conn(CELL, "std_msgs/msg/Float64"), m.log_time_ns, msgs.serialize(F64(data=1.5)))
        if i % 200 == 0:
            writer.write(conn("/camera/info", "std_msgs/msg/String"), m.log_time_ns,
                         msgs.serialize(ts.types["std_msgs/msg/String"](data="hi")))
    writer.close()
    return path


def test_bulk_equals_per_message_on_a_messy_bag(tmp_path):
    inp = assert_same(messy_bag(tmp_path / "messy", "four_bar"), config_mechanism("four_bar"))
    assert layouts_used(inp)
    problems = inp.problems()
    assert any("cannot deserialize" in p for p in problems[ENCODERS])
    assert any("no joint of this config" in p for p in problems[ENCODERS])
    assert inp.stats[ENCODERS].readings


def test_bulk_equals_per_message_on_a_messy_gyro_bag(tmp_path):
    inp = assert_same(messy_bag(tmp_path / "messy", "four_bar_gyro"), config_mechanism("four_bar_gyro"))
    assert layouts_used(inp)
    (topic, reasons), = inp.router.disagreements.items()
    assert len(reasons) >= 4                      # frame, covariance -1, two noises


def test_bulk_equals_per_message_with_a_remap(tmp_path):
    from mbfg_ros.replay.bag_input import parse_remap
    from support.replay_bags import write_bag
    mech = config_mechanism("four_bar")
    moved = [dataclasses.replace(m, topic="/rig/" + m.topic.lstrip("/"))
             for m in simulated_messages("four_bar", duration=1.0, truth=True)]
    bag = write_bag(tmp_path / "moved", moved)
    remap = parse_remap(["/encoders:=/rig/encoders", "/truth/joint_states:=/rig/truth/joint_states"], mech)
    assert_same(bag, mech, remap=remap)


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return simulated_bag(tmp_path_factory.mktemp("bulk") / "rec", "four_bar", 8.0)


@pytest.mark.parametrize("seed", range(4))
def test_bulk_equals_per_message_on_damaged_bags(tmp_path, recording, seed):
    def corrupt(b):
        rng = random.Random(seed)
        for _ in range(3 + 6 * seed):
            i = rng.randrange(200, len(b) - 200)
            b[i:i + 4] = rng.randbytes(4)
        return bytes(b)
    assert_same(damaged_copy(recording, tmp_path / "damaged", corrupt), config_mechanism("four_bar"))


@pytest.mark.parametrize("fraction", [0.4, 0.9])
def test_bulk_equals_per_message_on_truncated_bags(tmp_path, recording, fraction):
    bag = damaged_copy(recording, tmp_path / "cut", lambda b: bytes(b[:int(len(b) * fraction)]))
    inp = assert_same(bag, config_mechanism("four_bar"))
    assert inp.damage.truncated
