"""Shared fixtures: every example rig is loaded once per test session."""
from __future__ import annotations

import importlib.util
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # test/support helpers

from mbfg_ros.model.mechanism import Mechanism, load_mechanism

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config"
ROS_TESTS = ROOT / "test" / "ros"
EXAMPLES = ["four_bar", "four_bar_gyro", "five_bar", "five_bar_gyro", "slider_crank", "spatial_rsur"]

_cache: dict[str, Mechanism] = {}


def mechanism(name: str) -> Mechanism:
    """The example rig ``config/<name>.yaml`` (built once)."""
    if name not in _cache:
        _cache[name] = load_mechanism(CONFIG / f"{name}.yaml")
    return _cache[name]


def load_tool(name: str):
    """The script ``tools/<name>.py`` as a module (registered in sys.modules: a tool's dataclasses
    look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pytest_report_header() -> str:
    """Which rclpy (so which ROS 2 distribution) this run tests: Kilted's 9.x or Jazzy's 7.x."""
    try:
        return f"rclpy: ros-rclpy {version('ros-rclpy')} in {sys.prefix}"
    except PackageNotFoundError:
        return f"rclpy: no ros-rclpy wheel in {sys.prefix} (a ROS 2 install's, if any)"


@pytest.hookimpl(tryfirst=True)            # before `-m distro` deselects
def pytest_collection_modifyitems(items) -> None:
    """Every test under test/ros is ROS-facing: it gets the marker ``distro`` (pytest.ini)."""
    for item in items:
        if ROS_TESTS in item.path.parents:
            item.add_marker(pytest.mark.distro)


@pytest.fixture(scope="session")
def four_bar() -> Mechanism:
    return mechanism("four_bar")


@pytest.fixture(scope="session")
def five_bar() -> Mechanism:
    return mechanism("five_bar")


@pytest.fixture(params=EXAMPLES)
def example(request) -> Mechanism:
    return mechanism(request.param)
