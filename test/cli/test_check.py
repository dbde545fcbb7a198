"""`mbfg check` on every example rig."""
from __future__ import annotations

import json

import pytest

from conftest import CONFIG
from mbfg_ros.cli.main import main

DOF = {"four_bar": 1, "four_bar_gyro": 1, "five_bar": 2, "five_bar_gyro": 2, "slider_crank": 1,
       "spatial_rsur": 1}


@pytest.mark.parametrize("name", sorted(DOF))
def test_check_prints_the_dof_and_writes_json(name, tmp_path, capsys):
    out_json = tmp_path / "facts.json"
    assert main(["check", str(CONFIG / f"{name}.yaml"), "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert f"Degrees of freedom: {DOF[name]}" in text
    assert "Sensors" in text and "Observability" in text
    facts = json.loads(out_json.read_text())
    assert facts["dof"] == DOF[name]
    assert facts["observable"] is True
    assert len(facts["coordinates"]) >= facts["dof"]
    assert all({"name", "kind", "topic", "rate"} <= set(s) for s in facts["sensors"])


def test_unobservable_dof_is_named(tmp_path, capsys):
    """A five-bar with one crank encoder: the other crank cannot be seen."""
    import yaml
    doc = yaml.safe_load((CONFIG / "five_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(CONFIG.parent / "urdf" / "five_bar.urdf")
    doc["mechanism"]["gravity"] = [0.0, 0.0, 0.0]
    doc["sensors"]["encoders"] = doc["sensors"]["encoders"][:1]
    p = tmp_path / "one_encoder.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["check", str(p), "--json", str(tmp_path / "f.json")]) == 0
    facts = json.loads((tmp_path / "f.json").read_text())
    assert facts["observable"] is False
    assert any(u.startswith("crank2_joint") for u in facts["unobservable"])
    assert "NOT observable" in capsys.readouterr().out


def test_check_shows_each_joints_drive_model(tmp_path, capsys):
    """The joint line states friction (with its tanh scale), armature and offset; the JSON too."""
    import yaml
    doc = yaml.safe_load((CONFIG / "slider_crank.yaml").read_text())
    doc["mechanism"]["urdf"] = str(CONFIG.parent / "urdf" / "slider_crank.urdf")
    doc["joints"]["crank_joint"].update(armature=0.02, offset=-0.15, viscous=0.01)
    p = tmp_path / "drive.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["check", str(p), "--json", str(tmp_path / "f.json")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if " crank_joint " in x and " DOF" in x)
    assert "friction v=0.01 c=0" in line and "armature 0.02" in line and "offset -0.15" in line
    crank = next(c for c in json.loads((tmp_path / "f.json").read_text())["coordinates"] if c["name"] == "crank_joint")
    assert crank["armature"] == 0.02 and crank["offset"] == -0.15
    slider = next(c for c in json.loads((tmp_path / "f.json").read_text())["coordinates"] if c["name"] == "slider_joint")
    assert slider["coulomb"] == 0.2 and slider["coulomb_velocity"] == 0.01


def test_check_states_the_keyframe_rate_a_fast_rig_needs_and_warns_when_too_low(tmp_path, capsys):
    from pathlib import Path
    from mbfg_ros.cli.main import main
    root = Path(__file__).resolve().parent.parent.parent
    assert main(["check", str(root / "config" / "fast_crank.yaml")]) == 0
    out = capsys.readouterr().out
    assert "top speed 80 rad/s needs keyframes at 400 Hz" in out and "WARNING" not in out
    text = (root / "config" / "fast_crank.yaml").read_text().replace("../urdf/", str(root / "urdf") + "/")
    (tmp_path / "slow.yaml").write_text(text + "estimator:\n  keyframe_rate: 200.0\n")
    assert main(["check", str(tmp_path / "slow.yaml")]) == 0
    out = capsys.readouterr().out
    assert "WARNING: keyframe_rate 200 Hz is below the 400 Hz a top speed of 80 rad/s needs" in out
    assert "integration noise is raised" in out


def test_check_reads_the_top_speed_from_a_recording(tmp_path, capsys):
    from support.replay_bags import simulated_bag
    from mbfg_ros.cli.main import main
    bag = simulated_bag(tmp_path / "fb", "four_bar", 1.0, truth=False, scenario={"initial_dof_velocity": (6.0,)})
    assert main(["check", str(CONFIG / "four_bar.yaml"), "--bag", str(bag), "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    assert "top DOF speed" in out and "needs keyframes at 200 Hz" in out
    import json
    b = json.loads((tmp_path / "c.json").read_text())["bag_speed"]
    assert 5.0 < b["top_speed"] < 20.0 and b["readings"]["crank_encoder"] == 1000


@pytest.mark.parametrize("rig,warns", [("four_bar_gyro", True), ("four_bar", False)])
def test_check_warns_of_a_model_error_state_without_direct_position_sensing(rig, warns, tmp_path, capsys):
    """estimator.model_error on a rig whose DOF positions are seen only through the dynamics (a
    coupler gyro) is named with a WARNING; with a crank encoder it is not."""
    import yaml
    doc = yaml.safe_load((CONFIG / f"{rig}.yaml").read_text())
    doc["mechanism"]["urdf"] = str(CONFIG.parent / "urdf" / "four_bar.urdf")
    doc["estimator"]["model_error"] = {"random_walk": 20.0}
    p = tmp_path / "rig.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["check", str(p), "--json", str(tmp_path / "f.json")]) == 0
    text = capsys.readouterr().out
    facts = json.loads((tmp_path / "f.json").read_text())
    assert facts["estimator"]["model_error_random_walk"] == 20.0
    assert "model-error forces (random walk 20 per sqrt(s))" in text
    assert ("WARNING: estimator.model_error with the DOF positions (crank_joint)" in text) == warns
    assert (facts["model_error_warning"] is not None) == warns


@pytest.mark.parametrize("threshold,warns", [(3e-3, True), (1e-4, False)])
def test_check_warns_of_gravity_estimation_without_direct_position_sensing_unless_tight(
        threshold, warns, tmp_path, capsys):
    """A gravity scale on the coupler-gyro four-bar is named with a WARNING at the default
    relinearisation threshold, not at the 1e-4 rad its config file sets."""
    import yaml
    doc = yaml.safe_load((CONFIG / "four_bar_gyro.yaml").read_text())
    doc["mechanism"]["urdf"] = str(CONFIG.parent / "urdf" / "four_bar.urdf")
    doc["estimator"].update(estimate_gravity=True, relinearize_threshold=threshold)
    p = tmp_path / "rig.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert main(["check", str(p)]) == 0
    text = capsys.readouterr().out
    assert ("WARNING: estimate_gravity with the DOF positions (crank_joint)" in text) == warns
    if warns:
        assert "relinearize_threshold 0.003" in text and "set relinearize_threshold to 0.0001" in text
