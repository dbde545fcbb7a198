"""Bags with problems: each is handled and reported (per topic), never a traceback."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from support.replay_bags import damaged_copy, simulated_bag, simulated_messages, write_bag
from support.simulations import config_mechanism
from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.simulation_messages import BagMessage
from mbfg_ros.io.topic_names import resolve_topic
from mbfg_ros.replay.bag_input import UNREADABLE, parse_remap
from mbfg_ros.replay.session import ReplayOptions, replay_bag

ENCODERS, CELL = "/encoders", "/rocker_pin/wrench"


@pytest.fixture(scope="module")
def mech():
    return config_mechanism("four_bar")


@pytest.fixture(scope="module")
def messages():
    return simulated_messages("four_bar", duration=1.0)


def with_position(m: BagMessage, value: float) -> BagMessage:
    ns = msgs.time_to_ns(m.msg.header.stamp)
    return dataclasses.replace(m, msg=msgs.joint_state(ns, m.msg.name, position=[value]))


def test_missing_and_unreadable_bags(tmp_path, mech):
    with pytest.raises(MbfgError, match="no such bag"):
        replay_bag(tmp_path / "nothing", mech)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("not a bag")
    with pytest.raises(MbfgError, match="cannot read the bag"):
        replay_bag(tmp_path / "junk", mech)


def test_a_bag_without_the_config_topics_lists_both_and_suggests_remap(tmp_path, mech, messages):
    moved = [dataclasses.replace(m, topic="/rig/" + m.topic.lstrip("/")) for m in messages]
    bag = write_bag(tmp_path / "moved", moved)
    with pytest.raises(MbfgError) as err:
        replay_bag(bag, mech)
    text = str(err.value)
    assert "/encoders (sensor_msgs/msg/JointState: crank_encoder)" in text
    assert "/rig/encoders (sensor_msgs/msg/JointState, 1000)" in text
    assert "--remap" in text and "\n" not in text
    # with the remap it runs
    remap = parse_remap(["/encoders:=/rig/encoders", "/rocker_pin/wrench:=/rig/rocker_pin/wrench"], mech)
    res = replay_bag(bag, mech, ReplayOptions(remap=remap, truth=False))
    assert res.counts["crank_encoder"].used == 1000 and res.counts["rocker_pin_load"].used == 200
    assert res.input.stats["/rig/encoders"].config_topic == "/encoders"


def test_bad_remap_options(mech):
    with pytest.raises(MbfgError, match="expected FROM:=TO"):
        parse_remap(["/encoders=/x"], mech)
    with pytest.raises(MbfgError, match="not a sensor or truth topic of the config"):
        parse_remap(["/imu:=/x"], mech)


def test_missing_topic_runs_without_it(tmp_path, mech, messages):
    bag = write_bag(tmp_path / "enc_only", [m for m in messages if resolve_topic(m.topic) == ENCODERS])
    res = replay_bag(bag, mech, ReplayOptions(truth=False))
    assert [s.topic for s in res.input.missing] == [CELL]
    assert res.counts["rocker_pin_load"].received == 0 and res.counts["crank_encoder"].used == 1000
    assert len(res.estimates) == 201
    assert res.truth is None


def test_nans_duplicates_wrong_types_and_corrupt_messages_are_counted(tmp_path, mech, messages):
    path = tmp_path / "messy"
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    ts = msgs.typestore()
    conns = {ENCODERS: writer.add_connection(ENCODERS, msgs.JOINT_STATE, typestore=ts),
             CELL: writer.add_connection(CELL, msgs.WRENCH_STAMPED, typestore=ts)}
    wrong = writer.add_connection(CELL, msgs.IMU, typestore=ts)       # a second type on the topic
    other = writer.add_connection("/camera/info", "std_msgs/msg/String", typestore=ts)
    n_nan = n_dup = n_bad = n_wrong = 0
    for i, m in enumerate(messages):
        if resolve_topic(m.topic) == ENCODERS and i % 50 == 7:
            m = with_position(m, float("nan"))
            n_nan += 1
        if resolve_topic(m.topic) == ENCODERS and i % 97 == 3:
            writer.write(conns[ENCODERS], m.log_time_ns, msgs.serialize(m.msg))      # sent twice
            n_dup += 1
        if resolve_topic(m.topic) == ENCODERS and i % 301 == 5:
            writer.write(conns[ENCODERS], m.log_time_ns, b"\x00\x01garbage")
            n_bad += 1
        writer.write(conns[resolve_topic(m.topic)], m.log_time_ns, msgs.serialize(m.msg))
        if resolve_topic(m.topic) == CELL and i % 4 == 0:
            writer.write(wrong, m.log_time_ns, msgs.serialize(msgs.imu(0, "x", [0, 0, 0], 0.1)))
            n_wrong += 1
        if i % 200 == 0:
            writer.write(other, m.log_time_ns, msgs.serialize(ts.types["std_msgs/msg/String"](data="hi")))
    writer.close()
    assert n_nan and n_dup and n_bad and n_wrong
    res = replay_bag(path, mech)
    enc = res.counts["crank_encoder"]
    assert enc.rejected_nonfinite == n_nan
    assert enc.rejected_duplicate == n_dup
    assert enc.used + enc.late == 1000 - n_nan
    problems = res.input.problems()
    assert problems[ENCODERS] == {"cannot deserialize sensor_msgs/msg/JointState: " + next(
        iter(problems[ENCODERS])).split(": ", 1)[1]: n_bad}
    wrong_key = "message type sensor_msgs/msg/Imu, expected geometry_msgs/msg/WrenchStamped or std_msgs/msg/Float64"
    assert problems[CELL] == {wrong_key: n_wrong}
    assert "/camera/info" not in problems                     # other topics are not read
    assert res.counts["rocker_pin_load"].used == 200
    assert len(res.estimates) == 201


def shifted(m: BagMessage, seconds: float, log_ns: int) -> BagMessage:
    """The same reading with its header stamp moved by ``seconds`` and a new log time."""
    msg = m.msg
    ns = msgs.time_to_ns(msg.header.stamp) + msgs.seconds_to_ns(seconds)
    if m.msgtype == msgs.JOINT_STATE:
        msg = msgs.joint_state(ns, msg.name, position=msg.position)
    else:
        f, t = msg.wrench.force, msg.wrench.torque
        msg = msgs.wrench_stamped(ns, msg.header.frame_id, [f.x, f.y, f.z], [t.x, t.y, t.z])
    return BagMessage(m.topic, m.msgtype, log_ns, msg)


def test_a_clock_jump_back_resets_the_estimator_and_is_reported(tmp_path, mech, messages):
    """After 1 s the rig's clock jumps back by 4 s (the same motion again)."""
    span = messages[-1].log_time_ns - messages[0].log_time_ns + 1_000_000
    again = [shifted(m, -4.0, m.log_time_ns + span) for m in messages]
    res = replay_bag(write_bag(tmp_path / "jump", messages + again), mech)
    assert len(res.jumps.jumps) == 1
    jump = res.jumps.jumps[0]
    assert jump.direction == "backwards" and abs((jump.from_ns - jump.to_ns) / 1e9 - 5.0) < 0.01
    assert res.health.resets == 1 and "backwards" in res.health.last_reset
    enc = res.counts["crank_encoder"]
    assert enc.received == 2000 and enc.used == 2000        # the first era is finished before the reset
    assert res.counts["rocker_pin_load"].used + sum(res.jumps.stale.values()) == 400
    assert len(res.estimates) == 402
    assert np.diff(res.estimates.t).min() < -4.9         # the estimates follow the new time base


