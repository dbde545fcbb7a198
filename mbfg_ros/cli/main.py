"""`mbfg`: the command line of mbfg_ros.

Subcommands live in their own modules (only the one used is imported, so `mbfg check` starts fast):
check, simulate, replay, import, tune, benchmark, run, demo. User errors (bad config, bad options,
bad bags) print one clear line and exit 2; `--debug` shows the traceback instead. Ctrl-C exits 130
and SIGTERM 143, both after the clean-up (a bag being written is removed).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from mbfg_ros.errors import MbfgError
from mbfg_ros.termination import Terminated, terminate_as_interrupt

SUBCOMMANDS = {
    "check": "mbfg_ros.cli.check",
    "simulate": "mbfg_ros.cli.simulate",
    "replay": "mbfg_ros.cli.replay",
    "import": "mbfg_ros.cli.import_log",
    "tune": "mbfg_ros.cli.tune",
    "benchmark": "mbfg_ros.cli.benchmark",
    "run": "mbfg_ros.cli.run",
    "demo": "mbfg_ros.cli.demo",
}

HELP = {
    "check": "validate a URDF + mechanism config and print what it describes",
    "simulate": "simulate a rig and write its sensor data and ground truth to a rosbag",
    "replay": "run the estimator over a rosbag (faster than real time) and report",
    "import": "convert a recorded log (CSV, MATLAB .mat, .npz) to a rosbag2 of the rig's sensor messages",
    "tune": "estimate the noise settings from a recording (no ground truth) and write a tuned config",
    "benchmark": "accuracy against the Kalman observers (--quick/--full), speed (--perf) or the live node (--node)",
    "run": "start the ROS nodes of a launch description without ros2 launch",
    "demo": "the four-bar rig and the estimator live over DDS, with figures and plots",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the options of ``command`` only (None: every subcommand's), so that a
    command imports its own module and not the others' (simulate's alone takes 0.6 s)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    parser = argparse.ArgumentParser(
        prog="mbfg", parents=[common],
        description="mbfg_ros: multibody factor-graph state and force estimation of mechanisms.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        p = sub.add_parser(name, parents=[common], help=HELP[name], description=HELP[name])
        p.set_defaults(_module=module)
        if command is not None and name != command:
            continue
        try:
            importlib.import_module(module).add_arguments(p)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            p.set_defaults(_missing=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    command = next((w for w in words if not w.startswith("-")), None)
    parser = build_parser(command if command in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    if getattr(args, "_missing", False):
        print(f"mbfg {args.command}: not available in this version", file=sys.stderr)
        return 2
    terminate_as_interrupt()        # SIGTERM cleans up like Ctrl-C (no half-written bag)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except MbfgError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Terminated:
        print("terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
