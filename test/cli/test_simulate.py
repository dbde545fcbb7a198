"""`mbfg simulate`: the bags it writes, its summary and JSON, determinism, bad input."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import CONFIG
from mbfg_ros.cli.main import main
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.bag_reader import bag_topics, read_bag


def test_four_bar_bag_has_the_default_rates(tmp_path, capsys):
    out, js = tmp_path / "fb", tmp_path / "fb.json"
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--duration", "10", "--out", str(out),
                 "--json", str(js)]) == 0
    text = capsys.readouterr().out
    assert "/encoders" in text and "10000" in text and "energy drift" in text
    topics = bag_topics(out)
    assert topics["/encoders"] == {"type": "sensor_msgs/msg/JointState", "count": 10000}
    assert topics["/rocker_pin/wrench"] == {"type": "geometry_msgs/msg/WrenchStamped", "count": 2000}
    for t in ("/truth/joint_states", "/truth/dynamic_joint_states", "/truth/forces/coupler_rocker",
              "/truth/forces/rocker_pin_load"):
        assert topics[t]["count"] == 2000
    facts = json.loads(js.read_text())
    assert facts["topics"] == topics
    assert facts["duration"] == 10.0 and facts["messages"] == sum(v["count"] for v in topics.values())
    assert facts["energy_drift"] < 1e-6 and facts["max_closure_residual"] < 1e-8
    assert facts["wall_time"] > 0 and set(facts["wall_times"]) == {"integration", "sensors_and_truth", "writing"}
    assert facts["scenario"]["gravity_error"] == 0.0 and facts["sensors"]["crank_encoder"]["rate"] == 1000.0


def test_four_bar_gyro_bag_in_sqlite3(tmp_path):
    out = tmp_path / "fbg"
    assert main(["simulate", str(CONFIG / "four_bar_gyro.yaml"), "--duration", "10", "--out", str(out),
                 "--storage", "sqlite3", "--gravity-error", "1.0"]) == 0
    assert (out / "fbg.db3").exists()
    topics = bag_topics(out)
    assert topics["/coupler/imu"] == {"type": "sensor_msgs/msg/Imu", "count": 4000}
    frames = {r.topic: r.msg.header.frame_id for r in read_bag(out) if r.log_time_ns < 1_700_000_000_010_000_000}
    assert frames["/coupler/imu"] == "coupler_imu" and frames["/truth/forces/coupler_rocker"] == "rocker_tip"


def _contents(path):
    out = []
    for r in read_bag(path):
        m = r.msg
        vals = getattr(m, "position", None)
        if r.msgtype == "sensor_msgs/msg/Imu":
            vals = [m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z]
        elif r.msgtype == "geometry_msgs/msg/WrenchStamped":
            vals = [m.wrench.force.x, m.wrench.force.y, m.wrench.force.z]
        elif r.msgtype == "control_msgs/msg/DynamicJointState":
            vals = msgs.joint_values(m, "acceleration", m.joint_names)
        out.append((r.topic, r.log_time_ns, tuple(np.asarray(vals, float).tolist())))
    return out


def test_runs_are_deterministic_for_a_seed(tmp_path):
    args = ["simulate", str(CONFIG / "spatial_rsur.yaml"), "--duration", "0.5", "--jitter", "1e-4",
            "--dropout", "0.05", "--outliers", "0.01", "--gyro-bias", "0.01", "--gyro-bias-walk",
            "--input", "random", "--rate", "gyro=300", "--rate", "crank_encoder=700"]
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        assert main(args + ["--out", str(tmp_path / name), "--seed", seed]) == 0
    a, b, c = (_contents(tmp_path / n) for n in "abc")
    assert a == b
    assert a != c
    topics = bag_topics(tmp_path / "a")
    assert 300 < topics["/encoders"]["count"] <= 350           # 700 Hz, 5 % dropped
    assert 130 < topics["/coupler/imu"]["count"] <= 150        # 300 Hz


def test_delay_moves_the_log_time_not_the_stamp(tmp_path):
    out = tmp_path / "d"
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--duration", "0.2", "--out", str(out),
                 "--delay", "0.01", "--epoch", "100"]) == 0
    r = next(iter(read_bag(out, topics=["/encoders"])))
    assert r.msg.header.stamp.sec == 100 and r.msg.header.stamp.nanosec == 0
    assert r.log_time_ns == 100_010_000_000


def test_overwrite(tmp_path, capsys):
    out = tmp_path / "o"
    args = ["simulate", str(CONFIG / "four_bar.yaml"), "--duration", "0.1", "--out", str(out)]
    assert main(args) == 0
    assert main(args) == 2
    assert "--out" in capsys.readouterr().err
    assert main(args + ["--overwrite", "--rate", "encoder=50"]) == 0
    assert bag_topics(out)["/encoders"]["count"] == 5


@pytest.mark.parametrize("extra, message", [
    (["--rate", "imu=100"], "--rate: unknown sensor or kind 'imu' (known: encoder, gyro, load_cell, accelerometer, "
                            "command, crank_encoder, rocker_pin_load)"),
    (["--rate", "encoder=0"], "--rate: encoder must be a positive rate in Hz (value: 0)"),
    (["--rate", "gyro=-5"], "--rate: gyro must be a positive rate in Hz (value: -5)"),
    (["--rate", "encoder"], "--rate: expected SENSOR_OR_KIND=VALUE (value: 'encoder')"),
    (["--duration", "0"], "--duration: must be a positive number of seconds (value: 0)"),
    (["--duration", "-2"], "--duration: must be a positive number of seconds (value: -2)"),
    (["--truth-rate", "0"], "--truth-rate: must be a positive number of Hz (value: 0)"),
    (["--mass-error", "crank_link=1.1"], "--mass-error: unknown link 'crank_link' (known: world, motion_plane, crank, coupler, rocker)"),
    (["--length-error", "crank_joint=-1"], "--length-error: crank_joint must be a positive factor (value: -1)"),
    (["--dropout", "1.5"], "--dropout: must be a probability in [0, 1) (value: 1.5)"),
    (["--jitter", "-0.001"], "--jitter: must be >= 0 s (value: -0.001)"),
    (["--initial-error", "0.1,0.2"], "--initial-error: the rig has 1 DOF, got 2 values"),
    (["--disturbance", "-1"], "--disturbance: must be >= 0 N m or N (value: -1)"),
    (["--disturbance", "1", "--disturbance-rate", "0"], "--disturbance-rate: must be a positive number of Hz (value: 0)"),
])
def test_bad_input_names_the_option_and_exits_2(tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--out", str(out)] + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_unwritable_and_existing_outputs(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--out", str(a_file / "bag")]) == 2
    assert f"--out '{a_file / 'bag'}' is not writable" in capsys.readouterr().err
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--out", str(a_file)]) == 2
    assert "exists already (pass --overwrite to replace it)" in capsys.readouterr().err
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--out", str(a_file), "--overwrite"]) == 2
    assert "is not a rosbag2 directory" in capsys.readouterr().err
    assert a_file.read_text() == "x"


def test_json_to_stdout(tmp_path, capsys):
    assert main(["simulate", str(CONFIG / "slider_crank.yaml"), "--duration", "0.3", "--out", str(tmp_path / "s"),
                 "--input", "step", "--input-start", "0.1", "--json", "-"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["topics"]["/joint_commands"] == {"type": "sensor_msgs/msg/JointState", "count": 300}
    assert facts["conservative"] is False
    assert facts["energy_drift"] < 1e-6        # the energy balance, net of the motor's work and friction


def test_a_disturbance_is_in_the_scenario_and_the_energy_balance(tmp_path, capsys):
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--duration", "0.3", "--out", str(tmp_path / "d"),
                 "--disturbance", "0.5", "--disturbance-rate", "100", "--json", "-"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["scenario"]["disturbance"] == 0.5 and facts["scenario"]["disturbance_rate"] == 100.0
    assert facts["conservative"] is False and facts["energy_drift"] < 1e-8
    assert main(["simulate", str(CONFIG / "four_bar.yaml"), "--duration", "0.3", "--out", str(tmp_path / "e"),
                 "--disturbance", "0.5"]) == 0
    assert "disturbance 0.5 N m or N per joint at 200 Hz" in capsys.readouterr().out
