"""Shared fixtures: every example rig is loaded once per test session."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # test/support helpers

from mbfg_ros.model.mechanism import Mechanism, load_mechanism

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config"
EXAMPLES = ["four_bar", "four_bar_gyro", "five_bar", "five_bar_gyro", "slider_crank", "spatial_rsur"]

_cache: dict[str, Mechanism] = {}


def mechanism(name: str) -> Mechanism:
    """The example rig ``config/<name>.yaml`` (built once)."""
    if name not in _cache:
        _cache[name] = load_mechanism(CONFIG / f"{name}.yaml")
    return _cache[name]


@pytest.fixture(scope="session")
def four_bar() -> Mechanism:
    return mechanism("four_bar")


@pytest.fixture(scope="session")
def five_bar() -> Mechanism:
    return mechanism("five_bar")


@pytest.fixture(params=EXAMPLES)
def example(request) -> Mechanism:
    return mechanism(request.param)