def test_a_looping_bag_restarts_the_estimator_each_loop(tmp_path, mech, messages):
    """A 1 s bag played three times (same stamps, as ``ros2 bag play --loop`` records)."""
    span = messages[-1].log_time_ns - messages[0].log_time_ns + 1_000_000
    looped = [dataclasses.replace(m, log_time_ns=m.log_time_ns + k * span) for k in range(3) for m in messages]
    res = replay_bag(write_bag(tmp_path / "loop", looped), mech)
    assert [j.direction for j in res.jumps.jumps] == ["backwards", "backwards"]
    assert res.health.resets == 2
    enc = res.counts["crank_encoder"]
    assert enc.received == 3000 and enc.used == 3000 and enc.late == enc.too_old == 0
    assert len(res.estimates) == 3 * 201
    assert len(res.eras) == 3 and abs(res.duration - 3 * 0.999) < 1e-9
    assert np.bincount(res.estimates.era).tolist() == [201, 201, 201]


def test_a_corrupt_future_stamp_is_rejected_and_counted_not_a_jump(tmp_path, mech, messages):
    bad = list(messages)
    start = messages[0].log_time_ns
    k = next(i for i, m in enumerate(bad) if resolve_topic(m.topic) == ENCODERS and m.log_time_ns >= start + 500_000_000)
    bad[k] = shifted(bad[k], 1000.0, bad[k].log_time_ns)
    res = replay_bag(write_bag(tmp_path / "future", bad), mech)
    assert not res.jumps.jumps and res.health.resets == 0
    assert res.jumps.rejected == {ENCODERS: 1}
    enc = res.counts["crank_encoder"]
    assert enc.received == enc.used == 999
    assert res.counts["rocker_pin_load"].used == 200
    assert len(res.eras) == 1 and abs(res.duration - 0.999) < 0.002      # not 1000 s


