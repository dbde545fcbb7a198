"""Simulated truths shared by the simulator, io and CLI tests (each scenario integrated once)."""
from __future__ import annotations

from pathlib import Path

from mbfg_ros.model.mechanism import Mechanism, load_mechanism
from mbfg_ros.sim.forward import Trajectory, simulate
from mbfg_ros.sim.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent.parent
PENDULUM = ROOT / "test" / "fixtures" / "pendulum.yaml"
FIXTURES = {"pendulum": PENDULUM, "spring_mass": ROOT / "test" / "fixtures" / "spring_mass.yaml"}

_trajectories: dict[tuple, Trajectory] = {}
_mechanisms: dict[str, Mechanism] = {}


def config_path(name: str) -> Path:
    """config/<name>.yaml (e.g. 'iftomm/a03_andrews'), or a test fixture: 'pendulum', 'spring_mass'."""
    return FIXTURES.get(name, ROOT / "config" / f"{name}.yaml")


def config_mechanism(name: str) -> Mechanism:
    if name not in _mechanisms:
        _mechanisms[name] = load_mechanism(config_path(name))
    return _mechanisms[name]


def simulated(name: str, **scenario) -> Trajectory:
    """The trajectory of Scenario(**scenario) on the rig ``name`` (cached per session)."""
    key = (name, tuple(sorted((k, repr(v)) for k, v in scenario.items())))
    if key not in _trajectories:
        _trajectories[key] = simulate(config_mechanism(name), Scenario(**scenario))
    return _trajectories[key]
