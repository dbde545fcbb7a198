"""The nodes' parameters: one table per node and the checks that span several parameters.

Imports no rclpy: the launch description and ``mbfg run`` check parameter names and values
(params files included) against these tables without starting ROS; each node declares its table
with :func:`~mbfg_ros.ros.node_parameters.declare_node_parameters` (README "The estimator node",
"The sim_rig node"). ``runtime=True`` marks the estimator's parameters that change on a running
node (declared writable; applied by :mod:`mbfg_ros.ros.runtime_parameters`).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mbfg_ros.intake.stamp_order import REORDER_WINDOW, SILENCE_TIMEOUT
from mbfg_ros.intake.time_jumps import DEFAULT_MAX_TIME_GAP
from mbfg_ros.model.config import KEYFRAME_RATE_RANGE, LAG_RANGE, EstimatorConfig, window_problem
from mbfg_ros.model.mechanism import Mechanism
from mbfg_ros.model.validation import load_rig
from mbfg_ros.ros.node_parameters import ParameterError, ParameterSpec
from mbfg_ros.sensors.registry import KIND_NAMES
from mbfg_ros.sim.scenario import INPUT_PROFILES

ESTIMATOR_PARAMETERS: tuple[ParameterSpec, ...] = (
    ParameterSpec("config", str, "", "the rig's mechanism config (YAML file); required"),
    ParameterSpec("robot_description", str, "",
                  "URDF text replacing the config's urdf (e.g. the robot_description of "
                  "robot_state_publisher)"),
    ParameterSpec("urdf", str, "", "URDF file replacing the config's urdf (when no robot_description)"),
    ParameterSpec("keyframe_rate", float, 0.0, "rate of the smoother's keyframes (and of the "
                  "published estimates)", "Hz", *KEYFRAME_RATE_RANGE,
                  zero_means="the config's estimator.keyframe_rate"),
    ParameterSpec("lag", float, 0.0, "length of the fixed-lag window", "s", *LAG_RANGE,
                  zero_means="the config's estimator.lag"),
    ParameterSpec("world_frame", str, "", "a frame attached to the URDF's root link by a static "
                  "identity transform (e.g. map); empty: none"),
    ParameterSpec("frame_prefix", str, "", "prefix of every published link and closure frame id "
                  "(e.g. mbfg/ when robot_state_publisher already publishes the rig's links)"),
    ParameterSpec("publish_tf", bool, True, "publish the estimated link poses on /tf (fixed "
                  "joints, config frames and sensor frames on /tf_static)", runtime=True),
    ParameterSpec("publish_robot_description", bool, True, "publish the URDF the node uses on "
                  "~/robot_description (std_msgs/String, latched) for rviz2's RobotModel"),
    ParameterSpec("publish_forces", bool, True, "publish ~/forces/<closure> and ~/forces/<load cell>",
                  runtime=True),
    ParameterSpec("publish_accelerations", bool, True, "publish ~/dynamic_joint_states (every "
                  "joint's position, velocity, acceleration and effort)", runtime=True),
    ParameterSpec("publish_covariance", bool, False, "publish ~/dof_covariance and the DOF "
                  "variances in ~/dynamic_joint_states "
                  "(marginal covariance of [q_dof, v_dof]; costs time per keyframe)"),
    ParameterSpec("lagged", bool, False, "publish the smoothed estimate of each keyframe as it "
                  "leaves the window (delayed by lag) instead of the newest filtered one"),
    ParameterSpec("sensor_qos", str, "sensor_data", "QoS of the sensor subscriptions: sensor_data "
                  "(best effort, like rclpy's qos_profile_sensor_data) or reliable",
                  choices=("sensor_data", "reliable")),
    ParameterSpec("qos_depth", int, 1000, "history depth of each sensor subscription (DDS keeps "
                  "this many messages while the node is busy; 1000 = 1 s of a 1 kHz encoder)",
                  "messages", 1, 100000),
    ParameterSpec("intake_period", float, 0.0, "the sensor subscriptions are taken this often "
                  "while data flows (one wake-up for every message waiting; a tick is aimed at the arrival of "
                  "the readings that let the next estimates out, at most this long after the last); 0: the "
                  "estimator's update period (keyframes_per_update keyframe periods)",
                  "s", 0.0, 0.1),
    ParameterSpec("max_queue", int, 100000, "readings that may wait for the estimator; beyond it "
                  "readings are dropped and counted (ERROR on /diagnostics)", "readings", 1, 10000000),
    ParameterSpec("reorder_window", float, REORDER_WINDOW, "longest a reading may wait for the "
                  "other topics to catch up (bursts are fed in stamp order)", "s", 0.0, 10.0),
    ParameterSpec("diagnostics_period", float, 1.0, "period of /diagnostics (steady clock)", "s",
                  0.05, 60.0, runtime=True),
    ParameterSpec("silence_timeout", float, SILENCE_TIMEOUT, "a sensor silent for longer than this "
                  "(or 5 of its periods) is reported WARN", "s", 0.01, 3600.0, runtime=True),
    ParameterSpec("health_window", float, 5.0, "/diagnostics judges the inputs, the queue and "
                  "the latency over this rolling window (a warning clears once its cause has been "
                  "gone this long)", "s", 1.0, 3600.0),
    ParameterSpec("max_time_gap", float, DEFAULT_MAX_TIME_GAP, "a sample stamped this much after "
                  "the newest one restarts the estimator instead of integrating the gap", "s", 0.1, 3600.0),
)

SIM_RIG_PARAMETERS: tuple[ParameterSpec, ...] = (
    ParameterSpec("config", str, "", "the rig's mechanism config (YAML file); required"),
    ParameterSpec("urdf", str, "", "URDF file replacing the config's urdf"),
    ParameterSpec("duration", float, 3600.0, "how long the rig runs; the node exits after it", "s",
                  0.1, 1e6),
    ParameterSpec("publish_clock", bool, False, "run in simulated time and publish /clock (run the "
                  "estimator with use_sim_time:=true)"),
    ParameterSpec("rate_factor", float, 1.0, "simulated seconds per wall second (with "
                  "publish_clock only)", "", 0.01, 100.0),
    ParameterSpec("clock_rate", float, 100.0, "rate of /clock messages", "Hz", 1.0, 10000.0),
    ParameterSpec("epoch", float, -1.0, "absolute time of the run's start; negative: the wall "
                  "clock at start-up (1700000000 with publish_clock)", "s"),
    ParameterSpec("chunk", float, 0.5, "rig time simulated (and serialized) per block (every rate "
                  "must give a whole number of samples per chunk)", "s", 0.001, 10.0),
    ParameterSpec("lead", float, 1.0, "the next block is simulated once the published time is "
                  "this close to the simulated one", "s", 0.0, 60.0),
    ParameterSpec("truth_rate", float, 200.0, "rate of the ground-truth topics", "Hz", 1.0, 10000.0),
    ParameterSpec("publish_truth", bool, True, "publish the ground truth under the config's "
                  "truth_namespace"),
    ParameterSpec("wait_for_subscribers", int, 0, "before time starts, wait until every sensor "
                  "topic has this many subscribers (e.g. 1: the estimator), at most wait_timeout",
                  "", 0, 1000),
    ParameterSpec("wait_for_truth", bool, False, "before time starts, also wait for a subscriber "
                  "of the ground truth's joint_states (a test or demo watching the run)"),
    ParameterSpec("wait_timeout", float, 30.0, "longest wait for subscribers", "s", 0.0, 3600.0),
    ParameterSpec("qos_depth", int, 10000, "history depth of every publisher (reliable; 10 s of a "
                  "1 kHz sensor for a subscriber that falls behind)", "messages", 1, 1000000),
    # scenario
    ParameterSpec("gravity_error", float, 0.0, "added to the magnitude of the truth's gravity",
                  "m/s^2", -100.0, 100.0),
    ParameterSpec("initial_error", "float_list", [0.0], "added to the config's initial DOF values "
                  "for the truth's start (one value, or one per DOF)", "rad or m"),
    ParameterSpec("initial_velocity", "float_list", [], "the truth's initial DOF velocities "
                  "(empty: the config's)", "rad/s or m/s"),
    ParameterSpec("input_profile", str, "none", "effort on every known and unknown input joint",
                  choices=INPUT_PROFILES),
    ParameterSpec("input_amplitude", float, 1.0, "step height, sine amplitude or random std",
                  "N m or N"),
    ParameterSpec("input_frequency", float, 0.5, "sine frequency or random knot rate", "Hz", 0.0, 1000.0),
    ParameterSpec("input_start", float, 1.0, "the input is zero before this time", "s", 0.0, 1e6),
    ParameterSpec("friction", bool, True, "use the config's joint friction in the truth"),
    ParameterSpec("mass_error", "str_list", [], "LINK=FACTOR: the truth's link mass and inertia "
                  "times FACTOR"),
    ParameterSpec("length_error", "str_list", [], "JOINT=FACTOR: the truth's joint offset times FACTOR"),
    # sensors
    ParameterSpec("rates", "str_list", [], "KIND_OR_SENSOR=HZ overrides of the sensor rates "
                  f"(kinds: {', '.join(KIND_NAMES)})"),
    ParameterSpec("noise", bool, True, "add the config's Gaussian sensor noise"),
    ParameterSpec("quantize", bool, True, "quantise encoders to the config's resolution"),
    ParameterSpec("gyro_bias", float, 0.0, "std of a constant gyro bias per axis", "rad/s", 0.0, 100.0),
    ParameterSpec("gyro_bias_walk", bool, False, "add a bias random walk (config bias_instability)"),
    ParameterSpec("jitter", float, 0.0, "std of the sample-time jitter", "s", 0.0, 1.0),
    ParameterSpec("delay", float, 0.0, "transport delay: a sample is published at stamp + delay",
                  "s", 0.0, 10.0),
    ParameterSpec("dropout", float, 0.0, "probability that a message is lost", "", 0.0, 0.99),
    ParameterSpec("outliers", float, 0.0, "probability that a sample is an outlier", "", 0.0, 0.99),
    ParameterSpec("outlier_scale", float, 10.0, "size of an outlier in noise stds", "", 0.0, 1e6),
    ParameterSpec("seed", int, 0, "seed of every random draw", "", 0, 2**31 - 1),
    ParameterSpec("mute_sensors", "str_list", [], "sensors that stop publishing at mute_after "
                  "(to test a silent sensor)"),
    ParameterSpec("mute_after", float, 0.0, "rig time at which mute_sensors go silent", "s", 0.0, 1e6),
)


NODE_PARAMETERS: dict[str, tuple[ParameterSpec, ...]] = {"estimator": ESTIMATOR_PARAMETERS,
                                                         "estimator_lifecycle": ESTIMATOR_PARAMETERS,
                                                         "sim_rig": SIM_RIG_PARAMETERS}
"""{console script: its node's parameter table}."""


def check_frame(name: str, value: str, allow_empty: bool = True) -> None:
    if not value and allow_empty:
        return
    if value != value.strip() or any(c.isspace() for c in value) or value.startswith("/"):
        raise ParameterError(f"parameter '{name}' is not a valid frame id (value: {value!r}): "
                             "tf2 frame ids have no spaces and no leading '/'")


def load_node_mechanism(settings: dict) -> Mechanism:
    """The Mechanism of the node's ``config`` with ``robot_description`` or ``urdf`` replacing
    the config's URDF. Raises ParameterError / ConfigError naming the parameter or file."""
    config = settings["config"]
    if not config:
        raise ParameterError("parameter 'config' is required: the rig's mechanism config (YAML), "
                             "e.g. --ros-args -p config:=/path/to/four_bar.yaml")
    path = Path(config).expanduser()
    if not path.is_file():
        raise ParameterError(f"parameter 'config': no such file (value: {config!r}, looked for "
                             f"{path.resolve()})")
    description = settings["robot_description"]
    urdf = settings["urdf"]
    if urdf and not description and not Path(urdf).expanduser().is_file():
        raise ParameterError(f"parameter 'urdf': no such file (value: {urdf!r})")
    # the one validation of `mbfg check`, `replay` and `simulate`: the same line, exit 2
    return load_rig(path, urdf=urdf or None, robot_description=description or None).mech


def estimator_config(settings: dict, mech: Mechanism) -> EstimatorConfig:
    """The estimator settings of the node: the config's with the ``keyframe_rate`` and ``lag``
    parameters applied (0 keeps the config's). Raises ParameterError when ``world_frame`` names
    a link of the URDF (without a ``frame_prefix``), or when lag and keyframe rate do not fit
    (too many keyframes, a lag not longer than the config's ``sensor_wait``)."""
    p = settings
    root = mech.urdf.root_link
    links = set(mech.link_names) | {j.child for j in mech.urdf.tree} | {j.parent for j in mech.urdf.tree}
    if p["world_frame"] and p["world_frame"] != root and p["world_frame"] in links and not p["frame_prefix"]:
        raise ParameterError(f"parameter 'world_frame' names a link of the URDF (value: "
                             f"{p['world_frame']!r}); it must be a frame outside the mechanism "
                             f"(the root link is {root!r}), or set frame_prefix")
    cfg = mech.config.estimator
    if p["keyframe_rate"]:
        cfg = replace(cfg, keyframe_rate=p["keyframe_rate"])
    if p["lag"]:
        cfg = replace(cfg, lag=p["lag"])
    problem = window_problem(cfg.keyframe_rate, cfg.lag)
    if problem:
        raise ParameterError(f"parameters 'lag' and 'keyframe_rate': {problem} (lag {cfg.lag:g} s "
                             f"x {cfg.keyframe_rate:g} Hz)")
    if cfg.sensor_wait >= cfg.lag:
        raise ParameterError(f"parameter 'lag' must be longer than the config's "
                             f"estimator.sensor_wait ({cfg.sensor_wait:g} s) (value: {cfg.lag:g} s)")
    return cfg