def test_readings_later_than_the_reorder_window_go_in_late(tmp_path, mech, messages):
    late = [dataclasses.replace(m, log_time_ns=m.log_time_ns + 200_000_000) if resolve_topic(m.topic) == CELL else m
            for m in messages]
    late.sort(key=lambda m: m.log_time_ns)
    res = replay_bag(write_bag(tmp_path / "late", late), mech, ReplayOptions(reorder_window=0.05))
    cell = res.counts["rocker_pin_load"]
    assert res.out_of_order[CELL] > 150
    assert cell.late + cell.too_old > 150
    assert cell.used + cell.late + cell.too_old == 200
    # a wide enough window restores stamp order
    res = replay_bag(write_bag(tmp_path / "late2", late), mech, ReplayOptions(reorder_window=0.3))
    assert not res.out_of_order and res.counts["rocker_pin_load"].used == 200


def test_nothing_estimable_is_an_error(tmp_path, mech, messages):
    nan = [with_position(m, float("nan")) for m in messages if resolve_topic(m.topic) == ENCODERS]
    with pytest.raises(MbfgError, match="nothing could be estimated.*1000 not finite"):
        replay_bag(write_bag(tmp_path / "nan", nan), mech)
    imu = [BagMessage(ENCODERS, msgs.IMU, m.log_time_ns, msgs.imu(0, "x", [0, 0, 0], 0.1))
           for m in messages[:20] if resolve_topic(m.topic) == ENCODERS]
    with pytest.raises(MbfgError, match="no usable sensor reading.*message type sensor_msgs/msg/Imu"):
        replay_bag(write_bag(tmp_path / "imu", imu), mech)


# ---------------------------------------------------------------------------------------------
# damaged and truncated recordings (audit cases 4 and 5): read as far as they can be, every
# message the bag holds but that could not be read counted per topic, never a traceback

