"""The mechanism config: one YAML file that describes one rig, validated into dataclasses.

A rig is a URDF (kinematic tree, inertias, limits) plus this file, which says what URDF cannot:
loop closures, the independent coordinates, friction and actuation per joint, springs between
frames, the sensors, and the estimator's settings. The schema is documented field by field in README.md ("Mechanism
config reference") and in the comments of config/four_bar.yaml.

Units: SI throughout (m, kg, s, rad, N, N m); rates in Hz; noise values are one standard deviation.
Names refer to the URDF: joints by joint name, frames by link name, by the name of a fixed joint's
child link, or by a frame declared in ``frames:``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, make_dataclass, replace
from pathlib import Path
from typing import Any

from mbfg_ros.errors import ConfigError
from mbfg_ros.model.config_fields import (AXES, GRAVITY_LIMIT, KEYFRAME_RATE_RANGE, LAG_RANGE,  # noqa: F401
                                          MAX_WINDOW_KEYFRAMES, NOISE_RANGE, ROBUST_THRESHOLD_RANGE,
                                          SENSOR_RATE_RANGE, noise_field, topic_field)
from mbfg_ros.model.yaml_reader import YamlNode, load_yaml_file
from mbfg_ros.model.speed import needed_keyframe_rate
# the sensor kinds' sections (each kind's module, mbfg_ros/sensors), importable from here too
from mbfg_ros.sensors.accelerometer import AccelerometerConfig  # noqa: F401
from mbfg_ros.sensors.encoder import EncoderConfig  # noqa: F401
from mbfg_ros.sensors.gyro import GyroConfig  # noqa: F401
from mbfg_ros.sensors.load_cell import MEASURES, LoadCellConfig  # noqa: F401
from mbfg_ros.sensors.registry import SENSOR_KINDS

CLOSURE_TYPES = ("point", "planar_revolute", "revolute", "prismatic", "planar_prismatic", "weld",
                 "distance")
"""Loop-closure (cut-joint) kinds and their number of constraint rows (see closures.py)."""

ACTUATION_KINDS = ("passive", "known", "unknown")
LOAD_CELL_KINDS = MEASURES
ROBUST_LOSSES = ("none", "huber", "cauchy")
INTEGRATORS = ("hermite", "trapezoidal", "euler")
INPUT_MODELS = ("random_walk", "integrated", "jerk")
"""``estimator.input_model``: how an unknown input is predicted from one keyframe to the next
(:mod:`mbfg_ros.estimation.layout`, the rate columns): ``random_walk`` holds the effort
(``noise.input_random_walk``); ``integrated`` extrapolates it with its rate, which walks
(``noise.input_rate_walk``); ``jerk`` leaves the effort free and extrapolates the input joint's
acceleration with its jerk, which walks (``noise.jerk_walk``): the effort is then what the
equations of motion need for that motion."""


@dataclass(frozen=True)
class FrameConfig:
    """An extra frame rigidly attached to a link (or to another frame)."""
    name: str
    parent: str
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class ClosureConfig:
    """A cut joint closing a kinematic loop between frame_a and frame_b.

    ``axis`` (in frame_a) is the hinge axis of revolute closures and the slide axis of prismatic
    ones; ``plane_normal`` (in the base frame) is the normal of the motion plane of planar kinds;
    ``length`` is the rod length of a ``distance`` closure (m).
    """
    name: str
    type: str
    frame_a: str
    frame_b: str
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    plane_normal: tuple[float, float, float] = (0.0, 0.0, 1.0)
    length: float | None = None


@dataclass(frozen=True)
class SpringConfig:
    """A linear spring-damper between the origins of frame_a and frame_b (two bodies): tension
    F = stiffness (L - rest_length) + damping L' along the line joining them (L their distance,
    m; F in N, pulling them together when positive; see mbfg_ros/model/springs.py)."""
    name: str
    frame_a: str
    frame_b: str
    stiffness: float = 0.0          # N/m
    rest_length: float = 0.0        # m
    damping: float = 0.0            # N s/m


@dataclass(frozen=True)
class JointConfig:
    """Physics of one joint beyond URDF: the drive (friction, rotor inertia, offset) and actuation.

    Friction torque (or force) = viscous * v + coulomb * tanh(v / coulomb_velocity).
    ``armature``: the rotor inertia reflected through the gear (kg m^2 or kg; a motor's rotor
    inertia times the gear ratio squared), added to the mass matrix's diagonal (pinocchio's
    ``model.armature``). ``offset``: a constant effort (N m or N, either sign) on the same side
    as the friction: the input needs this much more, M a + h + F(v) + offset = input.
    actuation: ``passive`` (no input), ``known`` (input effort read from ``topic``, a
    sensor_msgs/JointState with effort by joint name) or ``unknown`` (estimated).
    """
    name: str
    viscous: float = 0.0
    coulomb: float = 0.0
    coulomb_velocity: float = 0.01
    armature: float = 0.0
    offset: float = 0.0
    actuation: str = "passive"
    topic: str = "joint_commands"


def _sensors_all(self) -> tuple[Any, ...]:
    """Every sensor's config, in the kinds' order (encoders, gyros, load cells, ...)."""
    return tuple(c for kind in SENSOR_KINDS for c in getattr(self, kind.section))


SensorsConfig = make_dataclass(
    "SensorsConfig", [(kind.section, tuple, field(default=())) for kind in SENSOR_KINDS], frozen=True,
    namespace={"all": _sensors_all, "__module__": __name__,
               "__doc__": "The config's sensors: one tuple of configs per sensor kind's section "
                          "(``encoders``, ``gyros``, ``load_cells``, ``accelerometers``: "
                          ":data:`mbfg_ros.sensors.registry.SENSOR_KINDS`), in file order."})


@dataclass(frozen=True)
class NoiseConfig:
    """Standard deviations of the estimator's factors (SI units).

    dynamics: model error of the equations of motion, per coordinate (N m or N).
    integration_position / integration_velocity: per keyframe step (rad or m, rad/s or m/s).
    closure_*: loop-closure residuals at position (m or rad), velocity, acceleration level.
    input_random_walk: unknown inputs' random walk (N m per sqrt(s)); ``input_model: random_walk``.
    input_rate_walk: the unknown inputs' rates' random walk (N m/s per sqrt(s));
    ``input_model: integrated``. In a config, ``auto`` (the default) derives it from the rig:
    :func:`auto_input_rate_walk`.
    jerk_walk: the input joints' jerks' random walk (rad/s^3 or m/s^3 per sqrt(s));
    ``input_model: jerk``.
    gravity_random_walk / mass_random_walk: slow parameters' random walk (per sqrt(s)).
    prior_*: the initial state's prior (loose; ``prior_input_rate`` N m/s, ``prior_jerk`` rad/s^3).
    multiplier: every closure multiplier's sigma (N or N m) on a rig whose closure rows are
    redundant at every pose (Bricard's mechanism): there the rows leave a self-stress free, which
    this weak prior holds at the least norm; unused on other rigs.
    """
    dynamics: float = 1.0
    integration_position: float = 1e-5
    integration_velocity: float = 1e-3
    closure_position: float = 1e-6
    closure_velocity: float = 1e-5
    closure_acceleration: float = 1e-3
    input_random_walk: float = 10.0
    input_rate_walk: float = 20.0
    jerk_walk: float = 10.0
    gravity_random_walk: float = 0.05
    mass_random_walk: float = 0.05
    prior_position: float = 0.5
    prior_velocity: float = 2.0
    prior_acceleration: float = 50.0
    prior_input: float = 100.0
    prior_input_rate: float = 1000.0
    prior_jerk: float = 1000.0
    prior_gravity: float = 1.0
    prior_mass: float = 0.5
    multiplier: float = 1e4


RATE_WALK_FREQUENCY = 2.0
"""rad/s: the motion's frequency that ``noise.input_rate_walk: auto`` assumes on a rig without a
``mechanism.top_speed``."""


def auto_input_rate_walk(input_random_walk: float, top_speed: float) -> float:
    """``noise.input_rate_walk: auto`` (N m/s per sqrt(s)): the input random walk times the motion's
    frequency (the rig's ``top_speed`` in rad/s, else :data:`RATE_WALK_FREQUENCY`): an input that
    varies at that frequency by about the random walk's size over a second. Measured (docs/forces.md):
    the rod pendulum (a 0.5 Hz sine, 5 -> 10) and the double pendulum's real runs take 10-20, the
    fast crank (80 rad/s) 800-1000."""
    return input_random_walk * (top_speed if top_speed > 0 else RATE_WALK_FREQUENCY)


@dataclass(frozen=True)
class ModelErrorConfig:
    """An unknown generalised force on every DOF coordinate (N m or N; on every joint when the rig
    has load cells), a random-walk state of the graph that enters the equations of motion like
    an unknown input: it takes up any model error (gravity, masses, friction, an unmodelled
    load) causally, without a parameter to pick. Needs the DOF positions seen directly
    (encoders): where they are seen only through the dynamics (gyros alone) a free force on
    them makes them unobservable.

    random_walk: its random walk (N m or N per sqrt(s)); 0 = off (no such state).
    prior: the prior sigma of its initial value (N m or N; the prior mean is 0)."""
    random_walk: float = 0.0
    prior: float = 100.0

    @property
    def enabled(self) -> bool:
        return self.random_walk > 0.0


@dataclass(frozen=True)
class ModelUncertaintyConfig:
    """The scale of the model's uncertainty (``noise.dynamics``, ``noise.input_random_walk`` and
    ``model_error.random_walk`` together), chosen online from the sensors' innovations
    (:mod:`mbfg_ros.estimation.model_uncertainty`).

    adapt: choose it online (false: the configured noises as they are, scale 1).
    min, max: the bounds of the scale.
    seconds: s of each run (after a start or a restart; after the second before a later trigger)
    over which it is chosen; then held.
    trigger: sigmas; the search starts when an encoder's running innovation scale is above it 1 s
    into the run (the noises are wrong), or later, whenever it first is (a rig started at rest
    fits its noise until it moves; a rig without encoders holds scale 1); 0: it always runs
    (``mbfg identify`` writes 0: the configured noises were chosen for the model before
    identification).
    background_share: of one core, the most the search may use on average in a live node (where it
    runs in the time spare between intake ticks); 1: all the spare time. Replays ignore it."""
    adapt: bool = True
    min: float = 0.01
    max: float = 1.0
    seconds: float = 6.0
    trigger: float = 1.5
    background_share: float = 0.1


@dataclass(frozen=True)
class RobustLossConfig:
    """Robust kernel on sensor factors; ``threshold`` is in standard deviations."""
    type: str = "huber"
    threshold: float = 3.0


@dataclass(frozen=True)
class EstimatorConfig:
    """Settings of the fixed-lag smoother (see README "estimator" section)."""
    keyframe_rate: float = 200.0
    keyframe_rate_auto: bool = False     # chosen from mechanism.top_speed (``keyframe_rate: auto``)
    lag: float = 1.0
    keyframes_per_update: int = 0
    native_code: str = "auto"
    integrator: str = "trapezoidal"
    input_model: str = "random_walk"
    sensor_wait: float = 0.01
    initial_pose: str = "sensors"
    gauss_newton_iterations: int = 0
    gauss_newton_adaptive: int = 3
    relinearize_budget: int = 25
    relinearize_horizon: int = 25
    relinearize_threshold: float = 3e-3
    relinearize_velocity_factor: float = 1000.0
    acceleration_constraints: bool = True
    estimate_gravity: bool = False
    estimate_mass_link: str = ""
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    robust_loss: RobustLossConfig = field(default_factory=RobustLossConfig)
    model_error: ModelErrorConfig = field(default_factory=ModelErrorConfig)
    model_uncertainty: ModelUncertaintyConfig = field(default_factory=ModelUncertaintyConfig)
    stamp_jitter: float = 0.0            # s, the stamps' timing error (sigma) of every sensor ...
    stamp_jitter_auto: bool = True       # ... or measured per sensor from its stamps (``stamp_jitter: auto``)
    divergence_threshold: float = 1e6
    divergence_window: float = 0.5
    divergence_sigma: float = 5.0

    @property
    def input_walk(self) -> float:
        """The walk of ``input_model``'s process (per sqrt(s)): ``noise.input_random_walk`` N m,
        ``input_rate_walk`` N m/s or ``jerk_walk`` rad/s^3."""
        nz = self.noise
        return {"random_walk": nz.input_random_walk, "integrated": nz.input_rate_walk,
                "jerk": nz.jerk_walk}[self.input_model]

    @property
    def prior_input_rate(self) -> float:
        """The prior sigma of the inputs' rates at a run's start (``noise.prior_input_rate`` N m/s,
        or ``prior_jerk`` rad/s^3 with ``input_model: jerk``)."""
        return self.noise.prior_jerk if self.input_model == "jerk" else self.noise.prior_input_rate


@dataclass(frozen=True)
class InitialConfig:
    """Initial assembly: DOF values, a hint for the other joints (the branch), DOF velocities."""
    positions: dict[str, float] = field(default_factory=dict)
    hint: dict[str, float] = field(default_factory=dict)
    velocities: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RigConfig:
    """One rig: the URDF and everything URDF cannot say."""
    name: str
    urdf: Path
    source: Path | None
    base_frame: str
    gravity: tuple[float, float, float]
    dof: tuple[str, ...]
    initial: InitialConfig
    frames: tuple[FrameConfig, ...]
    closures: tuple[ClosureConfig, ...]
    joints: dict[str, JointConfig]
    sensors: SensorsConfig
    estimator: EstimatorConfig
    truth_namespace: str = "/truth"
    top_speed: float = 0.0          # expected top DOF speed, rad/s or m/s (0: not given)
    springs: tuple[SpringConfig, ...] = ()

    def joint(self, name: str) -> JointConfig:
        """The joint's physics config (defaults for joints the file does not mention)."""
        return self.joints.get(name) or JointConfig(name=name)


def _frames(root: YamlNode) -> tuple[FrameConfig, ...]:
    out = []
    for n in root.nodes("frames"):
        out.append(FrameConfig(name=n.str("name"), parent=n.str("parent"),
                               xyz=n.vector("xyz", 3, (0.0, 0.0, 0.0)),
                               rpy=n.vector("rpy", 3, (0.0, 0.0, 0.0))))
        n.finish()
    return tuple(out)


def _closures(root: YamlNode) -> tuple[ClosureConfig, ...]:
    out = []
    for n in root.nodes("closures"):
        kind = n.str("type", choices=CLOSURE_TYPES)
        length = n.float("length", None, positive=True) if kind == "distance" else None
        if kind == "distance" and length is None:
            raise n.error("length", "a distance closure needs its rod length (m)")
        out.append(ClosureConfig(name=n.str("name"), type=kind, frame_a=n.str("frame_a"),
                                 frame_b=n.str("frame_b"),
                                 axis=n.vector("axis", 3, (0.0, 0.0, 1.0), unit=True),
                                 plane_normal=n.vector("plane_normal", 3, (0.0, 0.0, 1.0), unit=True),
                                 length=length))
        n.finish()
    return tuple(out)


def _springs(root: YamlNode) -> tuple[SpringConfig, ...]:
    out = []
    for n in root.nodes("springs"):
        spring = SpringConfig(name=n.str("name"), frame_a=n.str("frame_a"), frame_b=n.str("frame_b"),
                              stiffness=n.float("stiffness", 0.0, nonnegative=True, unit="N/m"),
                              rest_length=n.float("rest_length", 0.0, nonnegative=True, unit="m"),
                              damping=n.float("damping", 0.0, nonnegative=True, unit="N s/m"))
        if spring.stiffness == 0.0 and spring.damping == 0.0:
            raise n.error("stiffness", "a spring needs a stiffness or a damping (both are 0)", 0.0)
        out.append(spring)
        n.finish()
    return tuple(out)


def _joints(root: YamlNode) -> dict[str, JointConfig]:
    out = {}
    for name, n in root.mapping_nodes("joints"):
        out[name] = JointConfig(
            name=name, viscous=n.float("viscous", 0.0, nonnegative=True),
            coulomb=n.float("coulomb", 0.0, nonnegative=True),
            coulomb_velocity=n.float("coulomb_velocity", 0.01, positive=True),
            armature=n.float("armature", 0.0, nonnegative=True, unit="kg m^2 or kg"),
            offset=n.float("offset", 0.0, unit="N m or N"),
            actuation=n.str("actuation", "passive", choices=ACTUATION_KINDS),
            topic=topic_field(n) if n.has("topic") else "joint_commands")
        n.finish()
    return out


def _sensors(root: YamlNode) -> SensorsConfig:
    s = root.node("sensors", {})
    sections = {}
    for kind in SENSOR_KINDS:
        items = []
        for n in s.nodes(kind.section):
            items.append(kind.parse(n))
            n.finish()
        sections[kind.section] = tuple(items)
    s.finish()
    names = [x.name for items in sections.values() for x in items]
    for name in names:
        if names.count(name) > 1:
            raise s.error(None, "sensor names must be unique", name)
    return SensorsConfig(**sections)


def _estimator(root: YamlNode, top_speed: float = 0.0) -> EstimatorConfig:
    e = root.node("estimator", {})
    nz = e.node("noise", {})
    defaults = NoiseConfig()
    rate_auto = nz.raw("input_rate_walk", "auto") == "auto"
    noise = NoiseConfig(**{k: noise_field(nz, k, getattr(defaults, k))
                           for k in NoiseConfig.__dataclass_fields__ if not (rate_auto and k == "input_rate_walk")})
    if rate_auto:
        noise = replace(noise, input_rate_walk=auto_input_rate_walk(noise.input_random_walk, top_speed))
    nz.finish()
    rl = e.node("robust_loss", {})
    robust = RobustLossConfig(type=rl.str("type", "huber", choices=ROBUST_LOSSES),
                              threshold=rl.float("threshold", 3.0, positive=True,
                                                 min=ROBUST_THRESHOLD_RANGE[0],
                                                 max=ROBUST_THRESHOLD_RANGE[1], unit="sigmas"))
    rl.finish()
    me = e.node("model_error", {})
    model_error = ModelErrorConfig(
        random_walk=me.float("random_walk", 0.0, nonnegative=True, max=NOISE_RANGE[1], unit="N m per sqrt(s)"),
        prior=noise_field(me, "prior", ModelErrorConfig.prior))
    me.finish()
    mu = e.node("model_uncertainty", {})
    dm = ModelUncertaintyConfig()
    uncertainty = ModelUncertaintyConfig(
        adapt=mu.bool("adapt", dm.adapt),
        min=mu.float("min", dm.min, positive=True, min=NOISE_RANGE[0], max=1.0),
        max=mu.float("max", dm.max, positive=True, min=1.0, max=NOISE_RANGE[1]),
        seconds=mu.float("seconds", dm.seconds, nonnegative=True, max=1e6, unit="s"),
        trigger=mu.float("trigger", dm.trigger, nonnegative=True, max=1e6, unit="sigma"),
        background_share=mu.float("background_share", dm.background_share, positive=True, max=1.0,
                                  unit="of one core"))
    mu.finish()
    d = EstimatorConfig()
    jitter_auto = e.raw("stamp_jitter", "auto") == "auto"
    jitter = 0.0 if jitter_auto else e.float("stamp_jitter", 0.0, nonnegative=True, max=1.0, unit="s")
    iters = e.raw("gauss_newton_iterations", d.gauss_newton_iterations)
    adaptive = e.raw("gauss_newton_adaptive", d.gauss_newton_adaptive)
    relin = e.raw("relinearize_budget", d.relinearize_budget)
    horizon = e.raw("relinearize_horizon", d.relinearize_horizon)
    per_update = e.raw("keyframes_per_update", d.keyframes_per_update)
    for key, val, top in (("gauss_newton_iterations", iters, 10), ("gauss_newton_adaptive", adaptive, 10),
                          ("relinearize_budget", relin, 100000),
                          ("relinearize_horizon", horizon, 100000), ("keyframes_per_update", per_update, 64)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 0 or val > top:
            raise e.error(key, f"expected a whole number from 0 to {top}", val)
    auto = e.raw("keyframe_rate", "auto") == "auto"
    if auto:              # from the rig's top speed (model/speed.py): 200 Hz without one
        rate = min(needed_keyframe_rate(top_speed), KEYFRAME_RATE_RANGE[1])
    else:
        rate = e.float("keyframe_rate", d.keyframe_rate, positive=True,
                       min=KEYFRAME_RATE_RANGE[0], max=KEYFRAME_RATE_RANGE[1], unit="Hz")
    cfg = EstimatorConfig(
        keyframe_rate=rate,
        keyframe_rate_auto=auto,
        lag=e.float("lag", d.lag, positive=True, min=LAG_RANGE[0], max=LAG_RANGE[1], unit="s"),
        keyframes_per_update=per_update,
        native_code=e.str("native_code", d.native_code, choices=("auto", "off")),
        integrator=e.str("integrator", d.integrator, choices=INTEGRATORS),
        input_model=e.str("input_model", d.input_model, choices=INPUT_MODELS),
        sensor_wait=e.float("sensor_wait", d.sensor_wait, nonnegative=True),
        initial_pose=e.str("initial_pose", d.initial_pose, choices=("sensors", "config")),
        gauss_newton_iterations=iters, gauss_newton_adaptive=adaptive, relinearize_budget=relin, relinearize_horizon=horizon,
        relinearize_threshold=e.float("relinearize_threshold", d.relinearize_threshold, positive=True),
        relinearize_velocity_factor=e.float("relinearize_velocity_factor", d.relinearize_velocity_factor, positive=True),
        acceleration_constraints=e.bool("acceleration_constraints", d.acceleration_constraints),
        estimate_gravity=e.bool("estimate_gravity", d.estimate_gravity),
        estimate_mass_link=e.str("estimate_mass_link", ""),
        noise=noise, robust_loss=robust, model_error=model_error, model_uncertainty=uncertainty,
        stamp_jitter=jitter, stamp_jitter_auto=jitter_auto,
        divergence_threshold=e.float("divergence_threshold", d.divergence_threshold, positive=True),
        divergence_window=e.float("divergence_window", d.divergence_window, positive=True, min=0.01, max=60.0,
                                  unit="s"),
        divergence_sigma=e.float("divergence_sigma", d.divergence_sigma, positive=True, min=1.0, max=1e6,
                                 unit="sigmas"))
    problem = window_problem(cfg.keyframe_rate, cfg.lag)
    if problem:
        raise e.error("lag", problem, cfg.lag)
    if cfg.sensor_wait >= cfg.lag:
        raise e.error("sensor_wait", f"must be shorter than the lag ({cfg.lag:g} s): a keyframe "
                      "cannot wait for sensors longer than the window keeps it", cfg.sensor_wait)
    e.finish()
    return cfg


def window_problem(keyframe_rate: float, lag: float) -> str:
    """What is wrong with a smoother window of ``lag`` s at ``keyframe_rate`` Hz ("" if nothing):
    it must hold from 2 to :data:`MAX_WINDOW_KEYFRAMES` keyframes."""
    keyframes = lag * keyframe_rate
    if keyframes < 2.0:
        return f"the lag must span at least 2 keyframes at {keyframe_rate:g} Hz"
    if keyframes > MAX_WINDOW_KEYFRAMES:
        return (f"the window would hold {keyframes:.0f} keyframes at {keyframe_rate:g} Hz; at "
                f"most {MAX_WINDOW_KEYFRAMES} are allowed: shorten the lag or lower keyframe_rate")
    return ""


def parse_rig_config(data: Any, *, source: str | Path | None = None,
                     urdf_override: str | Path | None = None) -> RigConfig:
    """Validate an already-parsed YAML document into a :class:`RigConfig`.

    ``source`` is the file the document came from (for messages and to resolve the relative
    URDF path); ``urdf_override`` replaces ``mechanism.urdf`` (e.g. robot_description on a node).
    """
    file = str(source) if source is not None else None
    root = YamlNode(data, "", file)
    m = root.node("mechanism")
    base_dir = Path(source).resolve().parent if source is not None else Path.cwd()
    if urdf_override is not None:
        urdf = Path(urdf_override)
        m.raw("urdf", None)
    else:
        urdf = Path(m.str("urdf"))
        if not urdf.is_absolute():
            urdf = (base_dir / urdf).resolve()
        if not urdf.is_file():
            raise m.error("urdf", f"no such file (looked for {urdf})", m.data.get("urdf"))
    name = m.str("name", Path(source).stem if source else "mechanism")
    gravity = m.vector("gravity", 3, (0.0, 0.0, -9.81))
    dof = tuple(m.str_list("dof", []))
    init = m.node("initial", {})
    initial = InitialConfig(positions=init.float_map("positions", {}),
                            hint=init.float_map("hint", {}),
                            velocities=init.float_map("velocities", {}))
    init.finish()
    base_frame = m.str("base_frame", "")
    truth_ns = m.str("truth_namespace", "/truth")
    top_speed = m.float("top_speed", 0.0, nonnegative=True, max=1e5, unit="rad/s or m/s")
    m.finish()
    cfg = RigConfig(name=name, urdf=urdf, source=Path(source).resolve() if source else None,
                    base_frame=base_frame, gravity=gravity, dof=dof, initial=initial,
                    frames=_frames(root), closures=_closures(root), joints=_joints(root),
                    sensors=_sensors(root), estimator=_estimator(root, top_speed), truth_namespace=truth_ns,
                    top_speed=top_speed, springs=_springs(root))
    root.finish()
    for what, items in (("frames", cfg.frames), ("closures", cfg.closures), ("springs", cfg.springs)):
        names = [x.name for x in items]
        for i, n in enumerate(names):
            if names.index(n) != i:
                raise ConfigError("names must be unique", file=file, field=f"{what}[{i}].name", value=n)
    g = math.sqrt(sum(x * x for x in cfg.gravity))
    if not g <= GRAVITY_LIMIT:
        raise ConfigError(f"must be at most {GRAVITY_LIMIT:g} m/s^2 in magnitude (about 100 g; "
                          "Earth's is 9.81)", file=file, field="mechanism.gravity",
                          value=list(cfg.gravity))
    return cfg


def load_rig_config(path: str | Path, *, urdf_override: str | Path | None = None) -> RigConfig:
    """Read and validate a mechanism config file (YAML)."""
    return parse_rig_config(load_yaml_file(path), source=Path(path), urdf_override=urdf_override)
