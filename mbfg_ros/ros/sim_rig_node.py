"""The ``sim_rig`` node: the simulator as a stand-in rig publishing sensors and ground truth live.

Run: ``ros2 run mbfg_ros sim_rig --ros-args -p config:=/path/rig.yaml`` (pip environment:
``.venv/bin/sim_rig --ros-args ...``). Parameters: :data:`SIM_RIG_PARAMETERS` (README "The
sim_rig node"): the scenario (how the truth differs from the config), the sensor faults, and
timing.

It publishes the config's sensor topics at their rates and the ground truth under the config's
``truth_namespace`` (as ``mbfg simulate`` writes them to a bag: :mod:`.live_rig`), each message
at its own time: a sensor message at stamp + ``delay``, truth at its stamp.

Time: by default the rig runs in wall time: stamps are the wall clock when publishing starts
(after the subscribers it waits for are there) plus rig time, and messages go out when the wall
clock reaches them, so a stamp is the wall time of its sample as on a real rig. With ``publish_clock`` the rig
owns the time instead: it publishes /clock (rosgraph_msgs/Clock at ``clock_rate``, starting at
``epoch``, default 1700000000 s), advancing ``rate_factor`` times as fast as the wall clock but
never past the simulated data (a slow machine slows the clock, never the data); run the
estimator with ``use_sim_time:=true``.

Threads: a generator thread simulates ahead of the published time in blocks of ``chunk`` s
(default 0.5 s), starting the next block once the published time is within ``lead`` s of the
simulated one; each block's messages are serialized at once from byte templates
(:class:`~mbfg_ros.ros.live_rig.LiveRig`). The main thread only sends the bytes that are due, in
order, and sleeps until the next one (it falls behind only if the simulation cannot keep up,
which is logged). The node exits with status 0 at the end of ``duration``.
"""
from __future__ import annotations

import sys
import threading
import time
from bisect import bisect_right
from collections import Counter, deque

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from mbfg_ros.errors import MbfgError
from mbfg_ros.io import messages as msgs
from mbfg_ros.model.channels import channel_names
from mbfg_ros.model.validation import load_rig
from mbfg_ros.ros.free_memory import fix_heap_thresholds
from mbfg_ros.ros.live_rig import LiveRig, MessageBlock
from mbfg_ros.ros.message_classes import message_class
from mbfg_ros.ros.node_parameters import ParameterError, declare_node_parameters, init_rclpy
from mbfg_ros.ros.parameter_tables import SIM_RIG_PARAMETERS
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SENSOR_KINDS, SensorOptions
from mbfg_ros.termination import follow_parent

NODE_NAME = "sim_rig"

def _pairs(name: str, items: list[str], known: list[str] | None, what: str) -> dict[str, float]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not sep or number is None:
            raise ParameterError(f"parameter '{name}': expected {what.upper()}=NUMBER (value: {item!r})")
        if known is not None and key not in known:
            raise ParameterError(f"parameter '{name}': unknown {what} {key!r} (value: {item!r}; "
                                 f"known: {', '.join(known)})")
        out[key] = number
    return out


