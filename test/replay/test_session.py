"""A simulated bag through replay_bag: accuracy against the truth, the node's output topics (as
the rclpy under test reads them: marker distro), lagged output, both storages and a rosbag1,
other rigs, reading and writing in own processes."""
from __future__ import annotations

import numpy as np
import pytest

from support.replay_bags import EPOCH_NS, simulated_bag
from support.simulations import config_mechanism
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.bag_reader import bag_topics, read_bag
from mbfg_ros.io.estimate_messages import OutputNames, output_topics
from mbfg_ros.io.messages import time_to_ns
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.residuals import sensor_residuals
from mbfg_ros.replay.session import ReplayOptions, replay_bag

DURATION = 2.0

# RMSE bounds after the first second, for the four-bar at the config's default rates and noise
# (encoder 1 deg at 1 kHz, load cell 2 N at 200 Hz). Measured: ~1e-3 rad, ~3e-3 rad/s,
# ~1.5e-2 rad/s^2, ~0.1 N; the bounds leave room for estimator changes, not for breakage.
BOUNDS = {"position": 5e-3, "velocity": 2e-2, "acceleration": 0.15}
FORCE_BOUND = 1.0          # N, closure force components and the load cell


@pytest.fixture(scope="module")
def four_bar_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replay")
    bag = simulated_bag(tmp / "fb", "four_bar", DURATION, delay=0.002)
    mech = config_mechanism("four_bar")
    res = replay_bag(bag, mech, ReplayOptions(out=tmp / "out", covariance=True))
    return mech, res, tmp / "out"


def test_accuracy_against_the_truth(four_bar_run):
    mech, res, _ = four_bar_run
    assert abs(res.duration - (DURATION - 0.001)) < 1e-9
    assert len(res.estimates) == int(DURATION * 200) + 1
    c = compare(mech, res.estimates, res.truth, skip=1.0)
    assert c.samples == 200
    for joint in mech.joint_names:
        for key, bound in BOUNDS.items():
            assert c.rmse[joint][key] < bound, (joint, key, c.rmse[joint][key])
    for comp in ("force_x", "force_y"):
        assert c.rmse_forces["coupler_rocker"][comp] < FORCE_BOUND
    assert c.rmse_forces["rocker_pin_load"]["reading"] < FORCE_BOUND
    # every reading was used, in order, nothing problematic
    assert res.counts["crank_encoder"].used == 2000 and res.counts["rocker_pin_load"].used == 400
    assert not res.input.problems() and not res.out_of_order and not res.jumps.jumps
    assert res.epoch_ns == EPOCH_NS and res.first_stamp == 0.0
    assert res.timings["estimator"] > 0 and res.realtime_factor > 0


def test_residuals_look_like_the_sensor_noise(four_bar_run):
    mech, res, _ = four_bar_run
    r = sensor_residuals(mech, res.layout, res.estimates, res.samples)
    for name in ("crank_encoder", "rocker_pin_load"):
        s = r[name].summary()
        assert s["samples"] == res.counts[name].used
        assert 0.7 < s["rms_sigma"][0] < 1.3, (name, s)


def test_output_bag_has_the_node_topics(four_bar_run):
    mech, res, out = four_bar_run
    topics = bag_topics(out)
    expected = output_topics(mech, OutputNames(), covariance=False)
    assert {t: v["type"] for t, v in topics.items()} == expected
    n = len(res.estimates)
    for t in ("/mbfg_estimator/joint_states", "/mbfg_estimator/dynamic_joint_states",
              "/mbfg_estimator/forces/coupler_rocker", "/mbfg_estimator/forces/rocker_pin_load", "/tf"):
        assert topics[t]["count"] == n
    assert topics["/tf_static"]["count"] == 1
    assert topics["/diagnostics"]["count"] == int(DURATION) + 1       # at 0, 1 and 2 s
    js = [r.msg for r in read_bag(out, topics=["/mbfg_estimator/joint_states"])]
    assert time_to_ns(js[0].header.stamp) == EPOCH_NS
    assert js[0].name == mech.joint_names
    np.testing.assert_array_equal(np.array([m.position for m in js]), res.estimates.q)
    np.testing.assert_array_equal(np.array([m.velocity for m in js]), res.estimates.v)
    force = next(iter(read_bag(out, topics=["/mbfg_estimator/forces/coupler_rocker"]))).msg
    assert force.header.frame_id == "rocker_tip"
    assert force.wrench.force.x == res.estimates.closure_force[0, 0, 0]
    tf = next(iter(read_bag(out, topics=["/tf"]))).msg
    pairs = {(x.header.frame_id, x.child_frame_id) for x in tf.transforms}
    movable = {(j.parent, j.child) for j in mech.urdf.tree if j.type != "fixed"}
    assert pairs == movable
    diag = next(iter(read_bag(out, topics=["/diagnostics"]))).msg
    names = [s.name for s in diag.status]
    assert "/mbfg_estimator: solver" in names and "/mbfg_estimator: replay" in names


