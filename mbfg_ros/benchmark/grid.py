"""The benchmark grid: cells (mechanism x sensor set x gravity error x sensor period), seeds, and
the models each cell uses.

Protocol (the observer benchmark of Sanjurjo et al.; docs/benchmark/README.md): the truth is the config's rig with g = 9.81 m/s^2,
released from rest at the config's initial pose plus ``initial_error`` rad on every DOF (the
toolkit's +pi/16); the observers, the baselines and mbfg_ros alike, use the WRONG model whose
gravity magnitude is 9.81 - ``gravity_error`` (same direction) and start at the config's pose.
The time step is ``dt`` = 5 ms (the mbfg_ros keyframe period, 200 Hz); a cell's sensors are read
every ``period`` steps (rate 1 / (period dt)); noise is the configs' (encoder 1 deg, gyro
1 deg/s).

Sensor sets: the configs config/<mechanism>.yaml (encoders) and config/<mechanism>_gyro.yaml
(gyros), reduced to the set's sensors (four_bar.yaml's load cell is left out) with every rate
set to the cell's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mbfg_ros.errors import CliError
from mbfg_ros.model.config import RigConfig, SensorsConfig, load_rig_config
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.package_share import config_dir

MECHANISMS = ("four_bar", "five_bar")
SENSOR_SETS = ("encoder", "gyro")
CONFIG_FILES = {("four_bar", "encoder"): "four_bar.yaml", ("four_bar", "gyro"): "four_bar_gyro.yaml",
                ("five_bar", "encoder"): "five_bar.yaml", ("five_bar", "gyro"): "five_bar_gyro.yaml"}
DEFAULT_CONFIG_DIR = config_dir()
"""config/ of the source tree, or of the installed package's share directory."""
TRUE_GRAVITY = 9.81
"""m/s^2, the truth's gravity magnitude (the benchmark's)."""


@dataclass(frozen=True)
class Cell:
    """One cell of the grid. gravity_error: m/s^2 taken off the observers' gravity magnitude;
    period: sensor readings every ``period`` time steps."""
    mechanism: str
    sensors: str
    gravity_error: float
    period: int

    @property
    def key(self) -> str:
        """A stable identifier, e.g. ``four_bar/gyro/g+4/p10``."""
        return f"{self.mechanism}/{self.sensors}/g+{self.gravity_error:g}/p{self.period}"

    @property
    def block(self) -> str:
        """The cells that share a figure and a table block (all periods)."""
        return f"{self.mechanism}/{self.sensors}/g+{self.gravity_error:g}"


@dataclass(frozen=True)
class GridOptions:
    """What to run. ``seeds`` are the seeds of the sensor noise (the truth is deterministic);
    ``duration`` s per run; ``dt`` s per step; ``initial_error`` rad added to the truth's DOF;
    ``dynamics_noise`` / ``dynamics_noise_g``: override the mbfg_ros dynamics noise of every
    cell (N m; None: the per-set values of :mod:`mbfg_ros.benchmark.estimator_tuning`)."""
    mechanisms: tuple[str, ...] = MECHANISMS
    sensor_sets: tuple[str, ...] = SENSOR_SETS
    gravity_errors: tuple[float, ...] = (1.0, 4.0)
    periods: tuple[int, ...] = (1, 5, 10, 15)
    seeds: tuple[int, ...] = tuple(range(20))
    duration: float = 10.0
    dt: float = 0.005
    initial_error: float = math.pi / 16
    methods: tuple[str, ...] = ()
    fail_threshold: float = 0.1
    config_dir: Path = DEFAULT_CONFIG_DIR
    dynamics_noise: float | None = None
    dynamics_noise_g: float | None = None

    def cells(self) -> list[Cell]:
        """Every cell, in table order."""
        return [Cell(m, s, g, p) for m in self.mechanisms for s in self.sensor_sets
                for g in self.gravity_errors for p in self.periods]

    @property
    def steps(self) -> int:
        """Time steps per run (the truth and every estimate are compared at t = k dt)."""
        return int(math.ceil(self.duration / self.dt - 1e-9))

    def describe(self) -> dict:
        return {"mechanisms": list(self.mechanisms), "sensor_sets": list(self.sensor_sets),
                "gravity_errors": list(self.gravity_errors), "periods": list(self.periods),
                "seeds": list(self.seeds), "duration": self.duration, "dt": self.dt,
                "initial_error": self.initial_error, "methods": list(self.methods),
                "fail_threshold": self.fail_threshold, "true_gravity": TRUE_GRAVITY,
                "dynamics_noise": self.dynamics_noise, "dynamics_noise_g": self.dynamics_noise_g}


