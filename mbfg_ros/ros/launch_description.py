"""What the launch files start, as plain data: nodes, parameters, remappings, processes.

One description serves two runners: the thin files in ``launch/`` turn it into ``launch_ros``
actions on a ROS machine (:func:`to_launch_actions`), and ``mbfg run`` starts the same nodes as
plain processes where ``launch`` cannot be installed (:mod:`mbfg_ros.ros.processes`). Importing
this module needs neither rclpy nor launch.

Descriptions (their arguments are the launch arguments, :data:`LAUNCH_ARGUMENTS`):

- :func:`estimator_description`: the ``estimator`` node (``mbfg_estimator``) for a config,
  with ``urdf`` or ``robot_description``, ``use_sim_time``, namespace and log level;
- :func:`sim_rig_description`: the ``sim_rig`` node and the estimator (subscribing reliably,
  as the rig publishes; and rviz2 with ``config/four_bar.rviz`` when ``rviz``); with
  ``use_sim_time`` the rig publishes /clock and the estimator follows it;
- :func:`replay_description`: ``ros2 bag play BAG --clock`` (in the pip environment its stand-in
  :mod:`mbfg_ros.ros.bag_player`) and the estimator with ``use_sim_time``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PACKAGE = "mbfg_ros"
LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")


@dataclass(frozen=True)
class NodeSpec:
    """One node: ``executable`` is the package's console script, ``module`` the Python module
    with the same ``main`` (what the pip runner starts)."""
    name: str
    executable: str
    module: str
    namespace: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    log_level: str = "info"
    package: str = PACKAGE
    required: bool = False             # the whole launch ends when this node exits

    def ros_arguments(self, params_file: str | None = None) -> list[str]:
        """``--ros-args`` of a command line that starts this node (parameters in a file, as
        ``--params-file``, or as ``-p`` pairs when no file is given)."""
        out = ["--ros-args", "-r", f"__node:={self.name}"]
        if self.namespace:
            out += ["-r", f"__ns:={_namespace(self.namespace)}"]
        for a, b in self.remappings:
            out += ["-r", f"{a}:={b}"]
        if params_file:
            out += ["--params-file", params_file]
        else:
            for k, v in self.parameters.items():
                out += ["-p", f"{k}:={yaml_value(v)}"]
        out += ["--log-level", self.log_level]
        return out

    def command(self, params_file: str | None = None, python: str | None = None) -> list[str]:
        """The command line that starts this node with this Python (``python -m module``)."""
        return [python or sys.executable, "-m", self.module, *self.ros_arguments(params_file)]


@dataclass(frozen=True)
class ProcessSpec:
    """A plain process: ``cmd`` on a ROS machine, ``pip_cmd`` where that tool is missing."""
    name: str
    cmd: tuple[str, ...]
    pip_cmd: tuple[str, ...] | None = None
    required: bool = False


@dataclass
class Description:
    """Everything one launch file starts."""
    name: str
    nodes: list[NodeSpec]
    processes: list[ProcessSpec] = field(default_factory=list)


@dataclass(frozen=True)
class LaunchArgument:
    default: str
    description: str


def _namespace(ns: str) -> str:
    return ns if ns.startswith("/") else "/" + ns


def yaml_value(v: Any) -> str:
    """A parameter value as ROS reads it from ``-p name:=value`` (YAML)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return _quote(v)
    return repr(v)


def _quote(s: str) -> str:
    import yaml
    text = yaml.safe_dump(s, default_flow_style=True, width=1 << 30).strip()
    return text[:-4].rstrip() if text.endswith("\n...") else text.removesuffix("...").rstrip()


def share_dir() -> Path:
    """The source tree when running from it (editable install, pip environment), else the
    installed package's share directory (colcon)."""
    source = Path(__file__).resolve().parents[2]
    if (source / "package.xml").is_file() and (source / "config").is_dir():
        return source
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(PACKAGE))
    except (ImportError, LookupError, OSError):
        return source


