"""Short benchmark runs shared by the benchmark tests (each built once per session)."""
from __future__ import annotations

from mbfg_ros.benchmark.grid import Cell, GridOptions
from mbfg_ros.benchmark.methods import RunData
from mbfg_ros.benchmark.metrics import Truth
from mbfg_ros.benchmark.runner import run_data

_runs: dict[tuple, tuple[RunData, Truth]] = {}


def short_run(mechanism: str = "four_bar", sensors: str = "encoder", gravity_error: float = 1.0,
              period: int = 1, duration: float = 1.5, seed: int = 0) -> tuple[RunData, Truth]:
    """RunData and truth of a short run of the benchmark protocol (pi/16 initial error)."""
    key = (mechanism, sensors, gravity_error, period, duration, seed)
    if key not in _runs:
        options = GridOptions(duration=duration)
        _runs[key] = run_data(options, Cell(mechanism, sensors, gravity_error, period), seed)
    return _runs[key]
