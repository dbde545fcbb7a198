"""`mbfg simulate <config.yaml> --out <bag>`: simulate a rig, write its sensors and ground truth.

Integrates the truth (the config with the scenario's modelling errors), synthesizes the config's
sensors (and known-input commands) and writes them with the ground truth to a rosbag2, then
prints (and with --json writes) what was written and the accuracy of the integration.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from mbfg_ros.errors import CliError, MbfgError
from mbfg_ros.io.bag_writer import STORAGE_PLUGINS, check_output_path, scenario_custom_data, write_simulation_bag
from mbfg_ros.io.messages import DEFAULT_EPOCH
from mbfg_ros.model.channels import channel_names
from mbfg_ros.io.simulation_messages import sensor_topics
from mbfg_ros.model.validation import load_rig
from mbfg_ros.sim.forward import simulate
from mbfg_ros.sim.ground_truth import DEFAULT_TRUTH_RATE, ground_truth
from mbfg_ros.sim.input_profiles import InputProfile
from mbfg_ros.sim.scenario import INPUT_PROFILES, Scenario
from mbfg_ros.sim.sensors import SENSOR_KINDS, SensorOptions, sensor_channels, synthesize


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="mechanism config (YAML)")
    p.add_argument("--out", required=True, metavar="BAG", help="the rosbag2 directory to write")
    p.add_argument("--duration", type=float, default=10.0, metavar="S", help="simulated time, s (default 10)")
    g = p.add_argument_group("scenario (how the truth differs from the config)")
    g.add_argument("--gravity-error", type=float, default=0.0, metavar="G",
                   help="m/s^2 added to the truth's gravity magnitude (default 0)")
    g.add_argument("--mass-error", action="append", default=[], metavar="LINK=FACTOR",
                   help="the truth's link mass and inertia are the config's times FACTOR (repeatable)")
    g.add_argument("--length-error", action="append", default=[], metavar="JOINT=FACTOR",
                   help="the truth's joint origin offset is the config's times FACTOR (repeatable)")
    g.add_argument("--initial-error", default="0", metavar="RAD",
                   help="rad or m added to the config's initial DOF values for the truth's start; one "
                        "value for every DOF or a comma-separated list in mechanism.dof order (default 0)")
    g.add_argument("--input", default="none", choices=INPUT_PROFILES,
                   help="input effort profile on every known- and unknown-input joint (default none)")
    g.add_argument("--input-amplitude", type=float, default=1.0, metavar="A",
                   help="N m or N: step height, sine amplitude, random standard deviation (default 1)")
    g.add_argument("--input-frequency", type=float, default=0.5, metavar="F",
                   help="Hz: sine frequency, random knot rate (default 0.5)")
    g.add_argument("--input-start", type=float, default=1.0, metavar="S", help="s: inputs start here (default 1)")
    g.add_argument("--input-offset", type=float, default=0.0, metavar="E",
                   help="N m or N: a constant effort added to the profile from --input-start (default 0)")
    g.add_argument("--input-scale", action="append", default=[], metavar="JOINT=FACTOR",
                   help="that joint's input effort times FACTOR (repeatable; e.g. an arm's wrists)")
    g.add_argument("--no-friction", action="store_true", help="frictionless truth (ignore the config's friction)")
    g.add_argument("--disturbance", type=float, default=0.0, metavar="SIGMA",
                   help="N m (N on prismatic joints): an unmodelled force on every joint, a Gaussian "
                        "draw of this standard deviation held for 1/--disturbance-rate s, never "
                        "published: what the estimator's noise.dynamics stands for (the same sigma "
                        "at the keyframe rate; default 0: none)")
    g.add_argument("--disturbance-rate", type=float, default=200.0, metavar="HZ",
                   help="Hz: how often the disturbance draws (default 200, the default keyframe rate)")
    g.add_argument("--seed", type=int, default=0, metavar="N", help="seed of every random draw (default 0)")
    s = p.add_argument_group("sensors")
    s.add_argument("--rate", action="append", default=[], metavar="KEY=HZ",
                   help=f"sample rate by kind ({', '.join(SENSOR_KINDS)}) or by sensor name "
                        "(repeatable; a name beats a kind, a kind beats the config's rate)")
    s.add_argument("--no-noise", action="store_true", help="no Gaussian sensor noise")
    s.add_argument("--no-quantize", action="store_true", help="no encoder quantisation")
    s.add_argument("--gyro-bias", type=float, default=0.0, metavar="RAD_S",
                   help="standard deviation of a constant gyro bias per axis, rad/s (default 0)")
    s.add_argument("--gyro-bias-walk", action="store_true",
                   help="add a gyro bias random walk with the config's bias_instability")
    s.add_argument("--jitter", type=float, default=0.0, metavar="S", help="std of sample-time jitter, s (default 0)")
    s.add_argument("--delay", type=float, default=0.0, metavar="S", help="transport delay, s (default 0)")
    s.add_argument("--dropout", type=float, default=0.0, metavar="P", help="probability a sample is lost (default 0)")
    s.add_argument("--outliers", type=float, default=0.0, metavar="P",
                   help="probability a sample is an outlier (default 0)")
    s.add_argument("--outlier-scale", type=float, default=10.0, metavar="SIGMAS",
                   help="outlier size in noise standard deviations (default 10)")
    o = p.add_argument_group("output")
    o.add_argument("--truth-rate", type=float, default=DEFAULT_TRUTH_RATE, metavar="HZ",
                   help=f"rate of the ground-truth topics, Hz (default {DEFAULT_TRUTH_RATE:g})")
    o.add_argument("--epoch", type=float, default=DEFAULT_EPOCH, metavar="S",
                   help=f"absolute time of t = 0 in the stamps, s since 1970 (default {DEFAULT_EPOCH:.0f})")
    o.add_argument("--storage", default="mcap", choices=sorted(STORAGE_PLUGINS), help="bag storage (default mcap)")
    o.add_argument("--overwrite", action="store_true", help="replace an existing bag at --out")
    o.add_argument("--json", metavar="FILE", help="also write the summary as JSON to FILE ('-' = stdout)")
    o.add_argument("--no-progress", action="store_true", help="no progress bars (they show only on a terminal)")


def _positive(option: str, value: float, unit: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise CliError(f"{option}: must be a positive number of {unit} (value: {value:g})")
    return value


def _nonnegative(option: str, value: float, unit: str) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise CliError(f"{option}: must be >= 0 {unit} (value: {value:g})")
    return value


def _finite(option: str, value: float, unit: str) -> float:
    if not math.isfinite(value):
        raise CliError(f"{option}: must be a finite number of {unit} (value: {value:g})")
    return value


def _probability(option: str, value: float) -> float:
    if not (0.0 <= value < 1.0):
        raise CliError(f"{option}: must be a probability in [0, 1) (value: {value:g})")
    return value


def _pairs(option: str, items: list[str], known: list[str], what: str, unit: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, val = item.partition("=")
        key = key.strip()
        try:
            number = float(val)
        except ValueError:
            number = None
        if not sep or not key or number is None:
            raise CliError(f"{option}: expected {what.upper().replace(' ', '_')}=VALUE (value: {item!r})")
        if key not in known:
            raise CliError(f"{option}: unknown {what} {key!r} (known: {', '.join(known) or 'none'})")
        if not (math.isfinite(number) and number > 0):
            raise CliError(f"{option}: {key} must be a positive {unit} (value: {val.strip()})")
        out[key] = number
    return out


def _initial_error(text: str, dof: int) -> tuple[float, ...] | float:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        raise CliError(f"--initial-error: expected a number or a comma-separated list (value: {text!r})") from None
    if len(values) == 1:
        return values[0]
    if len(values) != dof:
        raise CliError(f"--initial-error: the rig has {dof} DOF, got {len(values)} values (value: {text!r})")
    return tuple(values)


def build_inputs(args: argparse.Namespace):
    """Validate the options and build (config mechanism, Scenario, SensorOptions, out path)."""
    _positive("--duration", args.duration, "seconds")
    mech = load_rig(args.config).mech
    rates = _pairs("--rate", args.rate, list(SENSOR_KINDS) + channel_names(mech), "sensor or kind", "rate in Hz")
    scenario = Scenario(
        duration=args.duration, gravity_error=args.gravity_error,
        mass_scale=_pairs("--mass-error", args.mass_error, mech.link_names, "link", "factor"),
        length_scale=_pairs("--length-error", args.length_error, mech.joint_names, "joint", "factor"),
        initial_dof_offset=_initial_error(args.initial_error, len(mech.dof)),
        input_profile=args.input, input_amplitude=args.input_amplitude,
        input_frequency=(_positive("--input-frequency", args.input_frequency, "Hz")
                         if args.input in ("sine", "random") else args.input_frequency),
        input_start=_nonnegative("--input-start", args.input_start, "s"),
        input_offset=_finite("--input-offset", args.input_offset, "N m or N"),
        input_scale=_pairs("--input-scale", args.input_scale, mech.known_input_joints + mech.input_joints,
                           "input joint", "factor"),
        friction=not args.no_friction,
        disturbance=_nonnegative("--disturbance", args.disturbance, "N m or N"),
        disturbance_rate=_positive("--disturbance-rate", args.disturbance_rate, "Hz"), seed=args.seed)
    options = SensorOptions(
        rates=rates, noise=not args.no_noise, quantize=not args.no_quantize,
        gyro_bias=_nonnegative("--gyro-bias", args.gyro_bias, "rad/s"),
        gyro_bias_walk=args.gyro_bias_walk,
        jitter=_nonnegative("--jitter", args.jitter, "s"), delay=_nonnegative("--delay", args.delay, "s"),
        dropout=_probability("--dropout", args.dropout), outlier_rate=_probability("--outliers", args.outliers),
        outlier_scale=_nonnegative("--outlier-scale", args.outlier_scale, "sigmas"), seed=args.seed)
    sensor_topics(mech)                  # sensors that cannot share a topic, before simulating
    sensor_channels(mech, options)       # and load cells of one topic given different rates
    _positive("--truth-rate", args.truth_rate, "Hz")
    if not math.isfinite(args.epoch) or args.epoch < 0:
        raise CliError(f"--epoch: must be a time >= 0 s (value: {args.epoch:g})")
    try:
        out = check_output_path(args.out, args.overwrite, option="--out")
    except MbfgError as exc:
        raise CliError(str(exc)) from None
    if args.json and args.json != "-":
        jp = Path(args.json)
        if jp.is_dir() or not jp.resolve().parent.is_dir():
            raise CliError(f"--json: cannot write {args.json!r} (not a file in an existing directory)")
    return mech, scenario, options, out


def run(args: argparse.Namespace) -> int:
    mech, scenario, options, out = build_inputs(args)
    show = None if not args.no_progress else False     # None: tqdm shows bars on terminals only
    t0 = time.perf_counter()
    trajectory = simulate(mech, scenario, progress=show is None and sys.stderr.isatty())
    t1 = time.perf_counter()
    samples = synthesize(trajectory, options)
    truth = ground_truth(trajectory, args.truth_rate)
    t2 = time.perf_counter()
    channels = sensor_channels(trajectory.mechanism, options)
    summary = write_simulation_bag(
        out, trajectory.mechanism, samples, truth, storage=args.storage, epoch=args.epoch,
        overwrite=args.overwrite, channels=channels,
        custom_data={**scenario_custom_data(scenario.describe(), _options_facts(options)),
                     "mbfg.config": str(Path(args.config).resolve())},
        progress=show is None and sys.stderr.isatty(), duration=scenario.duration)
    t3 = time.perf_counter()
    truth_mech = trajectory.mechanism
    conservative = not (truth_mech.has_friction or truth_mech.has_offset
                        or (truth_mech.springs and truth_mech.springs.damped)
                        or InputProfile(truth_mech, scenario).active or scenario.disturbance > 0)
    facts = {
        "bag": str(out), "storage": args.storage, "config": str(args.config),
        "duration": scenario.duration, "epoch": args.epoch,
        "messages": summary["messages"], "topics": summary["topics"],
        "sensors": {ch.name: {"kind": ch.kind, "topic": ch.topic, "rate": ch.rate,
                              "time_offset": ch.model.time_offset} for ch in channels},
        "truth_rate": args.truth_rate,
        "scenario": scenario.describe(), "sensor_options": _options_facts(options),
        "input_joints": {"known": list(truth_mech.known_input_joints), "unknown": list(truth_mech.input_joints)},
        "conservative": conservative,
        "energy_drift": trajectory.energy_drift(),
        "max_closure_residual": float(trajectory.closure_residual().max()),
        "singular_passages": [{"t": t, "ratio": r} for t, r in trajectory.singular_passages()],
        "max_integrator_drift": trajectory.stats.max_drift,
        "rhs_evaluations": trajectory.stats.rhs_evaluations,
        "wall_time": t3 - t0,
        "wall_times": {"integration": t1 - t0, "sensors_and_truth": t2 - t1, "writing": t3 - t2},
    }
    if args.json == "-":
        print(json.dumps(facts, indent=2))
        return 0
    print(format_summary(facts))
    if args.json:
        Path(args.json).write_text(json.dumps(facts, indent=2) + "\n")
    return 0


def _options_facts(o: SensorOptions) -> dict:
    return {"rates": dict(o.rates), "noise": o.noise, "quantize": o.quantize, "gyro_bias": o.gyro_bias,
            "gyro_bias_walk": o.gyro_bias_walk, "jitter": o.jitter, "delay": o.delay,
            "dropout": o.dropout, "outlier_rate": o.outlier_rate, "outlier_scale": o.outlier_scale,
            "seed": o.seed}


def format_summary(f: dict) -> str:
    """The human-readable summary of a simulate run."""
    lines = [f"Wrote {f['bag']} ({f['storage']}): {f['messages']} messages over {f['duration']:g} s "
             f"(stamps from epoch {f['epoch']:.3f} s)"]
    width = max(len(t) for t in f["topics"]) if f["topics"] else 10
    twidth = max(len(v["type"]) for v in f["topics"].values()) if f["topics"] else 10
    lines.append(f"  {'topic':<{width}}  {'type':<{twidth}}  count")
    for topic, info in f["topics"].items():
        lines.append(f"  {topic:<{width}}  {info['type']:<{twidth}}  {info['count']}")
    sc = f["scenario"]
    lines.append(
        f"Scenario: gravity error {sc['gravity_error']:g} m/s^2, mass scale {sc['mass_scale'] or 'none'}, "
        f"length scale {sc['length_scale'] or 'none'}, initial DOF offset {sc['initial_dof_offset']}, "
        f"input {sc['input_profile']}"
        + (f" (amplitude {sc['input_amplitude']:g}, frequency {sc['input_frequency']:g} Hz, from "
           f"{sc['input_start']:g} s)" if sc["input_profile"] != "none" else "")
        + (f", offset {sc['input_offset']:g} from {sc['input_start']:g} s" if sc.get("input_offset") else "")
        + (f", disturbance {sc['disturbance']:g} N m or N per joint at {sc['disturbance_rate']:g} Hz"
           if sc.get("disturbance") else "")
        + f", friction {'on' if sc['friction'] else 'off'}, seed {sc['seed']}")
    ij = f["input_joints"]["known"] + f["input_joints"]["unknown"]
    if sc["input_profile"] != "none":
        lines.append(f"Inputs on: {', '.join(ij)}" if ij else
                     "Inputs: no joint of this rig is actuated (actuation known/unknown): the input profile has no effect")
    so = f["sensor_options"]
    rates = ", ".join(f"{name} {s['rate']:g} Hz" + (f" (clock {s['time_offset'] * 1e3:g} ms late)"
                                                    if s.get("time_offset") else "")
                      for name, s in f["sensors"].items()) or "no sensors"
    lines.append(f"Sensors: {rates}; truth {f['truth_rate']:g} Hz")
    lines.append(
        f"Faults: noise {'on' if so['noise'] else 'off'}, quantize {'on' if so['quantize'] else 'off'}, "
        f"gyro bias {so['gyro_bias']:g} rad/s{' + walk' if so['gyro_bias_walk'] else ''}, jitter {so['jitter']:g} s, "
        f"delay {so['delay']:g} s, dropout {so['dropout']:g}, outliers {so['outlier_rate']:g}")
    drift = (f"energy drift {f['energy_drift']:.2e} (relative" + (")" if f["conservative"] else
             ", net of the inputs' work and what friction and dampers dissipated)"))
    lines.append(f"Accuracy: max closure residual {f['max_closure_residual']:.2e}, {drift}")
    if f["singular_passages"]:
        times = ", ".join(f"{p['t']:g}" for p in f["singular_passages"])
        lines.append(f"Singular positions passed: {len(f['singular_passages'])} (the closure Jacobian's rank "
                     f"collapsing: its smallest kept singular value below 1% of its initial one) at t = {times} s")
    w = f["wall_times"]
    lines.append(f"Wall time: {f['wall_time']:.2f} s (integration {w['integration']:.2f} s, sensors and "
                 f"truth {w['sensors_and_truth']:.2f} s, writing {w['writing']:.2f} s)")
    return "\n".join(lines)