def default_config() -> str:
    return str(share_dir() / "config" / "four_bar.yaml")


def default_rviz() -> str:
    return str(share_dir() / "config" / "four_bar.rviz")


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise ValueError(f"launch argument '{name}' must be true or false (value: {value!r})")


def _level(value: str) -> str:
    if value not in LOG_LEVELS:
        raise ValueError(f"launch argument 'log_level' must be one of {', '.join(LOG_LEVELS)} "
                         f"(value: {value!r})")
    return value


LAUNCH_ARGUMENTS: dict[str, dict[str, LaunchArgument]] = {
    "estimator": {
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the four-bar"),
        "urdf": LaunchArgument("", "URDF file replacing the config's urdf"),
        "robot_description": LaunchArgument("", "URDF text replacing the config's urdf"),
        "use_sim_time": LaunchArgument("false", "follow /clock (bag play, simulated rigs)"),
        "namespace": LaunchArgument("", "namespace of the estimator node"),
        "log_level": LaunchArgument("info", "log level: " + ", ".join(LOG_LEVELS)),
    },
    "sim_rig": {
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the four-bar"),
        "use_sim_time": LaunchArgument("false", "the rig publishes /clock and the estimator follows it"),
        "rviz": LaunchArgument("false", "also start rviz2 with config/four_bar.rviz"),
        "duration": LaunchArgument("3600", "how long the rig runs (s)"),
        "namespace": LaunchArgument("", "namespace of both nodes"),
        "log_level": LaunchArgument("info", "log level: " + ", ".join(LOG_LEVELS)),
    },
    "replay": {
        "bag": LaunchArgument("", "the rosbag2 to play (required)"),
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the four-bar"),
        "rate": LaunchArgument("1.0", "playback rate factor"),
        "loop": LaunchArgument("false", "play the bag in a loop (the estimator resets at each loop)"),
        "namespace": LaunchArgument("", "namespace of the estimator node"),
        "log_level": LaunchArgument("info", "log level: " + ", ".join(LOG_LEVELS)),
    },
}


def estimator_description(config: str = "", urdf: str = "", robot_description: str = "",
                          use_sim_time: Any = False, namespace: str = "", log_level: str = "info",
                          parameters: dict[str, Any] | None = None,
                          remappings: tuple[tuple[str, str], ...] = ()) -> Description:
    """The estimator node alone (estimator.launch.py)."""
    return Description("estimator", [_estimator(config, urdf, robot_description,
                                                _bool("use_sim_time", use_sim_time), namespace,
                                                _level(log_level), parameters, remappings, True)])


def _estimator(config, urdf, robot_description, use_sim_time, namespace, log_level, parameters,
               remappings, required) -> NodeSpec:
    params: dict[str, Any] = {"config": str(config or default_config()), "use_sim_time": use_sim_time}
    if urdf:
        params["urdf"] = str(urdf)
    if robot_description:
        params["robot_description"] = str(robot_description)
    params.update(parameters or {})
    return NodeSpec("mbfg_estimator", "estimator", "mbfg_ros.ros.estimator_node", namespace,
                    params, tuple(remappings), log_level, required=required)


