"""What the simulator simulates: the truth's deviations from the config, inputs, friction.

The mechanism config is the model an estimator uses. A :class:`Scenario` describes how the
simulated truth differs from it (gravity, masses, lengths, initial state), which input efforts
act on the actuated joints, and whether the joints have friction. :func:`truth_mechanism`
compiles the truth's :class:`~mbfg_ros.model.mechanism.Mechanism` from the config.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mbfg_ros.errors import ConfigError, MbfgError
from mbfg_ros.model.config import RigConfig, load_rig_config
from mbfg_ros.model.mechanism import Mechanism

INPUT_PROFILES = ("none", "step", "sine", "random")


@dataclass(frozen=True)
class Scenario:
    """One simulated run (all fields optional; the default is the config's nominal rig at rest
    at its initial pose, frictional as configured, without inputs, for 10 s).

    Attributes:
        duration: simulated time, s (> 0).
        gravity_error: m/s^2 added to the magnitude of the TRUTH's gravity (its direction is the
            config's): an estimator using the config is then wrong by this much.
        mass_scale: {link: factor}: the truth's link mass and inertia tensor are the URDF's
            times factor (centre of mass unchanged).
        length_scale: {joint: factor}: the truth's joint placement offset (the URDF joint origin,
            i.e. the length of the parent link up to that joint) is the config's times factor.
        initial_dof_offset: rad or m added to the config's initial DOF values
            (``mechanism.initial.positions``, in ``mechanism.dof`` order) for the truth's start; a
            scalar applies to every DOF. An estimator started from the config is off by minus it.
        initial_dof_velocity: rad/s or m/s, the truth's initial DOF velocities (replacing the
            config's ``initial.velocities``); None keeps the config's.
        input_profile: none | step | sine | random, applied to every known-input and
            unknown-input joint (``actuation: known/unknown``); none means zero input efforts.
        input_amplitude: N m (N for prismatic joints): step height, sine amplitude, or the
            standard deviation of the random profile.
        input_frequency: Hz: sine frequency; for random, the knot rate of the smooth random
            signal (its bandwidth).
        input_start: s: the input is zero before this time.
        input_offset: N m (N): a constant effort added to the profile from ``input_start`` (a
            motor's mean torque under a periodic ripple: ``sine`` with an offset).
        input_scale: {joint: factor}: that joint's effort (profile and offset) times factor (an
            arm's wrists take a fraction of its shoulder's torque).
        friction: use the config's joint friction in the truth (False: frictionless truth).
        disturbance: N m (N for prismatic joints): the standard deviation of an unmodelled
            generalised force on every joint, a fresh Gaussian draw per joint held for
            1 / ``disturbance_rate`` s (piecewise constant, white up to half that rate), from
            t = 0; never published by a sensor. It is what the estimator's ``noise.dynamics``
            stands for: a disturbance of sigma d at rate r has the spectral density d^2 / r, the
            same as the estimator's dynamics rows of sigma d at keyframe rate r. 0: none.
        disturbance_rate: Hz, the rate at which the disturbance draws (default 200, the default
            keyframe rate).
        seed: seed of the random input profile and of the disturbance.
    """
    duration: float = 10.0
    gravity_error: float = 0.0
    mass_scale: dict[str, float] = field(default_factory=dict)
    length_scale: dict[str, float] = field(default_factory=dict)
    initial_dof_offset: tuple[float, ...] | float = 0.0
    initial_dof_velocity: tuple[float, ...] | None = None
    input_profile: str = "none"
    input_amplitude: float = 1.0
    input_frequency: float = 0.5
    input_start: float = 1.0
    input_offset: float = 0.0
    input_scale: dict[str, float] = field(default_factory=dict)
    friction: bool = True
    disturbance: float = 0.0
    disturbance_rate: float = 200.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.duration) and self.duration > 0):
            raise MbfgError(f"scenario duration must be a positive number of seconds "
                            f"(value: {self.duration!r})")
        if self.input_profile not in INPUT_PROFILES:
            raise MbfgError(f"unknown input profile {self.input_profile!r} "
                            f"(known: {', '.join(INPUT_PROFILES)})")
        if not math.isfinite(self.input_offset):
            raise MbfgError(f"input_offset must be a finite effort (value: {self.input_offset!r})")
        if self.input_profile in ("sine", "random") and not self.input_frequency > 0:
            raise MbfgError(f"input_frequency must be positive for the {self.input_profile} "
                            f"profile (value: {self.input_frequency!r})")
        if not (math.isfinite(self.disturbance) and self.disturbance >= 0):
            raise MbfgError(f"disturbance must be a standard deviation >= 0 (N m or N; value: {self.disturbance!r})")
        if not (math.isfinite(self.disturbance_rate) and self.disturbance_rate > 0):
            raise MbfgError(f"disturbance_rate must be a positive rate in Hz (value: {self.disturbance_rate!r})")
        for what, scales in (("mass_scale", self.mass_scale), ("length_scale", self.length_scale),
                             ("input_scale", self.input_scale)):
            for name, factor in scales.items():
                if not (math.isfinite(factor) and factor > 0):
                    raise MbfgError(f"{what} of {name!r} must be a positive factor (value: {factor!r})")

    def describe(self) -> dict:
        """The scenario as plain JSON-able data."""
        off = self.initial_dof_offset
        return {
            "duration": self.duration, "gravity_error": self.gravity_error,
            "mass_scale": dict(self.mass_scale), "length_scale": dict(self.length_scale),
            "initial_dof_offset": list(off) if isinstance(off, (tuple, list)) else off,
            "initial_dof_velocity": None if self.initial_dof_velocity is None
            else list(self.initial_dof_velocity),
            "input_profile": self.input_profile, "input_amplitude": self.input_amplitude,
            "input_frequency": self.input_frequency, "input_start": self.input_start,
            "input_offset": self.input_offset, "input_scale": dict(self.input_scale),
            "friction": self.friction, "disturbance": self.disturbance,
            "disturbance_rate": self.disturbance_rate, "seed": self.seed,
        }


def truth_gravity(config_gravity, gravity_error: float) -> np.ndarray:
    """The config's gravity vector with ``gravity_error`` added to its magnitude (m/s^2)."""
    g = np.asarray(config_gravity, float)
    norm = float(np.linalg.norm(g))
    if gravity_error == 0.0:
        return g.copy()
    if norm == 0.0:
        raise MbfgError("a gravity error needs a config with gravity (mechanism.gravity is zero, "
                        "so the direction of the error is undefined)")
    return g * (norm + gravity_error) / norm


