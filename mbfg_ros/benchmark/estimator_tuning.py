"""The mbfg_ros estimator settings the benchmark uses.

Everything is the config's estimator section (keyframes at 200 Hz = the 5 ms step, lag 1 s,
the config's factor noises) except the dynamics noise (``noise.dynamics``, N m per coordinate:
how far the equations of motion may be off), which is set per mechanism and sensor set -- the
same for every gravity error, sensor period and seed of that set, never per cell:

- ``DYNAMICS_NOISE[(mechanism, sensors)] = (without, with)``: for the variants without online
  gravity estimation (and the batch reference, which estimates no gravity either) and for the
  variants with it. With gravity estimation: the config's 1 N m everywhere (the modelling
  error is a state of the graph). Without: 10 N m, except 1 N m on the five-bar with gyros,
  chosen from exploratory runs of seed 0 on a few cells among 1, 10, 30 and the
  filter-equivalent value below (seed 0 is therefore left out of the --full grid; see
  docs/benchmark/README.md). A looser model (30 N m and more) loses the position of the
  gyro-only rigs; 1 N m leaves the four-bar and the five-bar with encoders biased by the
  gravity error.

ONE configuration per mechanism and sensor set (:func:`rig_default`, the ``mbfg_default``
methods) for every gravity error, period and seed, chosen by a rule, never per cell:

- where encoders see every DOF position (``mbfg check``'s observability), online gravity
  estimation (a log scale: it cannot reach 0) AND the model-error state
  (``estimator.model_error``): an unknown generalised force on each DOF, a random walk of
  :data:`MODEL_ERROR_RATE` rad/s^2 per sqrt(s) times the DOFs' mean effective inertia at the
  config's pose (24 N m per sqrt(s) on the four-bar, 0.86 on the five-bar), with the config's
  dynamics noise (1 N m). The gravity scale takes a gravity error exactly; the force takes up
  what no parameter describes. Chosen on simulated four-bar / five-bar runs with an encoder at
  20 Hz, 6 s, seed 1 (``.scratch`` experiments, not the benchmark's truth): with a truth that
  has an unmodelled viscous friction of 30 N m s/rad on the crank, every variant without the
  force loses the four-bar (0.33-0.41 rad), with it 0.015 rad (4 rad/s^2 per sqrt(s)) or
  0.031 rad (1, with gravity); with a right model the force costs position and velocity
  accuracy (four-bar: 0.007 -> 0.013 rad, 0.019 -> 0.13 rad/s at 4; 0.0098 rad, 0.071 rad/s at
  1 with gravity); on the benchmark's gravity errors (seed 1, four cells) gravity plus the force
  at 1 is x1.2-2.2 better than the best filter, the force at 4 alone x0.8-1.1. Hence 1 rad/s^2
  per sqrt(s), with gravity.
- where the DOF positions are seen only through the dynamics (gyros), online gravity estimation
  too, but no model-error force: a free force on the DOF makes them unobservable (at rest any
  pose is held by some force: the four-bar with a coupler gyro then settles 1.8 rad away). What
  else the rig needs is measured per mechanism (:data:`WITHOUT_ENCODERS`, on exploration seeds 0..3 and
  100..107, never the evaluation seeds 4..23):

  - four-bar, one coupler gyro: 10 N m dynamics noise (as without gravity above; 1 N m: 2-8
    failed runs of 8 at p >= 5), and the relinearisation threshold of its config file,
    config/four_bar_gyro.yaml: 1e-4 rad. The gyro sees the crank through a ratio that changes
    sign twice a revolution, and no reading corrects a linearisation error: the default 3e-3
    left the estimate on another motion in 2-4 of 4 runs of the low-rate cells and made gravity
    estimation collapse (which the old verdict blamed on observability). With both, gravity
    estimation tracks in 64 of 64 runs of seeds 100..107 and 32 of 32 of seeds 0..3 (and then in
    160 of 160 of the evaluation grid, seeds 4..23; CPU per keyframe about 2x). The first keyframe's position prior stays the config's 0.5 rad: the
    filters' 5 deg made 6-8 of 8 runs per cell settle on the wrong branch.
  - five-bar, two coupler gyros: the config's dynamics noise and threshold, and the first
    keyframe's position as uncertain as the filters' initial position (5 deg): with the
    config's 0.5 rad, 1-2 runs of 8 per cell took a wrong motion for the first seconds
    (position RMSE 0.1-0.8 rad, one failed run), with 5 deg none of 64 (RMSE x1.5-2 where
    the run was right: the pose moves to the truth's pi/16 more slowly).

``filter_equivalent_dynamics_noise`` gives, for comparison, the dynamics noise whose implied DOF
acceleration noise equals the Kalman filters' velocity transition noise (50 deg/s per sqrt(s)):
about 190 N m on the four-bar and 6.5 N m on the five-bar.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from mbfg_ros.benchmark.observers.independent_model import IndependentModel
from mbfg_ros.benchmark.observers.tuning import FilterTuning
from mbfg_ros.model.config import EstimatorConfig, ModelErrorConfig
from mbfg_ros.model.mechanism import Mechanism

DYNAMICS_NOISE: dict[tuple[str, str], tuple[float, float]] = {
    ("four_bar", "encoder"): (10.0, 1.0),
    ("four_bar", "gyro"): (10.0, 1.0),
    ("five_bar", "encoder"): (10.0, 1.0),
    ("five_bar", "gyro"): (1.0, 1.0),
}
"""N m per coordinate: (without, with) online gravity estimation (see the module docstring)."""


MODEL_ERROR_RATE = 1.0
"""rad/s^2 per sqrt(s): the model-error random walk in DOF-acceleration terms (see rig_default)."""


@dataclass(frozen=True)
class GyroRigChoice:
    """What a rig whose DOF positions are seen only through the dynamics needs (None: the
    config's): dynamics noise (N m), the first keyframe's position prior (rad)."""
    dynamics: float | None = None
    prior_position: float | None = None


WITHOUT_ENCODERS: dict[str, GyroRigChoice] = {
    "four_bar": GyroRigChoice(dynamics=10.0),
    "five_bar": GyroRigChoice(prior_position=FilterTuning().initial_position),
}
"""The measured choices of the module docstring, per mechanism, where no encoder sees every DOF."""


@dataclass(frozen=True)
class RigDefault:
    """The one mbfg_ros configuration of a mechanism and sensor set: dynamics noise (N m),
    model-error random walk (N m per sqrt(s), 0 = off), online gravity estimation, and where
    not None the first keyframe's position prior (rad)."""
    dynamics: float
    model_error: float
    estimate_gravity: bool
    prior_position: float | None = None


def effective_inertia(mech: Mechanism) -> np.ndarray:
    """Mbar_ii = (R^T M R)_ii of every DOF at the config's pose (kg m^2 or kg)."""
    m = IndependentModel(mech)
    s = m.initial()
    R = m.velocity_matrix(s.q)
    return np.diag(R.T @ mech.mass_matrix(m.data, s.q) @ R).copy()


def rig_default(mech: Mechanism, mechanism: str) -> RigDefault:
    """The rule of the module docstring for ``mech``, the benchmark's ``mechanism`` with one of
    its sensor sets: gravity everywhere, the model-error state where encoders see every DOF,
    else the measured choices of WITHOUT_ENCODERS."""
    from mbfg_ros.model.assembly import initial_state
    from mbfg_ros.model.observability import observability
    data = mech.create_data()
    q, _ = initial_state(mech, data)
    direct = set(observability(mech, data, q).direct_positions) >= set(mech.dof_names)
    if direct:
        rw = MODEL_ERROR_RATE * float(np.mean(effective_inertia(mech)))
        return RigDefault(mech.config.estimator.noise.dynamics, rw, True)
    c = WITHOUT_ENCODERS.get(mechanism, GyroRigChoice())
    return RigDefault(c.dynamics or mech.config.estimator.noise.dynamics, 0.0, True, c.prior_position)


def rig_estimator_config(mech: Mechanism, mechanism: str, dt: float) -> EstimatorConfig:
    """:func:`estimator_config` with the rig's one default (:func:`rig_default`)."""
    d = rig_default(mech, mechanism)
    cfg = estimator_config(mech, d.estimate_gravity, dt, d.dynamics)
    # the first keyframe's velocity as uncertain as the filters' initial velocity (5 deg/s), like
    # with like (the config's 2 rad/s lets a gyro-only rig spin off in its first 0.1 s)
    noise = replace(cfg.noise, prior_velocity=FilterTuning().initial_velocity)
    if d.prior_position is not None:
        noise = replace(noise, prior_position=d.prior_position)
    return replace(cfg, noise=noise,
                   model_error=ModelErrorConfig(d.model_error) if d.model_error > 0 else ModelErrorConfig())


def dynamics_noise(mechanism: str, sensors: str, estimate_gravity: bool) -> float:
    """The benchmark's dynamics noise of a mechanism and sensor set (N m per coordinate)."""
    return DYNAMICS_NOISE[(mechanism, sensors)][1 if estimate_gravity else 0]


def filter_equivalent_dynamics_noise(mech: Mechanism, dt: float,
                                     tuning: FilterTuning | None = None) -> float:
    """sigma_tau (N m per coordinate) whose DOF acceleration noise over one step of ``dt``
    matches the filters' velocity transition noise: mean over the DOF of
    Mbar_ii sigma_v / (sqrt(dt) sqrt((R^T R)_ii)) at the config's pose (Mbar = R^T M R)."""
    tuning = tuning or FilterTuning()
    m = IndependentModel(mech)
    s = m.initial()
    R = m.velocity_matrix(s.q)
    Mbar = R.T @ mech.mass_matrix(m.data, s.q) @ R
    per_dof = np.diag(Mbar) * tuning.transition_velocity / (math.sqrt(dt) * np.sqrt(np.diag(R.T @ R)))
    return float(np.mean(per_dof))


def estimator_config(mech: Mechanism, estimate_gravity: bool, dt: float, dynamics: float) -> EstimatorConfig:
    """The config's estimator settings with keyframes every ``dt``, ``estimate_gravity`` and the
    dynamics noise ``dynamics`` (N m per coordinate). Like the filters, the estimator starts at
    the config's initial pose (``initial_pose: config``), not at its first encoder reading."""
    cfg = replace(mech.config.estimator, estimate_gravity=estimate_gravity, keyframe_rate=1.0 / dt,
                  initial_pose="config")
    return replace(cfg, noise=replace(cfg.noise, dynamics=dynamics))
