"""Malformed parameters fail fast: the node logs one clear error line naming the parameter (or
config field) and the value, prints no traceback, and exits with status 2. Real processes."""
from __future__ import annotations

import pytest

from conftest import CONFIG
from mbfg_ros.ros.launch_description import Description, NodeSpec
from mbfg_ros.ros.processes import NodeProcesses, ros_environment

pytestmark = pytest.mark.ros

FOUR_BAR = str(CONFIG / "four_bar.yaml")

ESTIMATOR_CASES = {
    "no_config": ({}, "parameter 'config' is required"),
    "missing_config": ({"config": "/nonexistent/rig.yaml"}, "parameter 'config': no such file"),
    "negative_rate": ({"config": FOUR_BAR, "keyframe_rate": -5.0},
                      "parameter 'keyframe_rate' is out of range (value: -5.0 Hz)"),
    "text_rate": ({"config": FOUR_BAR, "keyframe_rate": "fast"},
                  "parameter 'keyframe_rate' must be a number (value: 'fast')"),
    "typo": ({"config": FOUR_BAR, "keyframe_rat": 100.0}, "unknown parameter(s) 'keyframe_rat'"),
    "bad_frame": ({"config": FOUR_BAR, "world_frame": "/map"},
                  "parameter 'world_frame' is not a valid frame id (value: '/map')"),
    "moving_frame": ({"config": FOUR_BAR, "world_frame": "crank"},
                     "parameter 'world_frame' names a link of the URDF (value: 'crank')"),
    "bad_qos": ({"config": FOUR_BAR, "sensor_qos": "fast"}, "allowed: one of: sensor_data, reliable"),
    "bad_urdf": ({"config": FOUR_BAR, "robot_description": "<robot name='x'>"}, "robot_description"),
}

RIG_CASES = {
    "rig_rate": ({"config": FOUR_BAR, "rates": ["encoder=333"]},
                 "holds 166.5 samples of crank_encoder at 333 Hz"),
    "rig_mute": ({"config": FOUR_BAR, "mute_sensors": ["nope"]},
                 "parameter 'mute_sensors': unknown sensor 'nope'"),
}


def _start(name: str, executable: str, module: str, params: dict) -> NodeSpec:
    return NodeSpec(name, executable, module, parameters=params)


def _alone(log_dir) -> dict[str, str]:
    """The nodes' environment with DDS discovery off: they only start and fail, and a dozen
    participants leaving one domain at once can deadlock a peer that is still starting inside
    Fast DDS 3.2 (its start then hung with an empty log; eProsima/Fast-DDS#6502)."""
    env = ros_environment(log_dir)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "OFF"
    return env


@pytest.fixture(scope="module")
def failures(tmp_path_factory):
    """Every case started at once (each a process on its own), their exit status and output."""
    log_dir = tmp_path_factory.mktemp("parameter_errors")
    broken = log_dir / "broken.yaml"
    broken.write_text((CONFIG / "four_bar.yaml").read_text().replace("urdf: ../urdf/four_bar.urdf",
                                                                     f"urdf: {CONFIG.parent}/urdf/four_bar.urdf")
                      .replace("keyframe_rate: 200.0", "keyframe_rte: 200.0"))
    cases = dict(ESTIMATOR_CASES)
    cases["config_error"] = ({"config": str(broken)}, "keyframe_rte")
    shared = log_dir / "shared_wrench.yaml"      # load cells that cannot read one message
    shared.write_text((CONFIG / "arm6_ros2_control.yaml").read_text()
                      .replace("../urdf/", f"{CONFIG.parent}/urdf/")
                      .replace("topic: ft_sensor/wrench, rate: 500.0}\n\nestimator",
                               "topic: ft_sensor/wrench, rate: 250.0}\n\nestimator"))
    cases["shared_wrench"] = ({"config": str(shared)}, "read one message on ft_sensor/wrench: they "
                                                       "need the same rate")
    nodes = [_start(f"est_{k}", "estimator", "mbfg_ros.ros.estimator_node", p)
             for k, (p, _) in cases.items()]
    nodes += [_start(f"rig_{k}", "sim_rig", "mbfg_ros.ros.sim_rig_node", p) for k, (p, _) in RIG_CASES.items()]
    procs = NodeProcesses(Description("errors", nodes), log_dir, _alone(log_dir))
    with procs:
        done = procs.wait(timeout=120, any_required=False)
    expected = {f"est_{k}": v[1] for k, v in cases.items()}
    expected.update({f"rig_{k}": v[1] for k, v in RIG_CASES.items()})
    return {name: (done.get(name), procs.log_text(name), expected[name]) for name in expected}


@pytest.mark.parametrize("case", [f"est_{k}" for k in ESTIMATOR_CASES]
                         + ["est_config_error", "est_shared_wrench"]
                         + [f"rig_{k}" for k in RIG_CASES])
def test_bad_parameters_fail_fast_with_one_clear_line(failures, case):
    code, output, words = failures[case]
    assert code == 2, output
    errors = [ln for ln in output.splitlines() if "[ERROR]" in ln]
    assert len(errors) == 1, output
    assert "cannot start:" in errors[0] and words in errors[0], errors[0]
    assert "Traceback" not in output


# ---------------------------------------------------------------------------------------------
# the audit's bad rigs (issue 14, cases 1-3 and 8-11) and an empty -p config:= (case 7): the node
# refuses them at start-up with exactly the line `mbfg check` prints, and exit status 2

@pytest.fixture(scope="module")
def corpus_failures(tmp_path_factory):
    import subprocess
    import sys

    from support.bad_rigs import ALL_CASES, write_case
    from mbfg_ros.errors import MbfgError
    from mbfg_ros.model.validation import load_rig
    log_dir = tmp_path_factory.mktemp("corpus_errors")
    expected, nodes = {}, []
    for case in ALL_CASES:
        path, _ = write_case(log_dir / "rigs", case)
        try:
            load_rig(path)
        except MbfgError as exc:
            expected[f"rig_{case}"] = str(exc)           # what `mbfg check` prints after "error: "
        nodes.append(_start(f"rig_{case}", "estimator", "mbfg_ros.ros.estimator_node", {"config": str(path)}))
    env = _alone(log_dir)
    empty = subprocess.Popen([sys.executable, "-m", "mbfg_ros.ros.estimator_node", "--ros-args", "-p",
                              "config:="], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs = NodeProcesses(Description("corpus", nodes), log_dir, env)
    with procs:
        done = procs.wait(timeout=180, any_required=False)
    out = {name: (done.get(name), procs.log_text(name), expected[name]) for name in expected}
    text, _ = empty.communicate(timeout=120)
    out["empty_config"] = (empty.returncode, text, "parameter 'config' is given without a value")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", [f"rig_{c}" for c in __import__("support.bad_rigs", fromlist=["x"]).ALL_CASES]
                         + ["empty_config"])
def test_the_node_refuses_what_check_refuses_with_the_same_line(corpus_failures, case):
    code, output, words = corpus_failures[case]
    assert code == 2, output
    errors = [ln for ln in output.splitlines() if "[ERROR]" in ln]
    assert len(errors) == 1, output
    if case == "empty_config":
        assert "cannot start: " + words in errors[0], errors[0]
    else:                           # exactly `mbfg check`'s line ("error: " + the same text)
        assert errors[0].endswith("cannot start: " + words), (errors[0], words)
    assert "Traceback" not in output