def scaled_inertials(urdf_xml: str, mass_scale: dict[str, float]) -> str:
    """The URDF text with each listed link's mass and inertia tensor multiplied by its factor
    (centre of mass unchanged). Raises MbfgError for a link without an <inertial>."""
    root = ET.fromstring(urdf_xml)
    links = {lk.get("name"): lk for lk in root.findall("link")}
    for name, factor in mass_scale.items():
        inertial = links[name].find("inertial")
        mass = inertial.find("mass") if inertial is not None else None
        if mass is None:
            raise MbfgError(f"mass_scale: link {name!r} has no <inertial> mass in the URDF to scale")
        mass.set("value", repr(float(mass.get("value")) * factor))
        tensor = inertial.find("inertia")
        if tensor is not None:
            for key in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
                if tensor.get(key) is not None:
                    tensor.set(key, repr(float(tensor.get(key)) * factor))
    return ET.tostring(root, encoding="unicode")


def _check_names(what: str, names, known: list[str], kind: str) -> None:
    for name in names:
        if name not in known:
            raise MbfgError(f"{what}: unknown {kind} {name!r} (known: {', '.join(known)})")


def truth_mechanism(config_or_mech: RigConfig | Mechanism | str | Path, scenario: Scenario) -> Mechanism:
    """The truth's Mechanism: the config with the scenario's gravity, mass and length errors,
    and without joint friction when ``scenario.friction`` is False.

    Raises MbfgError naming an unknown link (mass_scale) or joint (length_scale).
    """
    if isinstance(config_or_mech, Mechanism):
        config = config_or_mech.config
    elif isinstance(config_or_mech, RigConfig):
        config = config_or_mech
    else:
        config = load_rig_config(config_or_mech)
    if not scenario.friction:
        config = replace(config, joints={name: replace(j, viscous=0.0, coulomb=0.0)
                                         for name, j in config.joints.items()})
    file = str(config.source) if config.source else None
    try:
        nominal = Mechanism(config)
        _check_names("mass_scale", scenario.mass_scale, nominal.link_names, "link")
        _check_names("length_scale", scenario.length_scale, nominal.joint_names, "joint")
        if not scenario.mass_scale and not scenario.length_scale and scenario.gravity_error == 0.0:
            return nominal
        gravity = truth_gravity(config.gravity, scenario.gravity_error)
        xml = scaled_inertials(nominal.urdf.xml, scenario.mass_scale) if scenario.mass_scale else None
        return Mechanism(config, urdf_xml=xml, gravity=tuple(gravity),
                         length_scale=dict(scenario.length_scale))
    except ConfigError as exc:
        raise exc.with_file(file) if file else exc from None
