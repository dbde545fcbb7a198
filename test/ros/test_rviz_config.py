"""config/four_bar.rviz: valid YAML that shows the estimator's model, TF and forces."""
from __future__ import annotations

from pathlib import Path

import yaml

from mbfg_ros.io.estimate_messages import OutputNames, output_topics

RVIZ = Path(__file__).resolve().parents[2] / "config" / "four_bar.rviz"


def _displays() -> list[dict]:
    data = yaml.safe_load(RVIZ.read_text())
    return data["Visualization Manager"]["Displays"]


def test_rviz_config_shows_the_estimated_model_tf_and_forces(four_bar):
    data = yaml.safe_load(RVIZ.read_text())
    vm = data["Visualization Manager"]
    assert vm["Global Options"]["Fixed Frame"] == four_bar.urdf.root_link
    by_class = {}
    for d in vm["Displays"]:
        by_class.setdefault(d["Class"], []).append(d)
    (model,) = by_class["rviz_default_plugins/RobotModel"]
    assert model["Description Source"] == "Topic"
    assert model["Description Topic"]["Value"] == OutputNames().topic("robot_description")
    assert model["Description Topic"]["Durability Policy"] == "Transient Local"
    assert by_class["rviz_default_plugins/TF"]
    wrench_topics = {d["Topic"]["Value"] for d in by_class["rviz_default_plugins/Wrench"]}
    forces = {t for t, kind in output_topics(four_bar, OutputNames()).items() if "/forces/" in t}
    assert wrench_topics == forces


def test_rviz_view_faces_the_vertical_plane_of_the_linkage(four_bar):
    """REP 103: the four-bar moves in the world's x-z plane; the view looks along +y at it,
    z up (an orbit camera at yaw -90 deg, pitch 0)."""
    import math
    view = yaml.safe_load(RVIZ.read_text())["Visualization Manager"]["Views"]["Current"]
    assert view["Class"] == "rviz_default_plugins/Orbit"
    assert math.isclose(view["Yaw"] % (2 * math.pi), 1.5 * math.pi) and view["Pitch"] == 0
    assert four_bar.config.gravity == (0.0, 0.0, -9.81)