@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A 3 s simulated bag with ground truth (the file bytes are damaged in copies of it)."""
    return simulated_bag(tmp_path_factory.mktemp("recording") / "rec", "four_bar", 3.0)


def assert_every_message_accounted(res):
    for topic, st in res.input.stats.items():
        unread = st.problems.get(UNREADABLE, 0)
        assert st.messages + unread == st.in_bag, (topic, st.messages, unread, st.in_bag)


def crank_error_p99(res) -> float:
    """rad: the 99th percentile of |crank estimate - truth| after the first second (a percentile,
    because a damaged truth message can make one keyframe's error meaningless)."""
    from mbfg_ros.replay.metrics import compare
    c = compare(res.mech, res.estimates, res.truth, 1.0)
    err = np.abs(c.error_q[c.used, res.mech.index["crank_joint"]])
    return float(np.percentile(err[np.isfinite(err)], 99))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_a_damaged_mcap_is_read_around_the_damage_and_the_lost_messages_counted(tmp_path, mech, recording, seed):
    import random

    def corrupt(b):
        rng = random.Random(seed)
        for _ in range(25):                       # 25 places of 4 random bytes in the data
            i = rng.randrange(200, int(len(b) * 0.8))
            b[i:i + 4] = rng.randbytes(4)
        return bytes(b)
    bag = damaged_copy(recording, tmp_path / "damaged", corrupt)
    res = replay_bag(bag, mech)                  # no exception, whatever the damage
    assert res.input.damage.regions or res.input.problems()
    assert_every_message_accounted(res)
    enc = res.counts["crank_encoder"]
    assert enc.received > 2900 and len(res.estimates) > 550
    assert enc.received == enc.used + enc.late + enc.too_old + enc.rejected + enc.discarded + enc.pending
    assert crank_error_p99(res) < 0.02                 # rad: the damage costs a few readings, not the run


def test_a_damaged_bag_through_the_cli_prints_the_damage_and_no_traceback(tmp_path, recording, capsys):
    from conftest import CONFIG
    from mbfg_ros.cli.main import main

    def corrupt(b):
        b[5000:5040] = b"\xff" * 40               # inside the first messages of the chunk
        return bytes(b)
    bag = damaged_copy(recording, tmp_path / "damaged", corrupt)
    rc = main(["replay", str(bag), "--config", str(CONFIG / "four_bar.yaml"), "--no-progress",
               "--json", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err + out, err
    assert "Damaged bag: rec.mcap at byte" in out
    import json
    facts = json.loads((tmp_path / "r.json").read_text())
    assert facts["damage"]["regions"] and not facts["damage"]["truncated"]
    lost = {t: p[UNREADABLE] for t, p in facts["problems"].items() if UNREADABLE in p}
    assert sum(lost.values()) >= 1


def test_a_truncated_bag_is_read_up_to_the_cut(tmp_path, mech, recording):
    """What a killed recorder leaves: the file ends inside a chunk, without summary or footer
    (cut at 80 % of this small file, which is about 90 % of its messages: the message indexes
    and the summary are the rest)."""
    bag = damaged_copy(recording, tmp_path / "cut", lambda b: bytes(b[:int(len(b) * 0.8)]))
    res = replay_bag(bag, mech)
    assert res.input.damage.truncated and not res.input.damage.unknown_loss
    assert_every_message_accounted(res)
    enc = res.input.stats[ENCODERS]
    assert 0.8 * enc.in_bag < enc.messages < enc.in_bag and enc.problems[UNREADABLE] > 0
    assert res.duration > 2.4 and crank_error_p99(res) < 0.02
    # the bare file without metadata.yaml (or passed itself): read too, the loss is unknown
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "rec_0.mcap").write_bytes(next((tmp_path / "cut").glob("*.mcap")).read_bytes())
    for path in (bare, bare / "rec_0.mcap"):
        res = replay_bag(path, mech)
        assert res.input.damage.truncated and res.input.damage.unknown_loss
        assert res.counts["crank_encoder"].received == enc.messages


def test_a_file_that_is_no_bag_is_one_line(tmp_path, mech):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "rec.mcap").write_bytes(b"not an mcap file at all")
    with pytest.raises(MbfgError, match="is not an MCAP file"):
        replay_bag(tmp_path / "x", mech)


# ---------------------------------------------------------------------------------------------
# audit case 12: an isolated stamp out of line is rejected and counted, never a reset

@pytest.fixture(scope="module")
def run_with_truth():
    return simulated_messages("four_bar", duration=3.0, truth=True)


def crank_error_between(res, t_from: float, t_to: float) -> np.ndarray:
    from mbfg_ros.replay.metrics import compare
    c = compare(res.mech, res.estimates, res.truth, 0.0)
    sel = (res.estimates.t >= t_from) & (res.estimates.t < t_to)
    return np.abs(c.error_q[sel, res.mech.index["crank_joint"]])


def test_one_encoder_stamp_half_a_second_back_is_rejected_and_the_estimate_stays(tmp_path, mech, run_with_truth):
    bad = list(run_with_truth)
    k = next(i for i, m in enumerate(bad) if resolve_topic(m.topic) == ENCODERS and abs(m.log_time_ns - bad[0].log_time_ns - 1.5e9) < 5e5)
    bad[k] = shifted(bad[k], -0.5, bad[k].log_time_ns)
    res = replay_bag(write_bag(tmp_path / "back", bad), mech)
    assert not res.jumps.jumps and res.health.resets == 0
    assert res.jumps.rejected == {ENCODERS: 1}
    enc = res.counts["crank_encoder"]
    assert enc.received == enc.used == 2999
    err = crank_error_between(res, 1.5, 2.5)
    assert err.size == 200 and err.max() < 0.01, err.max()       # was 0.75 rad RMSE (a reset)


def test_a_second_of_decreasing_stamps_is_rejected_and_the_estimate_stays(tmp_path, mech, run_with_truth):
    """The audit's 1 s of stamps each 1 ms before the last (error peaked at 1.97 rad)."""
    bad = []
    start = run_with_truth[0].log_time_ns
    for m in run_with_truth:
        t = (m.log_time_ns - start) * 1e-9
        if resolve_topic(m.topic) == ENCODERS and 1.0 <= t < 2.0:
            m = shifted(m, -2 * (t - 1.0), m.log_time_ns)         # stamp 1 s - (t - 1 s): decreasing
        bad.append(m)
    res = replay_bag(write_bag(tmp_path / "decreasing", bad), mech)
    assert not res.jumps.jumps and res.health.resets == 0
    enc = res.counts["crank_encoder"]
    rejected = res.jumps.rejected[ENCODERS]
    assert 850 <= rejected <= 1000, rejected                      # all but the first 0.1 s of jitter
    assert enc.received + rejected == 3000
    assert enc.received == enc.used + enc.late + enc.too_old + enc.rejected + enc.discarded + enc.pending
    err = crank_error_between(res, 2.2, 3.0)
    assert err.max() < 0.02, err.max()
