"""What the launch files start, as plain data: nodes, parameters, remappings, processes.

One description serves two runners: the thin files in ``launch/`` turn it into ``launch_ros``
actions on a ROS machine (:func:`to_launch_actions`), and ``mbfg run`` starts the same nodes as
plain processes where ``launch`` cannot be installed (:mod:`mbfg_ros.ros.processes`). Importing
this module needs neither rclpy nor launch (checking a ``params_file`` reads the nodes' parameter
tables, :mod:`mbfg_ros.ros.parameter_tables`, which import no rclpy either).

Every description takes ``params_file``: a ROS 2 parameters file the nodes read first (checked
here by :func:`read_params_file`: one error line naming the file, section, parameter and value);
the launch's explicit arguments and parameters are given after it, under the node's own name,
so they override it.

Descriptions (their arguments are the launch arguments, :data:`LAUNCH_ARGUMENTS`):

- :func:`estimator_description`: the ``estimator`` node (``mbfg_estimator``) for a config,
  with ``urdf`` or ``robot_description``, ``use_sim_time``, namespace and log level;
- :func:`sim_rig_description`: the ``sim_rig`` node and the estimator (subscribing reliably,
  as the rig publishes; and rviz2 with ``config/four_bar.rviz`` when ``rviz``); with
  ``use_sim_time`` the rig publishes /clock and the estimator follows it;
- :func:`replay_description`: ``ros2 bag play BAG --clock`` (in the pip environment its stand-in
  :mod:`mbfg_ros.ros.bag_player`) and the estimator with ``use_sim_time``;
- :func:`ros2_control_description`: the estimator on the topics of ros2_control's broadcasters,
  with the example's config and params file (``config/arm6_ros2_control*.yaml``) by default.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mbfg_ros.package_share import PACKAGE, config_dir, share_dir

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
LOG_LEVEL_CHOICES = LOG_LEVELS + tuple(level.upper() for level in LOG_LEVELS)
"""What ``log_level`` accepts (ROS log levels are case-insensitive)."""


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
    params_files: tuple[str, ...] = ()  # the user's params files, before ``parameters``

    @property
    def fully_qualified_name(self) -> str:
        """``/namespace/name`` (``/name`` without a namespace)."""
        ns = _namespace(self.namespace).rstrip("/") if self.namespace else ""
        return f"{ns}/{self.name}"

    def ros_arguments(self, params_file: str | None = None) -> list[str]:
        """``--ros-args`` of a command line that starts this node: the user's params files,
        then ``parameters`` in ``params_file`` (``--params-file``) or as ``-p`` pairs when no
        file is given."""
        out = ["--ros-args", "-r", f"__node:={self.name}"]
        if self.namespace:
            out += ["-r", f"__ns:={_namespace(self.namespace)}"]
        for a, b in self.remappings:
            out += ["-r", f"{a}:={b}"]
        for f in self.params_files:
            out += ["--params-file", f]
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
    level = str(value).strip().lower()
    if level not in LOG_LEVELS:
        raise ValueError(f"launch argument 'log_level' must be one of {', '.join(LOG_LEVELS)} "
                         f"(value: {value!r})")
    return level


def read_params_file(path: str, nodes: list[NodeSpec]) -> dict[str, dict[str, Any]]:
    """Check a ROS 2 parameters file for ``nodes`` and return {node's fully qualified name:
    {parameter: value} the file gives it}. The file is YAML with ``<node>: ros__parameters:``
    sections (``/**`` for every node; ``/ns/name``, ``name`` or patterns with ``*``); ValueError
    naming the file, section, parameter and value when: it is missing or not YAML, has no
    section for any of the nodes, a section naming a node gives a parameter the node does not
    have, or a value is of the wrong type or out of range. Unknown names in wildcard sections
    are left alone (a file shared by several nodes; the node logs a warning)."""
    import yaml
    from mbfg_ros.ros.node_parameters import (ParameterError, check_value, is_wildcard,
                                              matches_node, params_file_sections)
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"launch argument 'params_file': no such file (value: {path!r})")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"params_file {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    sections = params_file_sections(data)
    if not sections:
        raise ValueError(f"params_file {path}: no '<node>: ros__parameters:' section (a ROS 2 "
                         "parameters file looks like '/**: {ros__parameters: {lag: 2.0}}')")
    # wildcard sections first: a section naming the node wins over them (as in rcl)
    sections.sort(key=lambda s: not is_wildcard(s[0]))
    from mbfg_ros.ros.parameter_tables import NODE_PARAMETERS as tables
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        fqn = node.fully_qualified_name
        table = {s.name: s for s in tables[node.executable]}
        given: dict[str, Any] = {}
        for pattern, params in sections:
            if not matches_node(pattern, fqn):
                continue
            for name, value in params.items():
                if name == "use_sim_time":
                    if not isinstance(value, bool):
                        raise ValueError(f"params_file {path}: section {pattern}: parameter "
                                         f"'use_sim_time' must be true or false (value: {value!r})")
                elif name in table:
                    try:
                        check_value(table[name], value)
                    except ParameterError as exc:
                        raise ValueError(f"params_file {path}: section {pattern}: {exc}") from None
                elif is_wildcard(pattern) or name.startswith("qos_overrides."):
                    continue
                else:
                    raise ValueError(f"params_file {path}: section {pattern}: {fqn} has no parameter "
                                     f"{name!r} (it has: {', '.join(table)}, use_sim_time)")
                given[name] = value
        out[fqn] = given
    if not any(matches_node(pattern, n.fully_qualified_name) for pattern, _ in sections for n in nodes):
        raise ValueError(f"params_file {path}: no section applies to "
                         f"{', '.join(n.fully_qualified_name for n in nodes)} (sections: "
                         f"{', '.join(p for p, _ in sections)}); use '/**' or the node's name")
    return out


def _with_params_file(nodes: list[NodeSpec], params_file: str, defaults: dict[str, dict[str, Any]]
                      ) -> list[NodeSpec]:
    """``nodes`` reading ``params_file`` first; ``defaults`` ({executable: {name: value}}) are
    the launch's own defaults (the config), set only where the file does not give them."""
    from dataclasses import replace
    given = read_params_file(params_file, nodes) if params_file else {}
    out = []
    for n in nodes:
        params = dict(n.parameters)
        for name, value in defaults.get(n.executable, {}).items():
            if name not in given.get(n.fully_qualified_name, {}):
                params.setdefault(name, value)
        files = (str(Path(params_file).expanduser().resolve()),) if params_file else ()
        out.append(replace(n, parameters=params, params_files=files))
    return out


_PARAMS_FILE = LaunchArgument("", "a ROS 2 parameters file (YAML: <node>: ros__parameters: ...) "
                              "read by the nodes, e.g. config/estimator.params.yaml; the other "
                              "launch arguments override it")
_LOG_LEVEL = LaunchArgument("info", "log level: " + ", ".join(LOG_LEVELS))
_MANAGED = LaunchArgument("false", "start the estimator as a managed (lifecycle) node "
                          "(estimator_lifecycle): it waits unconfigured until a lifecycle manager "
                          "or 'ros2 lifecycle set' configures and activates it")

LAUNCH_ARGUMENTS: dict[str, dict[str, LaunchArgument]] = {
    "estimator": {
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the "
                                 "params_file's config, else the four-bar"),
        "urdf": LaunchArgument("", "URDF file replacing the config's urdf"),
        "robot_description": LaunchArgument("", "URDF text replacing the config's urdf"),
        "use_sim_time": LaunchArgument("false", "follow /clock (bag play, simulated rigs)"),
        "namespace": LaunchArgument("", "namespace of the estimator node (and of its input topics)"),
        "params_file": _PARAMS_FILE,
        "log_level": _LOG_LEVEL,
        "managed": _MANAGED,
    },
    "estimator_ros2_control": {
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the params_file's "
                                 "config, else config/arm6_ros2_control.yaml"),
        "urdf": LaunchArgument("", "URDF file replacing the config's urdf"),
        "robot_description": LaunchArgument("", "URDF text replacing the config's urdf"),
        "use_sim_time": LaunchArgument("false", "follow /clock (the controller manager on sim time)"),
        "namespace": LaunchArgument("", "namespace of the estimator node and of its input topics "
                                    "(the controller manager's namespace)"),
        "params_file": LaunchArgument("", "a ROS 2 parameters file read by the estimator; default: "
                                      "config/arm6_ros2_control.params.yaml"),
        "log_level": _LOG_LEVEL,
        "managed": _MANAGED,
    },
    "sim_rig": {
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the four-bar"),
        "use_sim_time": LaunchArgument("false", "the rig publishes /clock and the estimator follows it"),
        "rviz": LaunchArgument("false", "also start rviz2 with config/four_bar.rviz"),
        "duration": LaunchArgument("3600", "how long the rig runs (s)"),
        "namespace": LaunchArgument("", "namespace of both nodes"),
        "params_file": _PARAMS_FILE,
        "log_level": _LOG_LEVEL,
    },
    "replay": {
        "bag": LaunchArgument("", "the rosbag2 to play (required)"),
        "config": LaunchArgument("", "the rig's mechanism config (YAML); default: the four-bar"),
        "rate": LaunchArgument("1.0", "playback rate factor"),
        "loop": LaunchArgument("false", "play the bag in a loop (the estimator resets at each loop)"),
        "namespace": LaunchArgument("", "namespace of the estimator node"),
        "params_file": _PARAMS_FILE,
        "log_level": _LOG_LEVEL,
    },
}
"""The launch arguments of each launch file (name: default, description)."""

LAUNCH_ARGUMENT_CHOICES: dict[str, tuple[str, ...]] = {"log_level": LOG_LEVEL_CHOICES}
"""Arguments whose values ``launch`` checks itself (DeclareLaunchArgument choices)."""


def estimator_description(config: str = "", urdf: str = "", robot_description: str = "",
                          use_sim_time: Any = False, namespace: str = "", log_level: str = "info",
                          parameters: dict[str, Any] | None = None,
                          remappings: tuple[tuple[str, str], ...] = (),
                          params_file: str = "", managed: Any = False) -> Description:
    """The estimator node alone (estimator.launch.py); ``managed``: the lifecycle node."""
    node = _estimator(config, urdf, robot_description, _bool("use_sim_time", use_sim_time),
                      namespace, _level(log_level), parameters, remappings, True,
                      _bool("managed", managed))
    return Description("estimator", _with_params_file([node], params_file, _config_default(config)))


ROS2_CONTROL_CONFIG = "arm6_ros2_control.yaml"
ROS2_CONTROL_PARAMS = "arm6_ros2_control.params.yaml"
"""The ros2_control example's config and params file (in ``config/``)."""


def ros2_control_description(config: str = "", urdf: str = "", robot_description: str = "",
                             use_sim_time: Any = False, namespace: str = "", log_level: str = "info",
                             parameters: dict[str, Any] | None = None,
                             remappings: tuple[tuple[str, str], ...] = (),
                             params_file: str = "", managed: Any = False) -> Description:
    """The estimator on the topics of ros2_control's broadcasters
    (estimator_ros2_control.launch.py): :func:`estimator_description` with the example's params
    file unless another is given, and its config unless ``config`` or the params file names one."""
    node = _estimator(config, urdf, robot_description, _bool("use_sim_time", use_sim_time),
                      namespace, _level(log_level), parameters, remappings, True,
                      _bool("managed", managed))
    params_file = params_file or str(config_dir() / ROS2_CONTROL_PARAMS)
    defaults = {} if config else {node.executable: {"config": str(config_dir() / ROS2_CONTROL_CONFIG)}}
    return Description("estimator_ros2_control", _with_params_file([node], params_file, defaults))


def _config_default(config: str) -> dict[str, dict[str, Any]]:
    """The four-bar where neither the ``config`` argument nor the params file names a config."""
    return {} if config else {executable: {"config": default_config()}
                              for executable in (*ESTIMATOR_EXECUTABLES, "sim_rig")}


ESTIMATOR_EXECUTABLES = ("estimator", "estimator_lifecycle")
"""The estimator's console scripts: the plain node and the managed (lifecycle) one."""


def _estimator(config, urdf, robot_description, use_sim_time, namespace, log_level, parameters,
               remappings, required, managed: bool = False) -> NodeSpec:
    """The estimator's NodeSpec (``managed``: the lifecycle node): only what was given
    explicitly is a parameter (a params file gives the rest; use_sim_time only when true)."""
    params: dict[str, Any] = {}
    if config:
        params["config"] = str(config)
    if use_sim_time:
        params["use_sim_time"] = True
    if urdf:
        params["urdf"] = str(urdf)
    if robot_description:
        params["robot_description"] = str(robot_description)
    params.update(parameters or {})
    if managed:
        return NodeSpec("mbfg_estimator", "estimator_lifecycle", "mbfg_ros.ros.lifecycle_node",
                        namespace, params, tuple(remappings), log_level, required=required)
    return NodeSpec("mbfg_estimator", "estimator", "mbfg_ros.ros.estimator_node", namespace,
                    params, tuple(remappings), log_level, required=required)


def sim_rig_description(config: str = "", use_sim_time: Any = False, rviz: Any = False,
                        duration: Any = 3600.0, namespace: str = "", log_level: str = "info",
                        rig_parameters: dict[str, Any] | None = None,
                        estimator_parameters: dict[str, Any] | None = None,
                        params_file: str = "") -> Description:
    """The simulated rig and the estimator (sim_rig.launch.py); the run ends with the rig.
    ``params_file`` goes to both nodes (each reads its own sections and the wildcard ones)."""
    sim_time = _bool("use_sim_time", use_sim_time)
    level = _level(log_level)
    rig_params: dict[str, Any] = {"duration": float(duration), "publish_clock": sim_time,
                                  "wait_for_subscribers": 1}
    if config:
        rig_params["config"] = str(config)
    rig_params.update(rig_parameters or {})
    nodes = [NodeSpec("sim_rig", "sim_rig", "mbfg_ros.ros.sim_rig_node", namespace, rig_params,
                      (), level, required=True),
             # the simulated rig publishes reliably: subscribe reliably too, with 10 s of
             # history, so a burst (a busy machine) is delivered instead of lost in DDS
             _estimator(config, "", "", sim_time, namespace, level,
                        {"sensor_qos": "reliable", "qos_depth": 10000, **(estimator_parameters or {})},
                        (), False)]
    processes = []
    if _bool("rviz", rviz):
        processes.append(ProcessSpec("rviz2", ("rviz2", "-d", default_rviz())))
    return Description("sim_rig", _with_params_file(nodes, params_file, _config_default(config)),
                       processes)


def replay_description(bag: str, config: str = "", rate: Any = 1.0, loop: Any = False,
                       namespace: str = "", log_level: str = "info",
                       estimator_parameters: dict[str, Any] | None = None,
                       params_file: str = "") -> Description:
    """``ros2 bag play BAG --clock`` and the estimator on sim time (replay.launch.py)."""
    if not bag:
        raise ValueError("launch argument 'bag' is required: the rosbag2 to play")
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        raise ValueError(f"launch argument 'rate' must be a number (value: {rate!r})") from None
    if not rate > 0:
        raise ValueError(f"launch argument 'rate' must be positive (value: {rate!r})")
    looping = _bool("loop", loop)
    play = ["ros2", "bag", "play", str(bag), "--clock", "--rate", repr(rate)]
    pip_play = [sys.executable, "-m", "mbfg_ros.ros.bag_player", str(bag), "--clock",
                "--rate", repr(rate)]
    if looping:
        play.append("--loop")
        pip_play.append("--loop")
    node = _estimator(config, "", "", True, namespace, _level(log_level), estimator_parameters,
                      (), False)
    return Description("replay", _with_params_file([node], params_file, _config_default(config)),
                       [ProcessSpec("bag_play", tuple(play), tuple(pip_play), required=True)])


DESCRIPTIONS = {"estimator": estimator_description, "sim_rig": sim_rig_description,
                "replay": replay_description, "estimator_ros2_control": ros2_control_description}


def to_launch_actions(description: Description) -> list:
    """launch_ros Node / launch ExecuteProcess actions of a description (ROS machines)."""
    from launch.actions import EmitEvent, ExecuteProcess, RegisterEventHandler
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch_ros.actions import Node

    actions = []
    for n in description.nodes:
        # namespace "" (not None): launch_ros then writes the parameters under the node's
        # own name, not '/**', so a PushRosNamespace still applies and a typo stays an error
        node = Node(package=n.package, executable=n.executable, name=n.name,
                    namespace=n.namespace or "", parameters=[*n.params_files, dict(n.parameters)],
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
                                                    description=a.description,
                                                    **({"choices": list(LAUNCH_ARGUMENT_CHOICES[name])}
                                                       if name in LAUNCH_ARGUMENT_CHOICES else {}))
                              for name, a in args.items()] + [OpaqueFunction(function=setup)])
