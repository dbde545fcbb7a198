"""Namespaces move a rig and its estimator together: the config's topics are relative by
default, so with ``namespace:=rig1`` the rig publishes and the estimator subscribes under /rig1;
an absolute topic in the config stays where it is; /diagnostics names the node's fully
qualified name. Real processes over DDS.

Bounds: both sensors used (> 500 encoder readings of the 3 s run at 1 kHz, > 100 load-cell
readings at 200 Hz), crank angle RMSE < 0.01 rad after 1 s (the estimator starts at the truth)."""
from __future__ import annotations

import pytest

from conftest import CONFIG
from mbfg_ros.ros.launch_description import sim_rig_description
from mbfg_ros.testing.hil import HilRun

pytestmark = pytest.mark.ros


def test_a_namespace_moves_relative_inputs_and_absolute_ones_stay(tmp_path):
    text = (CONFIG / "four_bar.yaml").read_text()
    assert "topic: encoders\n" in text and "topic: rocker_pin/wrench\n" in text   # relative
    config = tmp_path / "four_bar_ns.yaml"
    config.write_text(text.replace("urdf: ../urdf/four_bar.urdf", f"urdf: {CONFIG.parent}/urdf/four_bar.urdf")
                      .replace("topic: encoders\n", "topic: /plant/encoders\n"))
    description = sim_rig_description(str(config), duration=3.0, namespace="rig1",
                                      rig_parameters={"wait_for_truth": True})
    with HilRun(config, tmp_path / "run", description=description,
                watch=("joint_states", "/diagnostics")) as run:
        assert run.names.namespace == "/rig1/mbfg_estimator"
        run.wait_for_estimates(timeout=90)
        topics = dict(run.monitor.get_topic_names_and_types())
        run.wait_for_rig(timeout=120)
        run.wait_caught_up(timeout=120)
        run.monitor.wait_for(lambda m: m.node_status("input queue") is not None, 10.0)
        status = run.monitor.sensor_status()              # "/rig1/mbfg_estimator: sensor ..."
        err = run.monitor.tracking(after=1.0)
        coverage = run.monitor.coverage()
        names = set(run.monitor.status)
    assert "/rig1/rocker_pin/wrench" in topics and "/plant/encoders" in topics, sorted(topics)
    assert "/rocker_pin/wrench" not in topics and "/rig1/plant/encoders" not in topics
    assert "/rig1/mbfg_estimator/joint_states" in topics
    assert int(status["crank_encoder"].values["used"]) > 500, (status, run.logs_tail())
    assert int(status["rocker_pin_load"].values["used"]) > 100, (status, run.logs_tail())
    assert err["crank_joint"]["q_rmse"] < 0.01, (err, coverage, run.logs_tail())
    assert names and all(name.startswith("/rig1/mbfg_estimator: ") for name in names), names
