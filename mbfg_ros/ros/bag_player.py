"""``python -m mbfg_ros.ros.bag_player BAG [--clock [HZ]] [--rate R] [--loop]``: the pip
environment's stand-in for ``ros2 bag play`` (rosbag2_py and ros2cli are not on PyPI).

It plays a rosbag2 (mcap or sqlite3, read with rosbags) the way ``ros2 bag play`` does for the
options it has: every message's stored CDR bytes are published unchanged at its recorded log
time (relative to the bag's first message, divided by ``--rate``) on a reliable publisher of
its type; ``--clock`` publishes /clock (rosgraph_msgs/Clock) with the bag's log time at HZ
(default 40, as ros2 bag play); ``--loop`` starts again at the end, so time jumps backwards;
``--topics`` plays only those. The bag is read :data:`READ_AHEAD` messages ahead in a thread
(:func:`read_ahead`), as ``ros2 bag play`` keeps a message queue filled, so that reading the next
chunk of the file does not hold the publications back (read inline, the benchmark's player was
37 ms late at each chunk boundary). On a ROS machine use ``ros2 bag play`` itself (the replay
launch description does).
"""
from __future__ import annotations

import argparse
import itertools
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Iterator

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosbags.rosbag2 import Reader

from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.node_runner import split_ros_args
from mbfg_ros.termination import follow_parent


READ_AHEAD = 20_000
"""Messages read ahead of the publications (``ros2 bag play``'s default read-ahead queue holds 1000;
more here: Python's reader comes in bursts of a whole chunk)."""

_END = object()


def read_ahead(items: Iterable, size: int = READ_AHEAD, prime: float = 10.0) -> Iterator:
    """The items of ``items`` (an iterator that reads a file), read up to ``size`` ahead in a
    daemon thread; an exception of the reader is raised here, in order. The first item comes once
    the queue is full or the reader is through (at most ``prime`` s): take it before the clock
    starts, so that the reading of the first ``size`` items competes with nothing."""
    q: queue.Queue = queue.Queue(maxsize=size)
    stop = threading.Event()
    done = threading.Event()

    def fill() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            done.set()
            q.put(_END)
        except BaseException as exc:         # noqa: BLE001 - handed to the consumer
            done.set()
            q.put(exc)

    t = threading.Thread(target=fill, name="bag-read-ahead", daemon=True)
    t.start()
    end = time.monotonic() + prime
    while not q.full() and not done.is_set() and time.monotonic() < end:
        time.sleep(0.005)
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join(timeout=1.0)


def _arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bag_player", description=__doc__.split("\n\n")[0])
    p.add_argument("bag", help="rosbag2 directory (or its .mcap / .db3 file)")
    p.add_argument("--clock", nargs="?", const=40.0, type=float, default=None, metavar="HZ",
                   help="publish /clock at HZ (default 40)")
    p.add_argument("--rate", type=float, default=1.0, help="playback rate factor")
    p.add_argument("--loop", action="store_true", help="play again from the start at the end")
    p.add_argument("--topics", nargs="+", default=None, help="play only these topics")
    p.add_argument("--delay", type=float, default=0.0, help="wait this long (s) before playing")
    return p.parse_args(argv)


class BagPlayer(Node):
    """Publishes a bag's messages at their recorded times (see the module docstring)."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__("rosbag2_player")
        path = Path(args.bag)
        if path.is_file():
            path = path.parent
        if not path.is_dir():
            raise FileNotFoundError(f"no such bag: {args.bag}")
        if not args.rate > 0:
            raise ValueError(f"--rate must be positive (value: {args.rate})")
        self.args = args
        self.path = path
        qos = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
        self.pub = {}
        with Reader(path) as reader:
            for c in reader.connections:
                if args.topics and c.topic not in args.topics:
                    continue
                if c.topic not in self.pub:
                    self.pub[c.topic] = self.create_publisher(message_class(c.msgtype), c.topic, qos)
            self.start_ns = reader.start_time
            self.end_ns = reader.end_time
        self.clock_pub = (self.create_publisher(message_class("rosgraph_msgs/msg/Clock"), "/clock", 10)
                          if args.clock else None)
        self._clock_cls = message_class("rosgraph_msgs/msg/Clock")

    def _publish_clock(self, ns: int) -> None:
        c = self._clock_cls()
        c.clock.sec, c.clock.nanosec = divmod(int(ns), 1_000_000_000)
        self.clock_pub.publish(c)

    def play_once(self) -> int:
        """Play the bag once; the number of messages published."""
        rate = self.args.rate
        period = 1.0 / self.args.clock if self.args.clock else None
        next_clock = 0.0
        count = 0
        with Reader(self.path) as reader:
            conns = [c for c in reader.connections if c.topic in self.pub]
            messages = read_ahead(reader.messages(connections=conns))
            first = next(messages, None)         # (the queue filled before the clock starts)
            start = time.monotonic()
            for conn, log_ns, raw in itertools.chain([first] if first is not None else [], messages):
                due = (log_ns - self.start_ns) * 1e-9 / rate
                while rclpy.ok():
                    now = time.monotonic() - start
                    if period is not None and now >= next_clock:
                        self._publish_clock(self.start_ns + int(now * rate * 1e9))
                        next_clock = now + period
                    if now >= due:
                        break
                    wait = due - now
                    if period is not None:
                        wait = min(wait, max(next_clock - now, 0.0))
                    time.sleep(min(wait, 0.01))
                if not rclpy.ok():
                    break
                self.pub[conn.topic].publish(bytes(raw))
                count += 1
        return count

    def play(self) -> int:
        if self.args.delay > 0:
            time.sleep(self.args.delay)
        loops = 0
        while rclpy.ok():
            count = self.play_once()
            loops += 1
            self.get_logger().info(f"played {count} messages of {self.path} (pass {loops})")
            if not self.args.loop:
                break
        return 0


def main(argv: list[str] | None = None) -> int:
    follow_parent()                    # no orphan when a runner dies
    argv, ros_args = split_ros_args(argv)
    args = _arguments(argv)
    rclpy.init(args=["bag_player", *ros_args])
    node = None
    try:
        try:
            node = BagPlayer(args)
        except (FileNotFoundError, ValueError, LookupError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        try:
            return node.play()
        except (KeyboardInterrupt, ExternalShutdownException):
            return 0
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
