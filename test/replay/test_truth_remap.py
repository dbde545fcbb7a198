"""Ground truth recorded under other names (another simulator, an instrument) is scored through
``--remap TRUTH_TOPIC:=BAG_TOPIC``; truth that cannot be used is said, never silently dropped."""
from __future__ import annotations

import dataclasses

import pytest

from support.replay_bags import simulated_messages, write_bag
from support.simulations import config_mechanism
from mbfg_ros.errors import MbfgError
from mbfg_ros.replay.bag_input import parse_remap
from mbfg_ros.replay.metrics import compare
from mbfg_ros.replay.report import facts, format_summary
from mbfg_ros.replay.session import ReplayOptions, replay_bag

OTHER = "/gazebo"          # where the other tool put its truth


@pytest.fixture(scope="module")
def renamed_bag(tmp_path_factory):
    """2 s of the four-bar with its truth under /gazebo instead of /truth."""
    messages = [dataclasses.replace(m, topic=m.topic.replace("/truth/", OTHER + "/", 1))
                for m in simulated_messages("four_bar", duration=2.0, truth=True)]
    return write_bag(tmp_path_factory.mktemp("remap") / "renamed", messages)


def _remap(mech, *pairs):
    return parse_remap([f"{a}:={b}" for a, b in pairs], mech)


def test_remapped_truth_is_scored(renamed_bag):
    mech = config_mechanism("four_bar")
    plain = replay_bag(renamed_bag, mech, ReplayOptions())
    assert plain.truth is None                                  # nothing under /truth
    remap = _remap(mech, ("/truth/joint_states", f"{OTHER}/joint_states"),
                   ("/truth/forces/coupler_rocker", f"{OTHER}/forces/coupler_rocker"))
    res = replay_bag(renamed_bag, mech, ReplayOptions(remap=remap))
    assert res.truth is not None and res.truth.q is not None
    c = compare(mech, res.estimates, res.truth, skip=1.0)
    assert c.samples == 200 and c.rmse["crank_joint"]["position"] < 5e-3
    assert "coupler_rocker" in c.rmse_forces
    assert res.input.stats[f"{OTHER}/joint_states"].config_topic == "/truth/joint_states"


def test_a_remapped_truth_topic_the_bag_lacks_is_a_problem_line(renamed_bag):
    mech = config_mechanism("four_bar")
    remap = _remap(mech, ("/truth/joint_states", "/nowhere/joint_states"))
    res = replay_bag(renamed_bag, mech, ReplayOptions(remap=remap))
    f = facts(res, None, {})
    assert f["truth_problems"] == ["/nowhere/joint_states (read as /truth/joint_states by --remap) is "
                                   "not in the bag: that truth is not scored"]
    assert "\nTruth: /nowhere/joint_states" in format_summary(f, res)


def test_truth_without_the_configs_joints_is_counted(tmp_path):
    mech = config_mechanism("four_bar")
    messages = simulated_messages("four_bar", duration=1.0, truth=True)
    for m in messages:
        if m.topic == "/truth/joint_states":
            m.msg.name = [f"other_{n}" for n in m.msg.name]
    res = replay_bag(write_bag(tmp_path / "other_names", messages), mech, ReplayOptions())
    assert res.truth is None and res.truth_unmatched == 200
    assert "200 joint-state messages of the truth lack some of the config's joints" in \
        " ".join(facts(res, None, {})["truth_problems"])


def test_remap_names_sensor_and_truth_topics_when_the_source_is_unknown():
    mech = config_mechanism("four_bar")
    with pytest.raises(MbfgError, match="not a sensor or truth topic.*/truth/joint_states"):
        _remap(mech, ("/nope", "/x"))
