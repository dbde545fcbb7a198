"""Bad input gives a clear message naming the file, the field and the value, and exit code 2."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from conftest import CONFIG, ROOT
from mbfg_ros.cli.main import main

FOUR_BAR = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())


def write_config(tmp_path, mutate, name="rig.yaml"):
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["mechanism"]["urdf"] = str(ROOT / "urdf" / "four_bar.urdf")
    mutate(doc)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def check_fails(capsys, path, *fragments):
    rc = main(["check", str(path)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: ")
    assert "Traceback" not in err
    for frag in fragments:
        assert frag in err, f"{frag!r} not in: {err}"
    return err


def test_unknown_frame_in_closure(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["closures"][0].update(frame_b="roker_tip"))
    check_fails(capsys, p, str(p), "closures[0].frame_b", "roker_tip", "did you mean 'rocker_tip'")


def test_unknown_joint_in_encoder(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["sensors"]["encoders"][0].update(joint="crank"))
    check_fails(capsys, p, "sensors.encoders[0].joint", "'crank'", "unknown joint")


def test_unknown_link_for_a_gyro(tmp_path, capsys):
    def mutate(d):
        d["sensors"]["gyros"] = [{"name": "g", "frame": "copler", "noise": 0.01, "topic": "/imu"}]
    p = write_config(tmp_path, mutate)
    check_fails(capsys, p, "sensors.gyros[0].frame", "copler", "did you mean 'coupler'")


def test_wrong_type(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["sensors"]["encoders"][0].update(noise="one degree"))
    check_fails(capsys, p, "sensors.encoders[0].noise", "expected a number", "one degree")


def test_a_number_in_exponent_notation_without_a_dot_is_a_number(tmp_path):
    """YAML 1.1 (PyYAML) reads 6e-4 as the string '6e-4'; the config takes it as the number."""
    from mbfg_ros.model.config import load_rig_config
    p = write_config(tmp_path, lambda d: d["estimator"].setdefault("noise", {}).update(
        integration_position="6e-4", integration_velocity="1E-2"))
    noise = load_rig_config(p).estimator.noise
    assert noise.integration_position == 6e-4 and noise.integration_velocity == 1e-2


def test_missing_field(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["sensors"]["encoders"][0].pop("topic"))
    check_fails(capsys, p, "sensors.encoders[0].topic", "required")


def test_negative_noise(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["sensors"]["load_cells"][0].update(noise=-2.0))
    check_fails(capsys, p, "sensors.load_cells[0].noise", "greater than zero", "-2.0")


def test_a_sensor_time_offset_is_read_and_bounded(tmp_path, capsys):
    """``time_offset`` (s) on every sensor kind; a second or more (ms written as s) is refused."""
    from mbfg_ros.model.config import load_rig_config

    def mutate(d):
        d["sensors"]["encoders"][0]["time_offset"] = 0.003
        d["sensors"]["load_cells"][0]["time_offset"] = -0.002
        d["sensors"]["gyros"] = [{"name": "g", "frame": "coupler", "noise": 0.01, "topic": "/imu",
                                  "time_offset": 0.001}]
    cfg = load_rig_config(write_config(tmp_path, mutate))
    assert (cfg.sensors.encoders[0].time_offset, cfg.sensors.load_cells[0].time_offset,
            cfg.sensors.gyros[0].time_offset) == (0.003, -0.002, 0.001)
    assert main(["check", str(write_config(tmp_path, mutate))]) == 0      # `mbfg check` states it
    shown = [ln for ln in capsys.readouterr().out.splitlines() if "clock" in ln]
    late = {ln.split()[0]: ln.split("clock ")[1] for ln in shown}
    assert late == {"crank_encoder": "3 ms late", "rocker_pin_load": "-2 ms late", "g": "1 ms late"}
    p = write_config(tmp_path, lambda d: d["sensors"]["encoders"][0].update(time_offset=3.0), "bad.yaml")
    check_fails(capsys, p, "sensors.encoders[0].time_offset", "must be from -1 to 1 s", "3.0")


def test_misspelt_field(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["estimator"].update(keyframe_hz=100))
    check_fails(capsys, p, "estimator.keyframe_hz", "unknown field", "did you mean 'keyframe_rate'")


def test_bad_closure_type(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["closures"][0].update(type="hinge"))
    check_fails(capsys, p, "closures[0].type", "must be one of", "hinge")


def test_closure_that_cannot_be_assembled(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["frames"][1].update(xyz=[50.0, 0.0, 0.0]))
    check_fails(capsys, p, "cannot be assembled", "coupler_rocker")


def test_dof_that_is_not_independent(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["mechanism"].update(dof=["crank_joint", "rocker_joint"]))
    check_fails(capsys, p, "degree(s) of freedom", "mechanism.dof")


def test_model_error_random_walk_is_checked(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["estimator"].update(model_error={"random_walk": -1.0}))
    check_fails(capsys, p, "estimator.model_error.random_walk", "must not be negative", "-1.0")
    p = write_config(tmp_path, lambda d: d["estimator"].update(model_error={"random_walk": 10.0, "prior": 0}))
    check_fails(capsys, p, "estimator.model_error.prior", "greater than zero")
    p = write_config(tmp_path, lambda d: d["estimator"].update(model_error={"randomwalk": 10.0}))
    check_fails(capsys, p, "estimator.model_error.randomwalk", "unknown field")


def test_the_search_share_of_a_core_is_read_and_bounded(tmp_path, capsys):
    from mbfg_ros.model.config import parse_rig_config
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["estimator"]["model_uncertainty"] = {"background_share": 0.25}
    assert parse_rig_config(doc, source=CONFIG / "four_bar.yaml").estimator.model_uncertainty.background_share == 0.25
    for bad in (0, 1.5):
        p = write_config(tmp_path, lambda d: d["estimator"].update(model_uncertainty={"background_share": bad}))
        check_fails(capsys, p, "estimator.model_uncertainty.background_share", str(bad))


def test_model_error_is_read():
    from mbfg_ros.model.config import ModelErrorConfig, parse_rig_config
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["estimator"]["model_error"] = {"random_walk": 30.0, "prior": 5.0}
    cfg = parse_rig_config(doc, source=CONFIG / "four_bar.yaml").estimator
    assert cfg.model_error == ModelErrorConfig(30.0, 5.0) and cfg.model_error.enabled
    assert not parse_rig_config(FOUR_BAR, source=CONFIG / "four_bar.yaml").estimator.model_error.enabled


def test_the_input_model_is_read_and_checked(tmp_path, capsys):
    from mbfg_ros.model.config import parse_rig_config
    doc = yaml.safe_load((CONFIG / "four_bar.yaml").read_text())
    doc["estimator"]["input_model"] = "jerk"
    doc["estimator"]["noise"].update(jerk_walk=5.0, input_rate_walk=50.0)
    cfg = parse_rig_config(doc, source=CONFIG / "four_bar.yaml").estimator
    assert (cfg.input_model, cfg.noise.jerk_walk, cfg.noise.input_rate_walk) == ("jerk", 5.0, 50.0)
    assert parse_rig_config(FOUR_BAR, source=CONFIG / "four_bar.yaml").estimator.input_model == "random_walk"
    # input_rate_walk auto (the default): the input walk times the top speed, or times 2 rad/s
    doc["estimator"]["noise"].pop("input_rate_walk")
    doc["estimator"]["noise"]["input_random_walk"] = 4.0
    assert parse_rig_config(doc, source=CONFIG / "four_bar.yaml").estimator.noise.input_rate_walk == 8.0
    doc["mechanism"]["top_speed"] = 50.0
    assert parse_rig_config(doc, source=CONFIG / "four_bar.yaml").estimator.noise.input_rate_walk == 200.0
    p = write_config(tmp_path, lambda d: d["estimator"].update(input_model="jerky"))
    check_fails(capsys, p, "estimator.input_model", "jerky", "random_walk, integrated, jerk")
    p = write_config(tmp_path, lambda d: d["estimator"]["noise"].update(jerk_walk=0.0))
    check_fails(capsys, p, "estimator.noise.jerk_walk", "greater than zero")


def test_malformed_yaml(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text("mechanism:\n  urdf: x.urdf\n  gravity: [0, -9.81\n")
    check_fails(capsys, p, str(p), "not valid YAML", "line")


def test_missing_urdf_file(tmp_path, capsys):
    p = write_config(tmp_path, lambda d: d["mechanism"].update(urdf="nowhere.urdf"))
    check_fails(capsys, p, "mechanism.urdf", "no such file", "nowhere.urdf")


@pytest.mark.parametrize("urdf,fragments", [
    ("<robot name='x'><link name='a'/><joint name='j' type='revolute'><parent link='a'/>"
     "<child link='b'/></joint>", ("malformed XML", "line")),
    ("<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='floating'>"
     "<parent link='a'/><child link='b'/></joint></robot>", ("joint[j].type", "floating")),
    ("<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'>"
     "<parent link='a'/><child link='c'/><axis xyz='0 0 1'/></joint></robot>", ("joint[j].child", "'c'")),
    ("<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'>"
     "<parent link='a'/><child link='b'/><axis xyz='0 0 1'/></joint></robot>", ("joint[j].limit",)),
])
def test_malformed_urdf(tmp_path, capsys, urdf, fragments):
    u = tmp_path / "bad.urdf"
    u.write_text(urdf)
    p = tmp_path / "rig.yaml"
    p.write_text(yaml.safe_dump({"mechanism": {"urdf": str(u)}}))
    check_fails(capsys, p, str(u), *fragments)


def test_debug_shows_the_traceback_and_normal_mode_does_not(tmp_path):
    p = write_config(tmp_path, lambda d: d["sensors"]["encoders"][0].update(joint="nope"))
    exe = [sys.executable, "-m", "mbfg_ros.cli.main"]
    plain = subprocess.run(exe + ["check", str(p)], capture_output=True, text=True)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr and "nope" in plain.stderr
    debug = subprocess.run(exe + ["check", "--debug", str(p)], capture_output=True, text=True)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


# ---------------------------------------------------------------------------------------------
# the audit's corpus (issue 14, cases 1-3 and 8-11): check, replay and simulate refuse each bad
# rig with the same one line (the node does too: test/ros/test_node_parameter_errors.py)

from support.bad_rigs import ALL_CASES, write_case  # noqa: E402


@pytest.mark.parametrize("case", ALL_CASES)
def test_check_replay_and_simulate_refuse_a_bad_rig_with_the_same_line(tmp_path, capsys, case):
    path, words = write_case(tmp_path, case)
    err = check_fails(capsys, path, *words)
    line = err.strip()
    assert "\n" not in line, line
    (tmp_path / "bag").mkdir()
    for argv in (["replay", str(tmp_path / "bag"), "--config", str(path)],
                 ["simulate", str(path), "--out", str(tmp_path / "sim")]):
        rc = main(argv)
        out = capsys.readouterr()
        assert rc == 2 and out.err.strip() == line, (argv[0], out.err)
    assert not (tmp_path / "sim").exists()


def test_the_example_rigs_pass_every_check_with_margin(capsys):
    """The bounds and the singularity threshold leave the shipped rigs far inside."""
    from mbfg_ros.model.validation import SINGULAR_CONDITION, load_rig
    for config in sorted(CONFIG.glob("*.yaml")) + sorted((CONFIG / "iftomm").glob("*.yaml")):
        if config.name.endswith((".params.yaml", ".map.yaml")):   # a node's ROS params, an import map
            continue
        rig = load_rig(config)
        assert rig.closure_condition < 1e-4 * SINGULAR_CONDITION, (config, rig.closure_condition)
        assert rig.dof_condition < 1e-4 * SINGULAR_CONDITION, (config, rig.dof_condition)
