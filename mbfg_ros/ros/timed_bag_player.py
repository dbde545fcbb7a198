"""``python -m mbfg_ros.ros.timed_bag_player BAG --times FILE``: the bag player of
:mod:`mbfg_ros.ros.bag_player` as the node benchmark (``mbfg benchmark --node``) runs it.

It plays the bag once at its recorded rate exactly as :class:`~mbfg_ros.ros.bag_player.BagPlayer`
does (the stored CDR bytes unchanged, so every header stamp is the bag's), with two additions:

- it starts only once every topic it plays has ``--subscribers`` subscribers (default 1; the
  player publishes volatile, so a message sent before the node's subscription is matched would
  never reach it), then waits ``--delay`` s more;
- it records the wall-clock time (CLOCK_REALTIME, ns, as ``time.time_ns()``) at which it
  hands each message to its publisher and writes them, in the bag's message order, to
  ``--times`` (a ``.npy`` int64 array) when the bag is done.

Exit status 0 when played, 2 on a bad bag or option, 3 when the subscribers did not come within
``--wait`` s.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException

from mbfg_ros.ros.bag_player import BagPlayer
from mbfg_ros.ros.node_runner import split_ros_args
from mbfg_ros.termination import follow_parent


class _TimedPublisher:
    """A publisher that notes the wall-clock time of every publish in ``times``."""

    def __init__(self, publisher, times: list[int]) -> None:
        self._publisher = publisher
        self._times = times

    def publish(self, data) -> None:
        self._times.append(time.time_ns())
        self._publisher.publish(data)

    def get_subscription_count(self) -> int:
        return self._publisher.get_subscription_count()


def _arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="timed_bag_player", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="rosbag2 directory (or its .mcap / .db3 file)")
    p.add_argument("--times", required=True, metavar="FILE",
                   help="where the publication times go (.npy, int64 ns, CLOCK_REALTIME)")
    p.add_argument("--rate", type=float, default=1.0, help="playback rate factor")
    p.add_argument("--topics", nargs="+", default=None, help="play only these topics")
    p.add_argument("--subscribers", type=int, default=1, metavar="N",
                   help="start once every played topic has N subscribers (default 1)")
    p.add_argument("--wait", type=float, default=120.0, metavar="S",
                   help="give up (exit 3) when the subscribers are not there after S s (default 120)")
    p.add_argument("--delay", type=float, default=0.5, metavar="S",
                   help="wait this long once the subscribers are there (default 0.5)")
    return p.parse_args(argv)


def wait_for_subscribers(node: BagPlayer, count: int, timeout: float) -> bool:
    """Until every publisher of ``node`` has ``count`` subscribers; False after ``timeout`` s."""
    end = time.monotonic() + timeout
    while rclpy.ok():
        if all(pub.get_subscription_count() >= count for pub in node.pub.values()):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return False


def main(argv: list[str] | None = None) -> int:
    follow_parent()                    # no orphan when a runner dies
    argv, ros_args = split_ros_args(argv)
    args = _arguments(argv)
    player_args = argparse.Namespace(bag=args.bag, clock=None, rate=args.rate, loop=False,
                                     topics=args.topics, delay=args.delay)
    rclpy.init(args=["timed_bag_player", *ros_args])
    node = None
    try:
        try:
            node = BagPlayer(player_args)
        except (FileNotFoundError, ValueError, LookupError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        times: list[int] = []
        node.pub = {topic: _TimedPublisher(pub, times) for topic, pub in node.pub.items()}
        try:
            if not wait_for_subscribers(node, args.subscribers, args.wait):
                if rclpy.ok():
                    missing = [t for t, p in node.pub.items()
                               if p.get_subscription_count() < args.subscribers]
                    print(f"error: no subscriber on {', '.join(missing)} within {args.wait:g} s",
                          file=sys.stderr)
                    return 3
                return 0
            node.play()
        except (KeyboardInterrupt, ExternalShutdownException):
            return 0
        out = Path(args.times)
        np.save(out.with_suffix(".tmp.npy"), np.asarray(times, dtype=np.int64))
        out.with_suffix(".tmp.npy").replace(out)
        return 0
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
