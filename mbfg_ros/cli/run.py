"""``mbfg run <sim_rig|estimator|replay>``: start the nodes of a launch description without
``ros2 launch`` (which cannot be installed from pip).

It starts exactly what ``launch/<kind>.launch.py`` starts (both come from
:mod:`mbfg_ros.ros.launch_description`), each node as its own process on the current ROS graph
(``ROS_DOMAIN_ID`` from the environment unless ``--domain-id``), prints every command and where
its log goes, echoes the nodes' output with a ``[name]`` prefix (``--quiet``: logs only), and
stops everything on Ctrl-C or SIGTERM (forwarded as SIGINT; a SIGTERM during that clean-up is
ignored: :mod:`mbfg_ros.termination`, installed by ``mbfg``) or when the required process ends
(the rig at the end of its run, the bag player at the end of the bag).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import yaml

from mbfg_ros.errors import CliError

KINDS = ("sim_rig", "estimator", "replay")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=KINDS, help="which launch description to run")
    p.add_argument("bag", nargs="?", default=None, help="replay: the rosbag2 to play")
    p.add_argument("--config", default="", help="mechanism config (default: config/four_bar.yaml)")
    p.add_argument("--urdf", default="", help="estimator: URDF file replacing the config's")
    p.add_argument("--robot-description-file", default="", metavar="FILE",
                   help="estimator: pass this URDF file's text as robot_description")
    p.add_argument("--use-sim-time", action="store_true",
                   help="sim_rig: the rig publishes /clock and the estimator follows it; "
                        "estimator: follow /clock")
    p.add_argument("--managed", action="store_true",
                   help="estimator: the managed (lifecycle) node; it waits for configure and activate")
    p.add_argument("--rviz", action="store_true", help="sim_rig: also start rviz2 (ROS machines)")
    p.add_argument("--duration", type=float, default=3600.0, help="sim_rig: rig time (s)")
    p.add_argument("--rate", type=float, default=1.0, help="replay: playback rate")
    p.add_argument("--loop", action="store_true", help="replay: loop the bag")
    p.add_argument("--namespace", default="", help="namespace of the nodes")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warn", "error", "fatal"))
    p.add_argument("--params-file", default="", metavar="FILE",
                   help="a ROS 2 parameters file (YAML with <node>: ros__parameters:) the nodes "
                        "read first, e.g. config/estimator.params.yaml; --param and the other "
                        "options override it")
    p.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                   help="an estimator parameter (repeatable; VALUE is YAML: 200, true, [1, 2])")
    p.add_argument("--rig-param", action="append", default=[], metavar="NAME=VALUE",
                   help="sim_rig: a rig parameter (repeatable), e.g. initial_error=[0.2]")
    p.add_argument("--remap", action="append", default=[], metavar="FROM:=TO",
                   help="estimator: a topic remapping (repeatable)")
    p.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID of the nodes")
    p.add_argument("--log-dir", default=None,
                   help="where the logs go (default out/run/<kind>-<date-time>)")
    p.add_argument("--quiet", action="store_true", help="do not echo the nodes' output")


def _params(option: str, items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CliError(f"{option} expects NAME=VALUE (value: {item!r})")
        try:
            out[name] = yaml.safe_load(value) if value != "" else ""
        except yaml.YAMLError:
            raise CliError(f"{option} {name}: the value is not valid YAML (value: {value!r})") from None
    return out


def build_description(args: argparse.Namespace):
    """The Description ``args`` ask for (CliError on bad input)."""
    from mbfg_ros.ros.launch_description import (estimator_description, replay_description,
                                                 sim_rig_description)
    if args.config and not Path(args.config).is_file():
        raise CliError(f"--config: no such file (value: {args.config!r})")
    params = _params("--param", args.param)
    try:
        if args.kind == "estimator":
            description = ""
            if args.robot_description_file:
                path = Path(args.robot_description_file)
                if not path.is_file():
                    raise CliError(f"--robot-description-file: no such file (value: {str(path)!r})")
                description = path.read_text(encoding="utf-8")
            remaps = []
            for r in args.remap:
                a, sep, b = r.partition(":=")
                if not sep or not a or not b:
                    raise CliError(f"--remap expects FROM:=TO (value: {r!r})")
                remaps.append((a, b))
            return estimator_description(args.config, args.urdf, description, args.use_sim_time,
                                         args.namespace, args.log_level, params, tuple(remaps),
                                         args.params_file, args.managed)
        if args.kind == "sim_rig":
            if not args.duration > 0:
                raise CliError(f"--duration must be positive (value: {args.duration})")
            return sim_rig_description(args.config, args.use_sim_time, args.rviz, args.duration,
                                       args.namespace, args.log_level,
                                       _params("--rig-param", args.rig_param), params,
                                       args.params_file)
        if not args.bag:
            raise CliError("mbfg run replay needs the bag: mbfg run replay <bag> [--config ...]")
        if not Path(args.bag).exists():
            raise CliError(f"bag: no such file or directory (value: {args.bag!r})")
        return replay_description(args.bag, args.config, args.rate, args.loop, args.namespace,
                                  args.log_level, params, args.params_file)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from mbfg_ros.ros.processes import NodeProcesses, ros_environment, tool_available
    description = build_description(args)
    for p in description.processes:
        if not tool_available(p.cmd) and (p.pip_cmd is None or not tool_available(p.pip_cmd)):
            raise CliError(f"{p.cmd[0]} is not installed here (the pip environment has no "
                           f"{p.cmd[0]}); run without it on this machine")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    log_dir = Path(args.log_dir or Path("out") / "run" / f"{args.kind}-{stamp}")
    env = ros_environment(log_dir, args.domain_id if args.domain_id is not None
                          else int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    if args.domain_id is None and "ROS_AUTOMATIC_DISCOVERY_RANGE" in os.environ:
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]
    elif args.domain_id is None:
        env.pop("ROS_AUTOMATIC_DISCOVERY_RANGE", None)     # the user's graph, as ros2 launch
    procs = NodeProcesses(description, log_dir, env, echo=not args.quiet)
    print(f"mbfg run {args.kind}: ROS_DOMAIN_ID={env['ROS_DOMAIN_ID']}, logs in {log_dir}/")
    for name, cmd in procs.commands().items():
        print(f"  {name}: {' '.join(cmd)}")
    print("  (Ctrl-C stops every node)", flush=True)
    try:
        procs.start()
    except FileNotFoundError as exc:
        procs.stop()
        raise CliError(str(exc)) from None
    try:
        done = procs.wait()
    except KeyboardInterrupt:       # Ctrl-C, or SIGTERM (mbfg's handler: further ones ignored meanwhile)
        codes = procs.stop()
        print(f"\nstopped: {_codes(codes)}; logs in {log_dir}/", file=sys.stderr)
        return 0
    codes = procs.stop()
    failed = {n: c for n, c in done.items() if c not in (0, None)}
    print(f"mbfg run {args.kind}: {_codes(codes)}; logs in {log_dir}/", file=sys.stderr)
    for name, code in failed.items():
        lines = [ln for ln in procs.log_text(name).splitlines() if "ERROR" in ln or "error:" in ln]
        detail = lines[-1] if lines else f"see {procs.logs.get(name)}"
        raise CliError(f"{name} exited with status {code}: {detail}")
    return 0


def _codes(codes: dict) -> str:
    return ", ".join(f"{n} exit {c}" for n, c in codes.items())