def sim_rig_description(config: str = "", use_sim_time: Any = False, rviz: Any = False,
                        duration: Any = 3600.0, namespace: str = "", log_level: str = "info",
                        rig_parameters: dict[str, Any] | None = None,
                        estimator_parameters: dict[str, Any] | None = None) -> Description:
    """The simulated rig and the estimator (sim_rig.launch.py); the run ends with the rig."""
    sim_time = _bool("use_sim_time", use_sim_time)
    config = str(config or default_config())
    rig_params: dict[str, Any] = {"config": config, "duration": float(duration),
                                  "publish_clock": sim_time, "wait_for_subscribers": 1}
    rig_params.update(rig_parameters or {})
    nodes = [NodeSpec("sim_rig", "sim_rig", "mbfg_ros.ros.sim_rig_node", namespace, rig_params,
                      (), _level(log_level), required=True),
             # the simulated rig publishes reliably: subscribe reliably too, with 10 s of
             # history, so a burst (a busy machine) is delivered instead of lost in DDS
             _estimator(config, "", "", sim_time, namespace, log_level,
                        {"sensor_qos": "reliable", "qos_depth": 10000, **(estimator_parameters or {})},
                        (), False)]
    processes = []
    if _bool("rviz", rviz):
        processes.append(ProcessSpec("rviz2", ("rviz2", "-d", default_rviz())))
    return Description("sim_rig", nodes, processes)


def replay_description(bag: str, config: str = "", rate: Any = 1.0, loop: Any = False,
                       namespace: str = "", log_level: str = "info",
                       estimator_parameters: dict[str, Any] | None = None) -> Description:
    """``ros2 bag play BAG --clock`` and the estimator on sim time (replay.launch.py)."""
    if not bag:
        raise ValueError("launch argument 'bag' is required: the rosbag2 to play")
    rate = float(rate)
    if not rate > 0:
        raise ValueError(f"launch argument 'rate' must be positive (value: {rate!r})")
    looping = _bool("loop", loop)
    play = ["ros2", "bag", "play", str(bag), "--clock", "--rate", repr(rate)]
    pip_play = [sys.executable, "-m", "mbfg_ros.ros.bag_player", str(bag), "--clock",
                "--rate", repr(rate)]
    if looping:
        play.append("--loop")
        pip_play.append("--loop")
    return Description("replay", [_estimator(config, "", "", True, namespace, log_level,
                                             estimator_parameters, (), False)],
                       [ProcessSpec("bag_play", tuple(play), tuple(pip_play), required=True)])


DESCRIPTIONS = {"estimator": estimator_description, "sim_rig": sim_rig_description,
                "replay": replay_description}


def to_launch_actions(description: Description) -> list:
    """launch_ros Node / launch ExecuteProcess actions of a description (ROS machines)."""
    from launch.actions import EmitEvent, ExecuteProcess, RegisterEventHandler
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch_ros.actions import Node

    actions = []
    for n in description.nodes:
        node = Node(package=n.package, executable=n.executable, name=n.name,
                    namespace=n.namespace or None, parameters=[dict(n.parameters)],
                    remappings=list(n.remappings), arguments=["--ros-args", "--log-level", n.log_level],
                    output="screen")
        actions.append(node)
        if n.required:
            actions.append(_shutdown_on_exit(node, RegisterEventHandler, OnProcessExit, EmitEvent, Shutdown))
    for p in description.processes:
        proc = ExecuteProcess(cmd=list(p.cmd), output="screen", name=p.name)
        actions.append(proc)
        if p.required:
            actions.append(_shutdown_on_exit(proc, RegisterEventHandler, OnProcessExit, EmitEvent, Shutdown))
    return actions


def _shutdown_on_exit(action, RegisterEventHandler, OnProcessExit, EmitEvent, Shutdown):
    return RegisterEventHandler(OnProcessExit(target_action=action,
                                              on_exit=[EmitEvent(event=Shutdown(reason="done"))]))


def launch_file_description(kind: str):
    """The body of a launch file: the arguments and an OpaqueFunction that builds the actions
    from their values (``launch/<kind>.launch.py`` is just ``return launch_file_description(kind)``)."""
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration

    args = LAUNCH_ARGUMENTS[kind]

    def setup(context, *_, **__):
        values = {name: LaunchConfiguration(name).perform(context) for name in args}
        return to_launch_actions(DESCRIPTIONS[kind](**values))

    return LaunchDescription([DeclareLaunchArgument(name, default_value=a.default,
                                                    description=a.description)
                              for name, a in args.items()] + [OpaqueFunction(function=setup)])