@pytest.mark.distro
def test_output_bag_is_what_this_distributions_rclpy_reads(four_bar_run):
    """The output bag as a node of the distribution under test sees it (Kilted, or Jazzy with
    ``make test ROS_DISTRO=jazzy``): every message deserializes with its rclpy class and comes back
    unchanged (rclpy's CDR read by rosbags gives the stored bytes again: rclpy's own padding bytes
    are not zeroed), and each topic's type hash is the one rclpy's publisher of that type announces
    (what ``ros2 bag record`` stores and ``ros2 bag play`` matches)."""
    from rclpy.serialization import deserialize_message, serialize_message
    from rosbags.rosbag2 import Reader

    from mbfg_ros.ros.background_node import BackgroundNode
    from mbfg_ros.ros.message_classes import message_class
    from mbfg_ros.ros.processes import fresh_domain_id
    _, _, out = four_bar_run
    listener = BackgroundNode(fresh_domain_id(), "output_bag_types")
    node = listener.node
    try:
        with Reader(out) as reader:
            for c in reader.connections:
                node.create_publisher(message_class(c.msgtype), c.topic, 1)
                hashes = {str(i.topic_type_hash) for i in node.get_publishers_info_by_topic(c.topic)
                          if i.node_name == node.get_name()}
                assert hashes == {c.digest}, (c.topic, c.msgtype)
            checked = 0
            for c, _, raw in reader.messages():
                data = bytes(raw)
                ros = serialize_message(deserialize_message(data, message_class(c.msgtype)))
                back = msgs.typestore().deserialize_cdr(ros, c.msgtype)
                assert bytes(msgs.serialize(back)) == data, c.topic
                checked += 1
            assert checked == sum(c.msgcount for c in reader.connections) > 0
    finally:
        listener.close()


def test_lagged_output_smooths_every_keyframe_once(tmp_path):
    bag = simulated_bag(tmp_path / "fb", "four_bar", 2.0, storage="sqlite3")     # sqlite3 in and out
    mech = config_mechanism("four_bar")
    lagged = replay_bag(bag, mech, ReplayOptions(lagged=True, out=tmp_path / "out", storage="sqlite3"))
    k = lagged.estimates.keyframe
    assert np.all(np.diff(k) == 1) and k[0] == 0 and len(k) == 401
    assert np.all(np.diff(lagged.estimates.t) > 0)
    assert bag_topics(tmp_path / "out")["/mbfg_estimator/joint_states"]["count"] == 401
    assert (tmp_path / "out" / "out.db3").exists()
    c = compare(mech, lagged.estimates, lagged.truth, skip=0.5)
    assert c.rmse["crank_joint"]["position"] < BOUNDS["position"]
    assert c.rmse["crank_joint"]["velocity"] < BOUNDS["velocity"]


@pytest.mark.slow
def test_gyro_rig_in_a_rosbag1(tmp_path):
    """four_bar_gyro: the gyro path (decoding Imu, residuals per measured axis), read from a
    rosbag1 converted from the simulated rosbag2 with rosbags."""
    from rosbags.convert.converter import convert
    from rosbags.typesys import Stores, get_typestore

    src = simulated_bag(tmp_path / "fbg", "four_bar_gyro", 2.0)
    dst = tmp_path / "fbg.bag"
    convert([src], dst, "sqlite3", 8, None, "file", None, get_typestore(Stores.ROS1_NOETIC), [], [], [], [])
    mech = config_mechanism("four_bar_gyro")
    res = replay_bag(dst, mech)
    assert res.counts["coupler_gyro"].used == 800
    c = compare(mech, res.estimates, res.truth, skip=1.0)
    assert c.rmse["crank_joint"]["velocity"] < BOUNDS["velocity"]
    r = sensor_residuals(mech, res.layout, res.estimates, res.samples)["coupler_gyro"]
    assert r.axes == ["z"] and r.r.shape == (800, 1)
    assert 0.7 < r.summary()["rms_sigma"][0] < 1.3


