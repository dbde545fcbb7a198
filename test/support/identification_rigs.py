"""A pendulum to identify: a nominal config (the model) and a truth config (what the simulator
runs) that differ in every parameter group the pendulum has; readings of a simulated run."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mbfg_ros.estimation.smoothing_io import Readings
from mbfg_ros.model.channels import command_joint
from mbfg_ros.model.config import load_rig_config
from mbfg_ros.sim.forward import Trajectory, simulate
from mbfg_ros.sim.scenario import Scenario
from mbfg_ros.sim.sensors import SensorOptions, synthesize_series

URDF = Path(__file__).resolve().parent.parent / "fixtures" / "pendulum.urdf"
MASS_FACTOR = 1.1
"""The truth's rod mass and inertia are the URDF's times this."""

NOMINAL = f"""# A rod pendulum driven by a measured torque (the identification tests' nominal model).
mechanism:
  urdf: {URDF}
  gravity: [0.0, -9.81, 0.0]
  initial: {{positions: {{pivot: 0.1}}}}
joints:
  pivot: {{viscous: 0.05, coulomb: 0.1, armature: 0.01, actuation: known}}   # the drive
sensors:
  encoders:
    - {{name: pivot_encoder, joint: pivot, noise: 0.001, topic: encoders}}
estimator:
  native_code: "off"        # (CasADi's virtual machine: no compiler run in the tests)
  noise:
    dynamics: 0.05          # N m
"""
TRUTH = (NOMINAL.replace("viscous: 0.05, coulomb: 0.1, armature: 0.01,",
                         "viscous: 0.07, coulomb: 0.13, armature: 0.012, offset: 0.05,")
         .replace("topic: encoders}", "topic: encoders, offset: 0.01}"))


def write_configs(directory: Path) -> tuple[Path, Path]:
    """(nominal.yaml, truth.yaml) in ``directory``."""
    nominal, truth = directory / "nominal.yaml", directory / "truth.yaml"
    nominal.write_text(NOMINAL)
    truth.write_text(TRUTH)
    return nominal, truth


def scenario(duration: float, seed: int = 1) -> Scenario:
    """Random torques (3 N m, knots at 2 Hz) from the start; the rod 10 % heavier."""
    return Scenario(duration=duration, input_profile="random", input_amplitude=3.0, input_frequency=2.0,
                    input_start=0.0, mass_scale={"rod": MASS_FACTOR}, seed=seed)


def truth_trajectory(truth: Path, duration: float, seed: int = 1) -> Trajectory:
    return simulate(load_rig_config(truth), scenario(duration, seed))


def readings(trajectory: Trajectory, seed: int = 2, t0: float = 0.0, t1: float = np.inf) -> Readings:
    """The run's sensor and command readings with stamps in [t0, t1)."""
    out = Readings()
    for s in synthesize_series(trajectory, SensorOptions(seed=seed)):
        keep = (s.stamp >= t0) & (s.stamp < t1)
        joint = command_joint(s.channel.name)
        (out.commands if joint is not None else out.sensors)[joint or s.channel.name] = (s.stamp[keep], s.value[keep])
    return out
