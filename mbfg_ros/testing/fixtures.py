"""pytest fixtures for HIL tests of a rig (real nodes, real DDS).

Use them from a conftest.py::

    from mbfg_ros.testing.fixtures import hil_run, ros_log_dir  # noqa: F401

``hil_run(config, **options)`` starts a :class:`~mbfg_ros.testing.hil.HilRun` (the sim_rig and
estimator processes on a private ROS domain, with an output monitor) and stops it after the
test, failed or not; its logs are under the test's ``tmp_path``.
"""
from __future__ import annotations

import pytest

from mbfg_ros.testing.hil import HilRun


@pytest.fixture
def ros_log_dir(tmp_path):
    """A directory for the processes' logs of one test."""
    path = tmp_path / "ros_logs"
    path.mkdir()
    return path


@pytest.fixture
def hil_run(ros_log_dir):
    """Factory: ``hil_run(config, duration=..., rig={...}, estimator={...}, use_sim_time=...)``
    returns a started HilRun; every run is closed at the end of the test."""
    runs: list[HilRun] = []

    def start(config, **options) -> HilRun:
        run = HilRun(config, ros_log_dir / f"run{len(runs)}", **options)
        runs.append(run)
        return run.start()

    yield start
    for run in runs:
        run.close()