def test_reading_and_writing_in_their_own_processes_changes_nothing(tmp_path):
    bag = simulated_bag(tmp_path / "fb", "four_bar", 1.0, delay=0.001)
    mech = config_mechanism("four_bar")
    one = replay_bag(bag, mech, ReplayOptions(out=tmp_path / "one", processes=False))
    two = replay_bag(bag, mech, ReplayOptions(out=tmp_path / "two", processes=True))
    assert "reader_process" in two.timings and "writer_process" in two.timings
    assert two.timings["reader_cpu"] > 0 and two.timings["writer_cpu"] > 0 and two.cpu_time > two.timings["cpu"]
    assert "reader_process" not in one.timings
    np.testing.assert_array_equal(one.estimates.q, two.estimates.q)
    np.testing.assert_array_equal(one.estimates.closure_force, two.estimates.closure_force)
    np.testing.assert_array_equal(one.truth.q.y, two.truth.q.y)
    assert {k: vars(v) for k, v in one.counts.items()} == {k: vars(v) for k, v in two.counts.items()}
    assert {t: s.messages for t, s in one.input.stats.items()} == {t: s.messages for t, s in two.input.stats.items()}
    assert one.output["topics"] == two.output["topics"] == bag_topics(tmp_path / "two")
    a = [r.msg.position.tolist() for r in read_bag(tmp_path / "one", ["/mbfg_estimator/joint_states"])]
    b = [r.msg.position.tolist() for r in read_bag(tmp_path / "two", ["/mbfg_estimator/joint_states"])]
    assert a == b
    from rosbags.highlevel import AnyReader       # every message in the same order, byte for byte
    with AnyReader([tmp_path / "one"]) as ra, AnyReader([tmp_path / "two"]) as rb:   # but timings
        a, b = ([(c.topic, ns, bytes(d) if c.topic != "/diagnostics" else b"") for c, ns, d in r.messages()]
                for r in (ra, rb))
    assert a == b


def test_a_failing_reader_process_is_a_clear_error(tmp_path):
    import shutil

    from mbfg_ros.errors import MbfgError
    from mbfg_ros.replay.bag_input import BagInput
    from mbfg_ros.replay.pipeline import ReaderProcess

    bag = simulated_bag(tmp_path / "fb", "four_bar", 1.0, truth=False)
    mech = config_mechanism("four_bar")
    inp = BagInput(bag, mech)
    shutil.rmtree(bag)                        # gone before the reader process opens it
    with pytest.raises(MbfgError, match="no such bag"):
        list(ReaderProcess(inp, None, mech.config.source).records())


def test_a_failing_writer_process_is_a_clear_error_and_leaves_no_bag(tmp_path):
    from mbfg_ros.errors import MbfgError
    from mbfg_ros.replay.pipeline import WriterProcess

    with pytest.raises(MbfgError, match="nope.yaml"):
        with WriterProcess(tmp_path / "out", tmp_path / "nope.yaml", OutputNames()):
            pass
    assert not (tmp_path / "out").exists()


def test_known_input_and_prismatic_joint(tmp_path):
    """slider_crank: two encoders in one JointState, a known motor torque on /joint_commands (a
    sine), a prismatic slider (residuals in m, effort RMSE of the actuated crank)."""
    bag = simulated_bag(tmp_path / "sc", "slider_crank", 1.5,
                        scenario={"input_profile": "sine", "input_amplitude": 0.5, "input_start": 0.2})
    mech = config_mechanism("slider_crank")
    res = replay_bag(bag, mech)
    assert res.counts["command:crank_joint"].used == 1500
    assert res.counts["slider_encoder"].used == 1500 and res.input.stats["/encoders"].messages == 1500
    c = compare(mech, res.estimates, res.truth, skip=0.5)
    assert set(c.rmse["crank_joint"]) == {"position", "velocity", "acceleration", "effort"}
    # a known input is what was commanded, up to one command period: a keyframe may close before
    # the command stamped at its time arrives (the estimator does not wait for commands)
    assert c.rmse["crank_joint"]["effort"] < 0.5 * np.pi * 0.5 * 1e-3 * 1.5
    assert c.rmse["slider_joint"]["position"] < 2e-3
    r = sensor_residuals(mech, res.layout, res.estimates, res.samples)
    assert r["slider_encoder"].unit == "m" and r["crank_encoder"].unit == "rad"
    assert 0.5 < r["slider_encoder"].summary()["rms_sigma"][0] < 1.5


def test_angles_are_scored_unwrapped_and_whole_turn_slips_counted(four_bar_run):
    import copy
    import dataclasses
    mech, res, _ = four_bar_run
    j = mech.index["crank_joint"]
    base = compare(mech, res.estimates, res.truth, skip=1.0)
    assert base.turn_slips["crank_joint"] == 0
    # a truth published wrapped into [-pi, pi) and started one turn away scores the same
    q = res.truth.q.y.copy()
    q[:, j] = (q[:, j] + 2 * np.pi + np.pi) % (2 * np.pi) - np.pi + 2 * np.pi
    wrapped = dataclasses.replace(res.truth, q=type(res.truth.q)(res.truth.q.t, q))
    c = compare(mech, res.estimates, wrapped, skip=1.0)
    assert abs(c.rmse["crank_joint"]["position"] - base.rmse["crank_joint"]["position"]) < 1e-9
    assert c.turn_slips["crank_joint"] == 0
    # an estimate that falls a whole turn behind halfway is no longer 'right modulo 2 pi'
    est = copy.deepcopy(res.estimates)
    est.q[est.t > 1.5, j] -= 2 * np.pi
    c = compare(mech, est, res.truth, skip=1.0)
    assert c.turn_slips["crank_joint"] == 1
    assert c.rmse["crank_joint"]["position"] > 3.0
