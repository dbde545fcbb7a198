"""Shared fixtures: every example rig is loaded once per test session."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # test/support helpers

# Every node the tests start (and the monitors in this process) talk over UDP on loopback, not
# Fast DDS's shared memory: a node killed by an earlier test can leave a shared-memory port
# mutex or segment behind, and a later participant on the same port can then block forever at
# start-up or stop receiving (eProsima/Fast-DDS#1144, #5469; seen here once: a node's start
# hung 180 s with an empty log). A value set by the caller wins.
os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4")

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