def rig_from_parameters(p: dict) -> LiveRig:
    """The LiveRig of validated sim_rig parameters (ParameterError / MbfgError when wrong)."""
    if not p["config"]:
        raise ParameterError("parameter 'config' is required: the rig's mechanism config (YAML), "
                             "e.g. --ros-args -p config:=/path/to/four_bar.yaml")
    from pathlib import Path
    path = Path(p["config"]).expanduser()
    if not path.is_file():
        raise ParameterError(f"parameter 'config': no such file (value: {p['config']!r})")
    if p["urdf"] and not Path(p["urdf"]).expanduser().is_file():
        raise ParameterError(f"parameter 'urdf': no such file (value: {p['urdf']!r})")
    mech = load_rig(path, urdf=p["urdf"] or None).mech        # the validation of `mbfg check`
    k = len(mech.dof)
    off = p["initial_error"] or [0.0]
    if len(off) not in (1, k):
        raise ParameterError(f"parameter 'initial_error' needs 1 or {k} values (one per DOF: "
                             f"{', '.join(mech.dof_names)}) (value: {off})")
    vel = p["initial_velocity"]
    if vel and len(vel) != k:
        raise ParameterError(f"parameter 'initial_velocity' needs {k} values (one per DOF: "
                             f"{', '.join(mech.dof_names)}) (value: {vel})")
    scenario = Scenario(
        duration=p["duration"], gravity_error=p["gravity_error"],
        mass_scale=_pairs("mass_error", p["mass_error"], mech.link_names, "link"),
        length_scale=_pairs("length_error", p["length_error"], mech.joint_names, "joint"),
        initial_dof_offset=off[0] if len(off) == 1 else tuple(off),
        initial_dof_velocity=tuple(vel) if vel else None,
        input_profile=p["input_profile"], input_amplitude=p["input_amplitude"],
        input_frequency=p["input_frequency"], input_start=p["input_start"],
        friction=p["friction"], seed=p["seed"])
    known = list(SENSOR_KINDS) + channel_names(mech)
    sensors = SensorOptions(
        rates=_pairs("rates", p["rates"], known, "kind or sensor"), noise=p["noise"],
        quantize=p["quantize"], gyro_bias=p["gyro_bias"], gyro_bias_walk=p["gyro_bias_walk"],
        jitter=p["jitter"], delay=p["delay"], dropout=p["dropout"], outlier_rate=p["outliers"],
        outlier_scale=p["outlier_scale"], seed=p["seed"])
    for name in p["mute_sensors"]:
        if name not in channel_names(mech):
            raise ParameterError(f"parameter 'mute_sensors': unknown sensor {name!r} (sensors of "
                                 f"this rig: {', '.join(channel_names(mech))})")
    if p["rate_factor"] != 1.0 and not p["publish_clock"]:
        raise ParameterError(f"parameter 'rate_factor' needs publish_clock:=true (value: "
                             f"{p['rate_factor']}): in wall time the rig runs in real time")
    if p["epoch"] >= 0:
        epoch_ns = msgs.seconds_to_ns(p["epoch"])
    elif p["publish_clock"]:
        epoch_ns = msgs.seconds_to_ns(msgs.DEFAULT_EPOCH)
    else:
        epoch_ns = time.time_ns()
        epoch_ns -= epoch_ns % 1_000_000              # a whole millisecond
    return LiveRig(mech, scenario, sensors, epoch_ns=epoch_ns, chunk=p["chunk"],
                   truth_rate=p["truth_rate"], publish_truth=p["publish_truth"],
                   mute={name: p["mute_after"] for name in p["mute_sensors"]})