def check_options(options: GridOptions) -> None:
    """Raise CliError naming the option and the value that cannot run."""
    for m in options.mechanisms:
        if m not in MECHANISMS:
            raise CliError(f"--mechanisms: unknown mechanism {m!r} (known: {', '.join(MECHANISMS)})")
    for s in options.sensor_sets:
        if s not in SENSOR_SETS:
            raise CliError(f"--sensors: unknown sensor set {s!r} (known: {', '.join(SENSOR_SETS)})")
    for g in options.gravity_errors:
        if not (math.isfinite(g) and 0.0 <= g < TRUE_GRAVITY):
            raise CliError(f"--gravity-errors: {g!r} is not an error in [0, {TRUE_GRAVITY}) m/s^2")
    for p in options.periods:
        if p < 1:
            raise CliError(f"--periods: {p!r} is not a number of time steps >= 1")
    if not (math.isfinite(options.duration) and options.duration >= 10 * options.dt):
        raise CliError(f"--duration: {options.duration!r} s is too short (at least {10 * options.dt:g} s)")
    if not options.seeds:
        raise CliError("--seeds: at least one seed is needed")
    for name in ("dynamics_noise", "dynamics_noise_g"):
        value = getattr(options, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise CliError(f"--{name.replace('_', '-')}: must be a positive N m (value: {value!r})")
    if not (options.fail_threshold > 0):
        raise CliError(f"--fail-threshold: {options.fail_threshold!r} is not a positive angle (rad)")
    for m in options.mechanisms:
        for s in options.sensor_sets:
            path = options.config_dir / CONFIG_FILES[(m, s)]
            if not path.is_file():
                raise CliError(f"the benchmark's config {path} does not exist (--config-dir)")


def benchmark_config(options: GridOptions, cell: Cell) -> RigConfig:
    """The cell's rig config: the set's sensors only, every rate the cell's."""
    cfg = load_rig_config(options.config_dir / CONFIG_FILES[(cell.mechanism, cell.sensors)])
    rate = sensor_rate(options, cell)
    s = cfg.sensors
    if cell.sensors == "encoder":
        sensors = SensorsConfig(encoders=tuple(replace(e, rate=rate) for e in s.encoders))
    else:
        sensors = SensorsConfig(gyros=tuple(replace(g, rate=rate) for g in s.gyros))
    return replace(cfg, sensors=sensors)


def sensor_rate(options: GridOptions, cell: Cell) -> float:
    """Hz, one reading every ``cell.period`` steps."""
    return 1.0 / (cell.period * options.dt)


def observer_gravity(config: RigConfig, gravity_error: float) -> tuple[float, float, float]:
    """The observers' gravity: the config's direction, magnitude 9.81 - error (m/s^2)."""
    g = np.asarray(config.gravity, float)
    return tuple(float(x) for x in g / np.linalg.norm(g) * (TRUE_GRAVITY - gravity_error))


def observer_mechanism(config: RigConfig, gravity_error: float) -> Mechanism:
    """The (wrong) model every method of the cell uses."""
    return Mechanism(config, gravity=observer_gravity(config, gravity_error))


def truth_config(config: RigConfig) -> RigConfig:
    """The truth's config: the same rig with gravity of magnitude 9.81 m/s^2."""
    g = np.asarray(config.gravity, float)
    return replace(config, gravity=tuple(float(x) for x in g / np.linalg.norm(g) * TRUE_GRAVITY))


QUICK = GridOptions(gravity_errors=(1.0,), periods=(1, 10), seeds=(0,), duration=3.0)
"""``mbfg benchmark --quick``: both mechanisms and sensor sets, +1 m/s^2, every 1 and 10 steps,
one seed, 3 s runs (the methods are chosen in the CLI)."""

FULL = GridOptions()
"""``mbfg benchmark --full``: the paper's grid (the seed count is set by the CLI)."""
