"""A looping bag (replay description: the bag player with --clock --loop, the estimator on sim
time) makes time jump backwards at every loop: the estimator resets, logs it once per jump,
and keeps estimating. Real processes over DDS."""
from __future__ import annotations

import re

import pytest

from conftest import CONFIG
from mbfg_ros.io.bag_writer import write_simulation_bag
from mbfg_ros.ros.launch_description import replay_description
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.ground_truth import ground_truth
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize
from mbfg_ros.testing.hil import HilRun

pytestmark = pytest.mark.ros


def test_bag_loop_resets_the_estimator_once_per_jump(four_bar, tmp_path):
    bag = tmp_path / "loop_bag"
    trajectory = simulate(four_bar, Scenario(duration=1.5))
    write_simulation_bag(bag, four_bar, synthesize(trajectory, SensorOptions()),
                         ground_truth(trajectory, 200.0))
    description = replay_description(str(bag), str(CONFIG / "four_bar.yaml"), loop=True)
    with HilRun(CONFIG / "four_bar.yaml", tmp_path / "logs", description=description,
                watch=("joint_states", "/diagnostics")) as run:
        run.wait_for_estimates(timeout=90)
        run.wait_for_status(
            lambda m: m.node_status("outputs") is not None
            and int(m.node_status("outputs").values["jumps_backwards"]) >= 2, 90, "two bag loops")
        count = len(run.monitor.estimates)
        run.wait_for_status(lambda m: len(m.estimates) > count + 100, 60, "estimates after the loops")
        jumps = int(run.monitor.node_status("outputs").values["jumps_backwards"])
        resets = int(run.monitor.node_status("solver").values["resets"])
        log = run.processes.log_text("mbfg_estimator")
    logged = re.findall(r"time jumped backwards .*: estimator reset", log)
    # every jump logged exactly once (a jump may happen after the last diagnostics)
    assert jumps >= 2 and resets >= jumps
    assert jumps <= len(logged) <= jumps + 1, log