class SimRigNode(Node):
    """Publishes a LiveRig's messages on time (see the module docstring)."""

    def __init__(self, node_name: str = NODE_NAME, ros_argv: list[str] | None = None, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        p = declare_node_parameters(self, SIM_RIG_PARAMETERS, ros_argv)
        self.settings = p
        self.rig = rig_from_parameters(p)
        qos = QoSProfile(depth=p["qos_depth"], reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE, history=HistoryPolicy.KEEP_LAST)
        self._pub = {topic: self.create_publisher(message_class(t), topic, qos)
                     for topic, t in self.rig.topics.items()}
        self._clock_pub = (self.create_publisher(message_class("rosgraph_msgs/msg/Clock"), "/clock", 10)
                           if p["publish_clock"] else None)
        self._blocks: deque[MessageBlock] = deque()      # simulated, not being published yet
        self._blocks_lock = threading.Condition()           # guards _blocks and _generated
        self._generated = 0.0           # rig time simulated so far (s)
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self.published = 0
        self.published_per_topic: Counter = Counter()
        self._block: MessageBlock | None = None            # the block being published
        self._next = 0                                     # its next message
        self._times: list[float] = []                      # its publish times (s of rig time)
        self._generator = threading.Thread(target=self._generate, name="sim_rig_generator", daemon=True)
        rig = self.rig
        faults = ", ".join(f"{k} {v:g}" for k, v in (("jitter", p["jitter"]), ("delay", p["delay"]),
                                                     ("dropout", p["dropout"]), ("outliers", p["outliers"]),
                                                     ("gyro_bias", p["gyro_bias"])) if v) or "none"
        self.get_logger().info(
            f"{rig.truth.config.name}: {rig.duration:g} s in "
            f"{'simulated time (/clock, x%g)' % p['rate_factor'] if p['publish_clock'] else 'wall time'}"
            + (f", epoch {rig.epoch_ns * 1e-9:.3f} s" if p["epoch"] >= 0 or p["publish_clock"]
               else ", epoch: the wall clock when publishing starts") + "; sensors: "
            + ", ".join(f"{ch.name} on {ch.topic} ({ch.rate:g} Hz)" for ch in rig.channels)
            + f"; truth under {rig.truth.config.truth_namespace or '/truth'} "
            f"({'%g Hz' % rig.truth_rate if rig.publish_truth else 'off'}); faults: {faults}"
            + (f"; muting {', '.join(rig.mute)} at {p['mute_after']:g} s" if rig.mute else ""))

    # ------------------------------------------------------------------------------------------
    def _generate(self) -> None:
        """Simulate chunks while the published time is within ``lead`` of the simulated one."""
        try:
            while not self._stop.is_set() and not self.rig.finished:
                with self._blocks_lock:
                    while (not self._stop.is_set()
                           and self._generated > self._rig_time + self.settings["lead"]):
                        self._blocks_lock.wait(0.05)
                if self._stop.is_set():
                    return
                block = self.rig.next_block()      # CDR bytes, so the publisher only sends
                with self._blocks_lock:
                    if len(block):
                        self._blocks.append(block)
                    self._generated = self.rig.simulated
                    self._blocks_lock.notify_all()
        except MbfgError as exc:
            self._error = exc
        except BaseException as exc:                        # noqa: BLE001 (reported by run())
            self._error = exc
        finally:
            with self._blocks_lock:
                self._blocks_lock.notify_all()

    @property
    def _rig_time(self) -> float:
        return getattr(self, "_now", 0.0)

    def run(self) -> int:
        """Publish until the duration is over (0), shutdown (0), or the simulation failed (1)."""
        p, rig = self.settings, self.rig
        factor = p["rate_factor"] if p["publish_clock"] else 1.0
        self._now = 0.0
        wall_epoch = p["epoch"] < 0 and not p["publish_clock"]
        if wall_epoch:
            # stamps are the wall clock at which the sample is published, as on a real rig:
            # time 0 is set once the subscribers are there and after the first chunk's time
            self._wait_for_subscribers()
            epoch_ns = time.time_ns() + self.FIRST_CHUNK_NS
            rig.epoch_ns = epoch_ns - epoch_ns % 1_000_000       # a whole millisecond
        self._generator.start()
        with self._blocks_lock:                               # the first chunk before time starts
            while self._generated <= 0.0 and self._error is None and not rig.finished:
                self._blocks_lock.wait(0.1)
        if wall_epoch:
            start = time.monotonic() + (rig.epoch_ns - time.time_ns()) * 1e-9
        else:
            self._wait_for_subscribers()
            start = time.monotonic()
        paused = 0.0                  # wall time the sim clock waited for the simulation
        clock_period = 1.0 / p["clock_rate"]
        next_clock = 0.0
        behind_logged = 0.0
        clock_cls = message_class("rosgraph_msgs/msg/Clock")
        while rclpy.ok() and not self._stop.is_set():
            if self._error is not None:
                self.get_logger().error(f"the simulation failed: {self._error}")
                return 1
            wall = time.monotonic() - start - paused
            target = wall * factor
            with self._blocks_lock:
                ahead = self._generated
                done = (rig.finished and not self._blocks and self._block is None
                        and self._generated >= rig.duration - 1e-9)
            if done:
                per_topic = ", ".join(f"{t} {n}" for t, n in sorted(self.published_per_topic.items()))
                self.get_logger().info(f"the scenario ended at {rig.duration:g} s; "
                                       f"{self.published} messages published ({per_topic})")
                return 0
            if target > ahead:
                if self._clock_pub is not None and not rig.finished:
                    # sim time waits for the data instead of running ahead of it
                    paused += (target - ahead) / factor
                    target = ahead
                elif target - ahead > 0.05 and time.monotonic() - behind_logged > 5.0:
                    behind_logged = time.monotonic()
                    self.get_logger().warning(f"the simulation is {1e3 * (target - ahead):.0f} ms behind "
                                           "real time: messages go out late")
            self._now = min(target, rig.duration)
            if self._clock_pub is not None and self._now >= next_clock:
                c = clock_cls()
                ns = rig.epoch_ns + msgs.seconds_to_ns(self._now)
                c.clock.sec, c.clock.nanosec = divmod(ns, 1_000_000_000)
                self._clock_pub.publish(c)
                next_clock = self._now + clock_period * factor
            nxt = self._publish_due(self._now)
            if nxt is None:
                nxt = self._now + 0.01
            if self._clock_pub is not None:
                nxt = min(nxt, next_clock)
            sleep = (nxt - self._now) / factor
            if sleep > 0:
                time.sleep(min(sleep, 0.01))
        return 0

    def _publish_due(self, now: float) -> float | None:
        """Send every message due by rig time ``now``, in order; the next one's time (None
        when nothing is simulated beyond)."""
        while True:
            block = self._block
            if block is None or self._next >= len(block):
                with self._blocks_lock:
                    self._block = block = self._blocks.popleft() if self._blocks else None
                    self._blocks_lock.notify_all()
                self._next = 0
                if block is None:
                    return None
                self._times = block.time.tolist()
            start = self._next
            end = bisect_right(self._times, now, start)
            if end > start:
                publishers, topics, payloads = self._pub, block.topic, block.cdr
                for i in range(start, end):
                    publishers[topics[i]].publish(payloads[i])
                self.published_per_topic.update(topics[start:end])
                self.published += end - start
                self._next = end
            if end < len(block):
                return self._times[end]

    FIRST_CHUNK_NS = 1_000_000_000
    """Wall-clock epochs start this far after the subscribers are there: time to simulate the
    first block (if it takes longer, the first messages go out that much late)."""

    def _wait_for_subscribers(self) -> None:
        want, limit = self.settings["wait_for_subscribers"], self.settings["wait_timeout"]
        need = {t: want for t in {ch.topic for ch in self.rig.channels}} if want else {}
        if self.settings["wait_for_truth"] and self.rig.publish_truth:
            truth_ns = (self.rig.truth.config.truth_namespace or "/truth").rstrip("/")
            need[f"{truth_ns}/joint_states"] = max(need.get(f"{truth_ns}/joint_states", 0), 1)
        if not need:
            return
        end = time.monotonic() + limit
        while rclpy.ok() and not self._stop.is_set():
            missing = sorted(t for t, n in need.items() if self._matched(t) < n)
            if not missing:
                self.get_logger().info("the subscribers are there: starting")
                return
            if time.monotonic() >= end:
                self.get_logger().warning(f"no subscriber on {', '.join(missing)} after {limit:g} s: "
                                          "starting anyway")
                return
            time.sleep(0.05)

    def _matched(self, topic: str) -> int:
        """Subscriptions DDS has matched with this node's publisher of ``topic`` (the graph's
        count can see a subscriber before its reader is matched, and what is published in
        between never reaches it)."""
        pub = self._pub.get(topic)
        return pub.get_subscription_count() if pub is not None else self.count_subscribers(topic)

    def stop(self) -> None:
        self._stop.set()
        with self._blocks_lock:
            self._blocks_lock.notify_all()
        if self._generator.is_alive():
            self._generator.join(timeout=5.0)


def main(args: list[str] | None = None) -> int:
    """Console script ``sim_rig``: 0 at the end of the run or on Ctrl-C, 2 on bad parameters,
    1 if the simulation failed."""
    follow_parent()                    # no orphan when a runner dies
    fix_heap_thresholds()              # memory flat, bursts included (free_memory.py)
    sys.setswitchinterval(0.0005)      # the publishing thread gets the GIL back quickly
    argv = list(args if args is not None else sys.argv)
    if not init_rclpy(argv, NODE_NAME):
        return 2
    node = None
    executor = None
    spinner = None
    try:
        try:
            node = SimRigNode(ros_argv=argv)
        except (MbfgError, LookupError) as exc:
            rclpy.logging.get_logger(NODE_NAME).error(f"cannot start: {exc}")
            return 2
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = threading.Thread(target=_spin, args=(executor,), daemon=True)
        spinner.start()                # parameter services etc.
        try:
            return node.run()
        except (KeyboardInterrupt, ExternalShutdownException):
            return 0
    finally:
        if node is not None:
            node.stop()
        if executor is not None:
            executor.shutdown(timeout_sec=1.0)
        if spinner is not None:
            spinner.join(timeout=2.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def _spin(executor) -> None:
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:                  # noqa: BLE001 (the executor was shut down under it)
        pass


if __name__ == "__main__":
    sys.exit(main())
