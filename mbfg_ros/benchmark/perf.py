"""`mbfg benchmark --perf`: the estimator's update latency, real-time factor and memory.

(Owned by the estimator; `mbfg_ros.cli.benchmark` dispatches --perf here.)
"""
from __future__ import annotations

import argparse


def add_perf_arguments(p: argparse.ArgumentParser) -> None:
    """Options of --perf (added to the `mbfg benchmark` parser)."""
    p.add_argument("--perf-duration", type=float, default=60.0, metavar="S",
                   help="length of each --perf recording in seconds (default 60)")


def run_perf(args: argparse.Namespace) -> int:
    """Run the --perf cases and print/write their figures; returns the exit status."""
    raise NotImplementedError("mbfg benchmark --perf is being written")
