"""The launch description: one source for the launch files and for `mbfg run` (no DDS here)."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from mbfg_ros.ros.estimator_node import ESTIMATOR_PARAMETERS
from mbfg_ros.ros.launch_description import (LAUNCH_ARGUMENTS, default_config, estimator_description,
                                             replay_description, sim_rig_description, yaml_value)
from mbfg_ros.ros.processes import NodeProcesses
from mbfg_ros.ros.sim_rig_node import SIM_RIG_PARAMETERS

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch"
KINDS = ("estimator", "sim_rig", "replay")


def _names(table) -> set[str]:
    return {s.name for s in table} | {"use_sim_time"}


def test_estimator_description_names_parameters_and_remappings():
    d = estimator_description("config/four_bar.yaml", urdf="u.urdf", use_sim_time="true",
                              namespace="rig1", log_level="debug", parameters={"lag": 0.5},
                              remappings=(("/encoders", "/rig1/encoders"),))
    (node,) = d.nodes
    assert (node.name, node.executable, node.namespace, node.log_level) == \
        ("mbfg_estimator", "estimator", "rig1", "debug")
    assert node.parameters == {"config": "config/four_bar.yaml", "use_sim_time": True,
                               "urdf": "u.urdf", "lag": 0.5}
    assert set(node.parameters) <= _names(ESTIMATOR_PARAMETERS)
    args = node.ros_arguments()
    assert args[:3] == ["--ros-args", "-r", "__node:=mbfg_estimator"]
    assert "__ns:=/rig1" in args and "/encoders:=/rig1/encoders" in args
    assert "lag:=0.5" in args and "use_sim_time:=true" in args
    assert node.command(python="py")[:3] == ["py", "-m", "mbfg_ros.ros.estimator_node"]


def test_sim_rig_description_couples_the_rig_clock_and_the_estimator():
    d = sim_rig_description(use_sim_time=True, duration="12", rig_parameters={"seed": 4},
                            estimator_parameters={"lagged": True})
    rig, est = d.nodes
    assert rig.executable == "sim_rig" and rig.required and not est.required
    assert rig.parameters["publish_clock"] is True and est.parameters["use_sim_time"] is True
    assert rig.parameters["duration"] == 12.0 and rig.parameters["seed"] == 4
    assert rig.parameters["config"] == est.parameters["config"] == default_config()
    assert Path(default_config()).is_file()
    assert set(rig.parameters) <= _names(SIM_RIG_PARAMETERS)
    assert set(est.parameters) <= _names(ESTIMATOR_PARAMETERS)
    assert d.processes == []
    assert [p.cmd[0] for p in sim_rig_description(rviz="true").processes] == ["rviz2"]


def test_replay_description_plays_the_bag_with_its_clock():
    d = replay_description("/bags/run1", rate="2", loop="true")
    (play,) = d.processes
    assert list(play.cmd) == ["ros2", "bag", "play", "/bags/run1", "--clock", "--rate", "2.0", "--loop"]
    assert play.pip_cmd[1:3] == ("-m", "mbfg_ros.ros.bag_player") and play.required
    assert d.nodes[0].parameters["use_sim_time"] is True
    with pytest.raises(ValueError, match="'bag' is required"):
        replay_description("")
    with pytest.raises(ValueError, match="'loop' must be true or false"):
        replay_description("/b", loop="maybe")


def test_the_pip_runner_writes_the_same_parameters(tmp_path):
    d = sim_rig_description("config/four_bar.yaml", rig_parameters={"rates": ["encoder=500"]})
    procs = NodeProcesses(d, tmp_path, env={})
    cmds = procs.commands()
    assert set(cmds) == {"sim_rig", "mbfg_estimator"}
    params = yaml.safe_load((tmp_path / "sim_rig.params.yaml").read_text())
    assert params == {"/**": {"ros__parameters": d.nodes[0].parameters}}
    assert cmds["sim_rig"][-4:] == ["--params-file", str(tmp_path / "sim_rig.params.yaml"),
                                    "--log-level", "info"]


@pytest.mark.parametrize("value, text", [(True, "true"), (2, "2"), (0.5, "0.5"), ([1.0, 2], "[1.0, 2]"),
                                         ("a b", "a b"), ("true", "'true'"), ("1.5", "'1.5'")])
def test_yaml_values_survive_the_command_line(value, text):
    assert yaml_value(value) == text
    assert yaml.safe_load(text) == value


@pytest.mark.parametrize("kind", KINDS)
def test_launch_files_are_thin_and_use_the_description(kind):
    path = LAUNCH / f"{kind}.launch.py"
    tree = ast.parse(path.read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
             and getattr(n.func, "id", "") == "launch_file_description"]
    assert [c.args[0].value for c in calls] == [kind]
    assert kind in LAUNCH_ARGUMENTS


@pytest.mark.parametrize("kind", KINDS)
def test_launch_files_build_their_description(kind):
    """Needs the `launch` and `launch_ros` packages (a ROS machine); pip has neither."""
    # (the repository's launch/ folder makes a bare "import launch" succeed: ask for a module)
    pytest.importorskip("launch.actions", reason="launch is not installable from pip (see "
                        "../shared/reference/ros-pip-env.md); this runs on a ROS machine")
    pytest.importorskip("launch_ros.actions", reason="launch_ros is not installable from pip")
    from launch import LaunchContext, LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    spec = importlib.util.spec_from_file_location(f"{kind}_launch", LAUNCH / f"{kind}.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ld = module.generate_launch_description()
    assert isinstance(ld, LaunchDescription)
    declared = [e.name for e in ld.entities if isinstance(e, DeclareLaunchArgument)]
    assert declared == list(LAUNCH_ARGUMENTS[kind])
    context = LaunchContext()
    for e in ld.entities:
        if isinstance(e, DeclareLaunchArgument):
            e.visit(context)
    if kind == "replay":
        context.launch_configurations["bag"] = "/tmp/bag"
    (opaque,) = [e for e in ld.entities if isinstance(e, OpaqueFunction)]
    actions = opaque.execute(context)
    assert len(actions) >= 1
