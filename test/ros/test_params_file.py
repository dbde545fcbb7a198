"""ROS 2 parameters files: the example file and a file shared with other nodes start the node;
a name in a wildcard section the node lacks is a warning, in the node's own section an error.
Real processes on a private DDS domain."""
from __future__ import annotations

import time

import pytest
import yaml

from conftest import CONFIG
from mbfg_ros.ros.parameter_tables import ESTIMATOR_PARAMETERS
from mbfg_ros.ros.launch_description import Description, NodeSpec, read_params_file
from mbfg_ros.ros.processes import NodeProcesses, ros_environment

FOUR_BAR = str(CONFIG / "four_bar.yaml")
EXAMPLE = CONFIG / "estimator.params.yaml"


def _estimator(name: str, files: list[str], params: dict) -> NodeSpec:
    return NodeSpec(name, "estimator", "mbfg_ros.ros.estimator_node", parameters=params,
                    params_files=tuple(files))


def test_the_example_params_file_lists_every_parameter_at_its_default():
    (section,) = yaml.safe_load(EXAMPLE.read_text()).values()
    given = section["ros__parameters"]
    files = {"config", "robot_description", "urdf"}       # per rig: launch arguments
    assert set(given) == {s.name for s in ESTIMATOR_PARAMETERS} - files
    for s in ESTIMATOR_PARAMETERS:
        if s.name in given:
            assert given[s.name] == s.default, s.name
    node = NodeSpec("mbfg_estimator", "estimator", "m", namespace="rig1")
    assert read_params_file(str(EXAMPLE), [node]) == {"/rig1/mbfg_estimator": given}


@pytest.mark.ros
def test_params_files_start_the_node_and_wildcard_extras_only_warn(tmp_path):
    shared = tmp_path / "shared.params.yaml"          # e.g. a MoveIt-style file for every node
    shared.write_text(yaml.safe_dump({"/**": {"ros__parameters": {
        "robot_description_semantic": "<robot name='x'/>", "lag": 0.5, "use_sim_time": False}}}))
    own = tmp_path / "own.params.yaml"
    own.write_text(yaml.safe_dump({"/est_typo": {"ros__parameters": {"lagg": 0.5}}}))
    nodes = [_estimator("est_example", [str(EXAMPLE)], {"config": FOUR_BAR}),
             _estimator("est_shared", [str(shared)], {"config": FOUR_BAR}),
             _estimator("est_typo", [str(own)], {"config": FOUR_BAR})]
    procs = NodeProcesses(Description("params", nodes), tmp_path, ros_environment(tmp_path))
    with procs:
        end = time.monotonic() + 90                       # the typo exits; the others run on
        while time.monotonic() < end:
            logs = {n.name: procs.log_text(n.name) for n in nodes}
            started = all("outputs under" in logs[n] for n in ("est_example", "est_shared"))
            if started and procs.poll()["est_typo"] is not None:
                break
            time.sleep(0.2)
        logs = {n.name: procs.log_text(n.name) for n in nodes}
        alive = {name for name, rc in procs.poll().items() if rc is None}
    assert alive == {"est_example", "est_shared"}, logs
    for name in alive:
        assert "four_bar: 3 joints, 1 DOF" in logs[name], logs[name]
    assert "lag 1 s" in logs["est_example"] and "lag 0.5 s" in logs["est_shared"]
    warn = [ln for ln in logs["est_shared"].splitlines() if "[WARN]" in ln]
    assert len(warn) == 1 and "ignoring parameter(s) 'robot_description_semantic'" in warn[0], logs["est_shared"]
    assert "[ERROR]" not in logs["est_shared"] and "[WARN]" not in logs["est_example"]
    errors = [ln for ln in logs["est_typo"].splitlines() if "[ERROR]" in ln]
    assert len(errors) == 1 and "unknown parameter(s) 'lagg'" in errors[0], logs["est_typo"]
    assert procs.poll()["est_typo"] == 2
