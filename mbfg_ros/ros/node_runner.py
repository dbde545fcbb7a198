"""Running a ROS node class as a console script: rclpy set up from the command line, the
node spun on the executor :mod:`~mbfg_ros.ros.rclpy_compat` picks, a clean exit on Ctrl-C or
shutdown (0) and one logged line when the node cannot start (2); optionally under cProfile."""
from __future__ import annotations

import os
import sys
import time

import rclpy
from rclpy.executors import ExternalShutdownException

from mbfg_ros.errors import MbfgError
from mbfg_ros.ros.free_memory import fix_heap_thresholds
from mbfg_ros.ros.node_parameters import init_rclpy
from mbfg_ros.ros.rclpy_compat import node_executor, spin
from mbfg_ros.termination import follow_parent

PROFILE_ENV = "MBFG_NODE_PROFILE"
"""Environment variable: a file name; the node then runs under cProfile (timed by its thread's
CPU clock) and writes its statistics there when it exits (how README "The live node" profiles it)."""


def split_ros_args(argv: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(a script's own arguments, the ``--ros-args ...`` tail) of a command line (default
    ``sys.argv[1:]``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--ros-args" in argv:
        i = argv.index("--ros-args")
        return argv[:i], argv[i:]
    return argv, []


def run_node(node_class: type, node_name: str, args: list[str] | None = None) -> int:
    """Start ``node_class`` (named ``node_name`` in its log lines) and spin it until Ctrl-C
    or shutdown: exit 0, or 2 when it cannot start (one logged line); under cProfile with
    :data:`PROFILE_ENV` set."""
    target = os.environ.get(PROFILE_ENV)
    if not target:
        return _run(node_class, node_name, args)
    import cProfile
    profile = cProfile.Profile(time.thread_time)     # CPU time: a loaded machine's waits left out
    try:
        return profile.runcall(_run, node_class, node_name, args)
    finally:
        profile.dump_stats(target)


def _run(node_class: type, node_name: str, args: list[str] | None) -> int:
    follow_parent()                    # no orphan when a runner dies
    fix_heap_thresholds()              # memory flat over days, backlogs included
    argv = list(args if args is not None else sys.argv)
    if not init_rclpy(argv, node_name):
        return 2
    node = None
    try:
        try:
            node = node_class(ros_argv=argv)
        except (MbfgError, LookupError) as exc:
            rclpy.logging.get_logger(node_name).error(f"cannot start: {exc}")
            return 2
        executor = node_executor()
        executor.add_node(node)
        try:
            spin(executor, node.context)
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        except Exception:                    # noqa: BLE001
            if rclpy.ok():
                raise
            # Ctrl-C shut the context down while rclpy was taking a message: a clean exit
        return 0
    finally:
        if node is not None:
            node.stop()
            node.destroy_node()
        rclpy.try_shutdown()
