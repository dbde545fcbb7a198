"""The launch description: one source for the launch files and for `mbfg run` (no DDS here)."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from mbfg_ros.ros.launch_description import (LAUNCH_ARGUMENT_CHOICES, LAUNCH_ARGUMENTS, default_config,
                                             estimator_description, read_params_file,
                                             replay_description, ros2_control_description,
                                             sim_rig_description, yaml_value)
from mbfg_ros.ros.parameter_tables import ESTIMATOR_PARAMETERS, SIM_RIG_PARAMETERS
from mbfg_ros.ros.processes import NodeProcesses

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = ROOT / "launch"
KINDS = ("estimator", "sim_rig", "replay", "estimator_ros2_control")


def _names(table) -> set[str]:
    return {s.name for s in table} | {"use_sim_time"}


def test_managed_starts_the_lifecycle_node_with_the_same_name_and_parameters(tmp_path):
    plain = estimator_description("config/four_bar.yaml", parameters={"lag": 0.5}).nodes[0]
    node = estimator_description("config/four_bar.yaml", parameters={"lag": 0.5}, managed="true").nodes[0]
    assert (node.executable, node.module) == ("estimator_lifecycle", "mbfg_ros.ros.lifecycle_node")
    assert (node.name, node.parameters) == (plain.name, plain.parameters)
    (control,) = ros2_control_description(managed=True).nodes
    assert control.executable == "estimator_lifecycle" and control.parameters["config"].endswith(
        "arm6_ros2_control.yaml")
    path = _params_file(tmp_path, {"/mbfg_estimator": {"ros__parameters": {"lag": 2.0}}})
    (node,) = estimator_description(params_file=path, managed=True).nodes     # same table
    assert node.params_files == (path,)
    with pytest.raises(ValueError, match="'managed' must be true or false"):
        estimator_description(managed="maybe")


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
    assert "use_sim_time" not in sim_rig_description().nodes[1].parameters   # false: ROS's default
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


def test_the_ros2_control_description_reads_the_example_files_unless_given_others(tmp_path):
    (node,) = ros2_control_description(namespace="robot1").nodes
    example = ROOT / "config" / "arm6_ros2_control.params.yaml"
    assert node.required and node.namespace == "robot1"
    assert node.params_files == (str(example),)
    assert node.parameters == {"config": str(ROOT / "config" / "arm6_ros2_control.yaml")}
    given = read_params_file(str(example), [node])["/robot1/mbfg_estimator"]
    assert given["frame_prefix"] == "mbfg/" and set(given) <= _names(ESTIMATOR_PARAMETERS)
    (node,) = ros2_control_description("/rigs/panda.yaml", use_sim_time="true").nodes
    assert node.parameters == {"config": "/rigs/panda.yaml", "use_sim_time": True}
    own = _params_file(tmp_path, {"/**": {"ros__parameters": {"config": "/rigs/a.yaml"}}})
    (node,) = ros2_control_description(params_file=own).nodes
    assert node.params_files == (own,) and node.parameters == {}     # the file's config is used


def test_the_pip_runner_writes_the_same_parameters(tmp_path):
    d = sim_rig_description("config/four_bar.yaml", rig_parameters={"rates": ["encoder=500"]})
    procs = NodeProcesses(d, tmp_path, env={})
    cmds = procs.commands()
    assert set(cmds) == {"sim_rig", "mbfg_estimator"}
    params = yaml.safe_load((tmp_path / "sim_rig.params.yaml").read_text())
    # under the node's own name, as launch_ros writes a node's parameters: typos stay errors
    assert params == {"/sim_rig": {"ros__parameters": d.nodes[0].parameters}}
    assert cmds["sim_rig"][-4:] == ["--params-file", str(tmp_path / "sim_rig.params.yaml"),
                                    "--log-level", "info"]


def test_log_level_is_checked_and_case_insensitive():
    assert estimator_description(log_level="DEBUG").nodes[0].log_level == "debug"
    with pytest.raises(ValueError, match="'log_level' must be one of debug, info, warn, error, fatal "
                                         "\\(value: 'verbose'\\)"):
        estimator_description(log_level="verbose")
    with pytest.raises(ValueError, match="'log_level'"):
        sim_rig_description(log_level="verbose")
    assert set(LAUNCH_ARGUMENT_CHOICES["log_level"]) >= {"debug", "INFO", "warn", "ERROR", "fatal"}


def _params_file(tmp_path, data) -> str:
    path = tmp_path / "p.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


@pytest.mark.parametrize("kind", KINDS)
def test_every_launch_file_takes_a_params_file_and_a_log_level(kind):
    assert {"params_file", "log_level", "namespace", "config"} <= set(LAUNCH_ARGUMENTS[kind])


def test_a_params_file_comes_first_and_the_launch_arguments_override_it(tmp_path):
    path = _params_file(tmp_path, {"/**": {"ros__parameters": {"lag": 2.0, "config": "/rigs/a.yaml"}},
                                   "/rig1/sim_rig": {"ros__parameters": {"seed": 3}}})
    (est,) = estimator_description(params_file=path, namespace="rig1").nodes
    assert est.params_files == (path,) and est.parameters == {}        # the file's config is used
    args = est.ros_arguments("own.yaml")
    assert args.index(path) < args.index("own.yaml")                  # ours come after the file
    (est,) = estimator_description("/rigs/b.yaml", params_file=path, use_sim_time=True).nodes
    assert est.parameters == {"config": "/rigs/b.yaml", "use_sim_time": True}
    rig, est = sim_rig_description(params_file=path, namespace="rig1").nodes
    assert rig.params_files == est.params_files == (path,)
    (est,) = replay_description("/bag", params_file=path).nodes
    assert est.params_files == (path,) and "config" not in est.parameters
    # without a params file (or without a config in it) the four-bar is the default
    (est,) = estimator_description().nodes
    assert est.parameters == {"config": default_config()} and est.params_files == ()


@pytest.mark.parametrize("data, words", [
    ({"/**": {"ros__parameters": {"lag": "long"}}},
     "section /**: parameter 'lag' must be a number (value: 'long')"),
    ({"/mbfg_estimator": {"ros__parameters": {"keyframe_rat": 100.0}}},
     "section /mbfg_estimator: /mbfg_estimator has no parameter 'keyframe_rat'"),
    ({"/**": {"ros__parameters": {"use_sim_time": "yes"}}}, "'use_sim_time' must be true or false"),
    ({"/other_node": {"ros__parameters": {"lag": 1.0}}}, "no section applies to /mbfg_estimator"),
    ({"lag": 1.0}, "no '<node>: ros__parameters:' section"),
    ("/**: [", "not valid YAML"),
])
def test_a_bad_params_file_is_one_clear_error(tmp_path, data, words):
    path = _params_file(tmp_path, data)
    with pytest.raises(ValueError) as err:
        estimator_description(params_file=path)
    assert words in str(err.value) and path in str(err.value) and "\n" not in str(err.value)


def test_a_wildcard_section_may_hold_other_nodes_parameters(tmp_path):
    path = _params_file(tmp_path, {"/**": {"ros__parameters": {"robot_description_semantic": "x",
                                                               "lag": 0.5}}})
    (est,) = estimator_description(params_file=path).nodes
    assert est.params_files == (path,)
    with pytest.raises(ValueError, match="no such file"):
        estimator_description(params_file=str(tmp_path / "missing.yaml"))


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
    pytest.importorskip("launch.actions", reason="launch is not installable from pip (no wheel on "
                        "PyPI); this runs on a ROS machine")
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
