"""Bags for the replay tests: simulated runs (cached trajectories) and deliberately broken ones."""
from __future__ import annotations

import shutil
from pathlib import Path

from support.simulations import config_mechanism, simulated
from mbfg_ros.io import messages as msgs
from mbfg_ros.io.bag_writer import BagWriter, write_simulation_bag
from mbfg_ros.io.simulation_messages import BagMessage, sensor_messages, truth_messages
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.sensors import SensorOptions, synthesize

EPOCH_NS = msgs.seconds_to_ns(msgs.DEFAULT_EPOCH)


def simulated_bag(path: Path, name: str = "four_bar", duration: float = 3.0, truth: bool = True,
                  storage: str = "mcap", scenario: dict | None = None, **sensor_options) -> Path:
    """A bag as ``mbfg simulate`` writes it (sensors of config ``name``, ground truth at 200 Hz)."""
    tr = simulated(name, duration=duration, **(scenario or {}))
    samples = synthesize(tr, SensorOptions(**sensor_options))
    write_simulation_bag(path, config_mechanism(name), samples, ground_truth(tr) if truth else None,
                         storage=storage)
    return path


def simulated_messages(name: str = "four_bar", duration: float = 1.0, truth: bool = False,
                       **sensor_options) -> list[BagMessage]:
    """The messages of a simulated run (sensors, and truth if asked), in log-time order."""
    tr = simulated(name, duration=duration)
    mech = config_mechanism(name)
    out = list(sensor_messages(synthesize(tr, SensorOptions(**sensor_options)), mech, EPOCH_NS))
    if truth:
        out += list(truth_messages(ground_truth(tr), mech, EPOCH_NS))
        out.sort(key=lambda m: m.log_time_ns)
    return out


def write_bag(path: Path, messages: list[BagMessage], storage: str = "mcap") -> Path:
    """Write ``messages`` as given (their order and log times)."""
    with BagWriter(path, storage=storage) as bag:
        for m in messages:
            bag.write(m)
    return path


def damaged_copy(src: Path, dst: Path, mutate) -> Path:
    """A copy of the bag directory ``src`` at ``dst`` whose MCAP file's bytes are ``mutate(bytes)``."""
    shutil.copytree(src, dst)
    mcap = next(dst.glob("*.mcap"))
    mcap.write_bytes(mutate(bytearray(mcap.read_bytes())))
    return dst
